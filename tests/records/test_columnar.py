"""The columnar C encoder writes exactly `encode_example`'s bytes (and `encode_frame`'s
frames) for every stored column type, nulls, lists, fixed-size lists and unicode."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tfpipe.records import ColumnarEncoder, FeatureSpec, Schema, encode_example, encode_frame
from tfpipe.records import columnar

N = 1500  # > 2 x 512 rows: two threads encode a row range each


def _table() -> tuple[pa.Table, Schema]:
    rng = np.random.default_rng(5)
    ints = [int(v) for v in rng.integers(-2**63, 2**63 - 1, N, dtype=np.int64)]
    ints[:4] = [0, -1, -2**63, 2**63 - 1]
    floats = rng.normal(0, 1e3, N).astype(np.float32)
    floats[:5] = [np.nan, np.inf, -np.inf, -0.0, np.float32(1e-45)]
    words = ["", "a", "déjà vu", "東京", "🙂" * 3, "x" * 200]

    def nulls(values: list, every: int) -> list:
        return [None if i % every == 2 else v for i, v in enumerate(values)]

    table = pa.table({
        "id": pa.array(ints, pa.int64()),
        "count": pa.array(nulls(ints, 5), pa.int64()),
        "score": pa.array(floats, pa.float32()),
        "maybe": pa.array(nulls(floats.tolist(), 4), pa.float32()),
        "word": pa.array(nulls([words[i % 6] for i in range(N)], 3), pa.string()),
        "blob": pa.array([bytes(rng.integers(0, 256, i % 7, dtype=np.uint8)) for i in range(N)],
                         pa.binary()),
        "big": pa.array(nulls([words[i % 5] for i in range(N)], 6), pa.large_string()),
        "bigbin": pa.array([words[i % 4].encode() for i in range(N)], pa.large_binary()),
        "tags": pa.array(nulls([[int(v) for v in rng.integers(-300, 300, i % 5)]
                                for i in range(N)], 7), pa.list_(pa.int64())),
        "vals": pa.array(nulls([rng.random(i % 3).astype(np.float32).tolist() for i in range(N)],
                               9), pa.large_list(pa.float32())),
        "names": pa.array([[words[(i + j) % 6] for j in range(i % 4)] for i in range(N)],
                          pa.list_(pa.string())),
        "vec": pa.array([[float(i), -0.5, float(i) * 3] for i in range(N)],
                        pa.list_(pa.float32(), 3)),
        "pair": pa.array(nulls([[i, -i] for i in range(N)], 8), pa.list_(pa.int64(), 2)),
        "ünï/kéy": pa.array(list(range(N)), pa.int64()),
    })
    var = {"count", "maybe", "word", "big", "tags", "vals", "names", "pair"}
    dtypes = {"id": "int64", "count": "int64", "score": "float32", "maybe": "float32",
              "word": "string", "blob": "string", "big": "string", "bigbin": "string",
              "tags": "int64", "vals": "float32", "names": "string", "vec": "float32",
              "pair": "int64", "ünï/kéy": "int64"}
    specs = [FeatureSpec(name, dtypes[name], [3] if name == "vec" else [],
                         "var" if name in var else "fixed") for name in table.column_names]
    return table, Schema(specs)


def _oracle(batch: pa.RecordBatch, schema: Schema) -> list[bytes]:
    rows = batch.to_pylist()
    return [encode_example({k: ([] if v is None else v) for k, v in row.items()}, schema)
            for row in rows]


@pytest.fixture(scope="module")
def table_schema() -> tuple[pa.Table, Schema]:
    return _table()


def test_native_equals_encode_example_on_every_type(table_schema) -> None:
    if columnar.library() is None:
        pytest.skip(f"no C encoder here: {columnar.reason()}")
    table, schema = table_schema
    # A slice: every array has a non-zero offset, as Arrow hands out after a take/slice.
    batch = table.combine_chunks().to_batches()[0].slice(13, N - 40)
    want = _oracle(batch, schema)
    enc = ColumnarEncoder(schema, threads=2)
    assert enc.native
    assert enc.examples(batch) == want
    frames = b"".join(bytes(b) for b in enc.frames(batch))
    assert frames == b"".join(encode_frame(r) for r in want)
    # One thread, two threads, the Python fallback: the same bytes.
    one = b"".join(bytes(b) for b in ColumnarEncoder(schema, threads=1).frames(batch))
    py = b"".join(bytes(b) for b in ColumnarEncoder(schema, native=False).frames(batch))
    assert one == frames == py


def test_columns_not_in_stored_types_are_refused_by_name(table_schema) -> None:
    table, schema = table_schema
    col = "ünï/kéy"
    bad = table.set_column(table.column_names.index(col), col,
                           table.column(col).cast(pa.int32())).to_batches()[0]
    for native in (None, False):
        with pytest.raises(TypeError, match="column 'ünï/kéy'.*int32"):
            ColumnarEncoder(schema, native=native).frames(bad)
    # A fixed scalar feature with a null cannot be encoded (encode_example refuses it too).
    nulls = pa.table({"x": pa.array([1, None], pa.int64())}).to_batches()[0]
    with pytest.raises(TypeError, match="column 'x'.*fixed"):
        ColumnarEncoder(Schema([FeatureSpec("x", "int64", [], "fixed")])).frames(nulls)


def test_json_rows_equal_canonical_json_floats_ints_bytes_nulls() -> None:
    """The plan digest's lines: Python's float repr (powers of two, subnormals, random
    bit patterns, nan/inf), int64 extremes, bytes as hex, nulls, lists."""
    import struct

    from tfpipe.convert._plan import canonical_json

    if columnar.library() is None:
        pytest.skip(f"no C encoder here: {columnar.reason()}")
    rng = np.random.default_rng(2)
    floats = [2.0 ** k for k in range(-1074, 1024, 3)]
    floats += [-(2.0 ** k) * 3 for k in range(-900, 900, 11)]
    floats += [0.0, -0.0, float("nan"), float("inf"), -float("inf"), 1e16, 1e15, 1e-4, 1e-5, 0.1,
               5e-324, 1.7976931348623157e308, 123456789012345678.0]
    floats += [float(np.float32(v)) for v in rng.normal(0, 100, 500)]
    floats += [struct.unpack("<d", rng.bytes(8))[0] for _ in range(3000)]
    n = len(floats)
    batch = pa.record_batch([
        pa.array(floats, pa.float64()),
        pa.array([[int(x) for x in rng.integers(-2**63, 2**63 - 1, i % 3, dtype=np.int64)]
                  if i % 11 else None for i in range(n)], pa.list_(pa.int64())),
        pa.array([bytes(rng.integers(0, 256, i % 5, dtype=np.uint8)) if i % 7 else None
                  for i in range(n)], pa.binary()),
        pa.array([[float(i), -0.5] for i in range(n)], pa.list_(pa.float64(), 2)),
    ], names=["zé", "a", "B", "ünï/kéy"])
    rows = np.arange(n) * 3 + 5
    want = "".join(canonical_json([f"row:{i}", [i, row]]) + "\n"
                   for i, row in zip(rows.tolist(), batch.to_pylist()))
    assert bytes(columnar.json_rows(batch, rows)) == want.encode()


def test_unit_hashes_equal_the_plans_unit_hash() -> None:
    from tfpipe.convert._plan import unit_hash

    if columnar.library() is None:
        pytest.skip(f"no C encoder here: {columnar.reason()}")
    rows = np.concatenate([np.arange(3000), [2**40 + 7, 10**15, 2**63 - 1]])
    for seed, domain in [(0, "split"), (123456789, "order"), (-5, "split"), ("é" * 60, "order")]:
        want = [unit_hash(seed, domain, f"row:{i}") for i in rows.tolist()]
        assert columnar.unit_hashes(f"{seed}:{domain}:row:", rows).tolist() == want
