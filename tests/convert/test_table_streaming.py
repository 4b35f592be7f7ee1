"""The table converter streams CSV/Parquet in bounded memory, with unchanged output.

Two independent checks:

- golden: the sha256 of every file the conversion writes (shards, manifest.json,
  statistics.json, TFDS metadata) equals what the converter produced BEFORE it
  streamed (it read the whole table and held every row in Python). GOLDEN was
  computed once with that code (branch `tabstats`, commit 8ccea30) by running
  `PYTHONPATH=src python tests/convert/test_table_streaming.py` there;
- oracle: the shards decoded with the protobuf classes (tf.train.Example)
  equal the table read by pandas, row by row, in the plan's order.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import pickle
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

ROWS = 1200


def rich_table(num_rows: int = ROWS, seed: int = 11) -> pa.Table:
    """Nulls, unicode strings, binary, ints, floats, bools, dates, timestamps and lists."""
    rng = np.random.default_rng(seed)
    n = num_rows

    def nulls(values: list[Any], every: int) -> list[Any]:
        return [None if i % every == 3 else v for i, v in enumerate(values)]

    words = ["a", "bb", "ccc", "déjà", "東京", "", "z" * 17]
    t0 = dt.datetime(2024, 3, 1, 12, 0, 0)
    return pa.table({
        "id": pa.array(np.arange(n) * 7 - 1000, pa.int64()),
        "count": pa.array(nulls([int(v) for v in rng.integers(0, 50, n)], 5), pa.int32()),
        "price": pa.array(nulls([float(v) for v in rng.normal(10, 3, n)], 7), pa.float64()),
        "ratio": pa.array(rng.random(n).astype(np.float32), pa.float32()),
        "word": pa.array(nulls([words[int(v)] for v in rng.integers(0, 7, n)], 6), pa.string()),
        "cat": pa.array([words[i % 3] for i in range(n)]).dictionary_encode(),
        "blob": pa.array([bytes(rng.integers(0, 256, i % 5, dtype=np.uint8)) for i in range(n)],
                         pa.binary()),
        "flag": pa.array([i % 3 == 0 for i in range(n)], pa.bool_()),
        "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 40) for i in range(n)],
                        pa.date32()),
        "ts": pa.array(nulls([t0 + dt.timedelta(seconds=37 * i) for i in range(n)], 9),
                       pa.timestamp("us")),
        "tags": pa.array(nulls([[int(v) for v in rng.integers(0, 9, i % 4)] for i in range(n)],
                               8), pa.list_(pa.int64())),
        "names": pa.array([[words[(i + j) % 7] if (i + j) % 5 else None for j in range(i % 3)]
                           for i in range(n)], pa.list_(pa.string())),
        "vec": pa.array([[float(i), float(i) / 2] for i in range(n)], pa.list_(pa.float32(), 2)),
        "label": pa.array([int(v) for v in rng.integers(0, 4, n)], pa.int64()),
    })


def csv_table(num_rows: int = ROWS, seed: int = 11) -> pa.Table:
    """What a CSV can hold: the scalar columns (lists, binary and dictionaries cannot)."""
    t = rich_table(num_rows, seed)
    return t.select(["id", "count", "price", "ratio", "word", "flag", "day", "ts", "label"])


def make_inputs(root: Path) -> dict[str, Path]:
    """The tables of every golden conversion, written deterministically under root."""
    from tfpipe.convert.samples import make_table

    root.mkdir(parents=True, exist_ok=True)
    paths = {"rich.parquet": root / "rich.parquet", "plain.csv": root / "plain.csv"}
    pq.write_table(rich_table(), paths["rich.parquet"], row_group_size=250)
    pacsv.write_csv(csv_table(), paths["plain.csv"])
    # The image variant: make_table's images, plus a row whose image is missing and
    # a row with a null label (bad rows, listed under on_error=skip).
    csv_path, parquet_path = make_table(root / "img", num_rows=12, seed=5, size_range=(24, 48))
    table = pq.read_table(parquet_path)
    extra = pa.table({"image": ["images/missing.jpg", "images/00001.jpg"],
                      "label": ["cat", None], "label_id": [1, 2], "weight": [0.5, 0.25],
                      "flag": [True, False], "note": ["x", None],
                      "tags": pa.array([[1], []], pa.list_(pa.int64()))})
    table = pa.concat_tables([table, extra.cast(table.schema)])
    paths["img.parquet"] = root / "img" / "bad.parquet"
    pq.write_table(table, paths["img.parquet"], row_group_size=5)
    paths["img.csv"] = root / "img" / "bad.csv"
    pacsv.write_csv(table.drop_columns(["tags"]), paths["img.csv"])
    return paths


# name -> (input, convert() keyword arguments)
CONVERSIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "parquet-stats": ("rich.parquet", dict(split="train=0.7,val=0.3", shard_size="40KB",
                                           seed=7, stats=True, stats_quantiles=10,
                                           stats_top_k=5)),
    "parquet-gzip": ("rich.parquet", dict(shard_size="100KB", seed=3, compression="gzip")),
    "csv-stats": ("plain.csv", dict(split="train=0.8,val=0.2", shard_size="20KB", seed=1,
                                    stats=True, stats_quantiles=8)),
    "img-parquet": ("img.parquet", dict(image_column="image", label_column="label",
                                        shard_size="8KB", seed=2, split="train=0.5,val=0.5")),
    "img-csv": ("img.csv", dict(image_column="image", label_column="label",
                                shard_size="8KB", seed=2)),
}


def convert_all(inputs: dict[str, Path], out_root: Path, names: list[str]) -> dict[str, Any]:
    """{conversion: {file: sha256}} of every file each conversion writes."""
    from tfpipe.convert import convert

    hashes: dict[str, Any] = {}
    for name in names:
        src, kwargs = CONVERSIONS[name]
        out = out_root / name
        convert(inputs[src], out, workers=1, **kwargs)
        hashes[name] = {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                        for p in sorted(out.rglob("*")) if p.is_file()}
    return hashes


GOLDEN: dict[str, dict[str, str]] = {
    'csv-stats': {
        'dataset_info.json':
            '0f302f7989cad2b0fc316ddcf85645b7363e9062f5b2e38ac5ee5c9eae2b8d04',
        'features.json':
            '0f805aa9e6a98199398cdfff1d9d9e9420562c132a210261272a51256d11c309',
        'manifest.json':
            '39b955f622c5f0a210fd78b503973fd501021df55cbc93932bfe1fd1d9edccc6',
        'statistics.json':
            'cb3cd0a241b31c9db6ee7380c040f3158d8b5cb4479b746d8216c09d37e69746',
        'train-00000-of-00013.tfrecord':
            'd875150af208d21a519ebf0a0e6ae6309e0714f8e8768d687606eff4df522302',
        'train-00001-of-00013.tfrecord':
            'ebce7837a573c0d46352d9af1acca98ccab71202f31f8fadc961e0ac9a37529f',
        'train-00002-of-00013.tfrecord':
            '4a770493cf76fadb48872df867fa7acab62be33d5a711981a5ab01d0f2fb46e5',
        'train-00003-of-00013.tfrecord':
            '3888b6226c14e7dec207e77c6c4fa1e015be9ab0d97980f9def3c9897d22dd40',
        'train-00004-of-00013.tfrecord':
            '88544ce1ed702eb3d4b9d7b1957dc22037b285de4a7b1464decdea96905cb422',
        'train-00005-of-00013.tfrecord':
            'ff95f68f7555c7fd0922ea8f594422d48719da827998ff65615352c23d744656',
        'train-00006-of-00013.tfrecord':
            '3ef4ef9c24ad8d9429e6d8ba4f486b69092b2fc2d70e6668561bedf40be818ba',
        'train-00007-of-00013.tfrecord':
            '90ad42c07effacbefd2dba966f684bdd6f787473e3bd45fd0c73355ae0cd46e2',
        'train-00008-of-00013.tfrecord':
            '77864150d7af25f70aac9d828dac401de8af3205f6140e92870ea8784738ae76',
        'train-00009-of-00013.tfrecord':
            '5eb34c15202828c2b51a71b5d7b88fbaef47b2d7fecd9a533bf583081ffd464c',
        'train-00010-of-00013.tfrecord':
            '33dc3f7226759d53d2443a517069711abd3a112000e83765926cbe7f903b9dfd',
        'train-00011-of-00013.tfrecord':
            '66130888ccaba7d0cdbc724f1ff8b285a8eb6ee1e3b48246c9568105b52c0b84',
        'train-00012-of-00013.tfrecord':
            '8015b6bec1a7f442e3f38ce11a604cbdc7fecad9539b31f8aaf1bbb64b0a11d3',
        'val-00000-of-00004.tfrecord':
            'e8670e77ea24b9986c47080aa7cd4fed1b93478882859194d3762fbd15c1c5ae',
        'val-00001-of-00004.tfrecord':
            'ab0d9c19d3295e5d7bf247f13730012e4c8152fb61f04e50f4bd24c5778e48dc',
        'val-00002-of-00004.tfrecord':
            'acdf9a59f6f74d0d0d9683c762fcb5f90c0712ed30453d10129ca883d17a96f1',
        'val-00003-of-00004.tfrecord':
            '1f656f023efb4b97103857ff7c9e8ccccf63fffcfcf5b70041111af18f9f26e3',
    },
    'img-csv': {
        'dataset_info.json':
            '479fe87c3db0dec9dcd9965c1a7f83112e2ea4bee59e3c4561e7aa511433f2cc',
        'features.json':
            '945b15b7968ae3f24f6bb9933854ed8ec479f69c17ef26b40cbfec3b2f88e6cc',
        'manifest.json':
            'b301d290284aaee6c8045300f6c5a4ef1d95934fa38f747b19389c1667830db6',
        'train-00000-of-00003.tfrecord':
            '2e22aac5d69410999a93ab9b7eaa249f663261b39843c9af49177d0dda9375e8',
        'train-00001-of-00003.tfrecord':
            '670db2e910e98ad3592709a9edf8c208f10da284571697a332f10ec32948b95f',
        'train-00002-of-00003.tfrecord':
            'de888715e02e1f194f55755f509018275fac1a5ed9edce734f213deaa51caeb4',
    },
    'img-parquet': {
        'dataset_info.json':
            'cfb6838d76e88b07e04d3de7adb9220493f61c86914b1924fb820696934686cf',
        'features.json':
            '6e79f8a17fef8e028170e00b6215540f5bbf15acfcbd1dfabb059ebb355c0d4f',
        'image.class.label.labels.txt':
            '1524e5d0d84de4991ad3ecb46b0143c3d4e5074fb0628c319ed4fca309a8daf8',
        'manifest.json':
            '01ee56e4847ab8b4766fcdd4806fb6b28af855c9bab6fed244a7e7946be70391',
        'train-00000-of-00001.tfrecord':
            '16b1d1bdae98b09bd1ab235bd0f35760a4e81d5ae0f78a06e6c1ac3c2a6bab6b',
        'val-00000-of-00002.tfrecord':
            'acde3e4a6ea66ff62eafbb71c3e0d1bda4614cbd131565102d7830c467589442',
        'val-00001-of-00002.tfrecord':
            'ebf69b7f974652e17f8b727934b7d2c3bf01a715cc18ac624c766c22b506f2ef',
    },
    'parquet-gzip': {
        'manifest.json':
            '295ec65d1fe27205f755b3c545438edea0d16b31d3a3b2c1d14b28866cdd74a1',
        'train-00000-of-00004.tfrecord.gz':
            '40cd1e1d58b4c55e2ed8cdf5ddd5e460222f2cafd56ae6e41c21414585b4cd8f',
        'train-00001-of-00004.tfrecord.gz':
            'c0648016fbbfab5fd0569fa11de53576872d0ce697337158c057d6fa90a54952',
        'train-00002-of-00004.tfrecord.gz':
            '61e9c1f955f270e14a2ef65dac0498851806c85162ea447f68c0b78d6a247f46',
        'train-00003-of-00004.tfrecord.gz':
            '7d14686d88b100698f367f4f0cecd077eb270e7a1929323fef3418e7c316350f',
    },
    'parquet-stats': {
        'dataset_info.json':
            '8eb8851888fb95e3c1768ca9710e410600b1a7a3c91975bc982ec6571f8bad71',
        'features.json':
            '824b51baadb141cd06af59b51297465e66d2114b76945fb5697fb45bc9e26713',
        'manifest.json':
            '3815d5fc08177db0a579cd4601baf30138035f0add34ca0b90e4430651f8adbc',
        'statistics.json':
            '37687c4ab5ef1ae2fd98936a16ef86fd8dc49ef1321e1066b2c627804a8955a9',
        'train-00000-of-00007.tfrecord':
            'b64b67e3913920a79d4b9f1ae53542581ed7b1c36bbc8b8ebc0186e550942be1',
        'train-00001-of-00007.tfrecord':
            '55227096aa83f05cedba78e2aea771fbb340db454b5f2894ce0eb223275770f1',
        'train-00002-of-00007.tfrecord':
            '2be79bd11e96a9fb666d4c460c715bd9b34b807dbf38da67a7c3772a40b7ad9c',
        'train-00003-of-00007.tfrecord':
            '756a5f1135894fdab1454f1ea42e04ae62792bf21a045d28c5eef9cd923929d6',
        'train-00004-of-00007.tfrecord':
            '452fdd0be747f485930f513324f9f04e654f94aa7790571d12ff2896781df2e0',
        'train-00005-of-00007.tfrecord':
            '51b600a0270419d6725343bd0522cdfed94cbbd575450432d5bcad74e772df7a',
        'train-00006-of-00007.tfrecord':
            '61be0863b296ce83d16d5615efde00742ccb003787eadf3255ed367f4368e198',
        'val-00000-of-00003.tfrecord':
            'd85666e999209685a17443129763ec6f0ac8dbf3f73213e0bd293e49d4a4b7f5',
        'val-00001-of-00003.tfrecord':
            'a45cace0426fca32ddfcfb259135fe6e4cf72ce30418e1ddb20b8856885991c4',
        'val-00002-of-00003.tfrecord':
            'c5811e607babfdc9f4806bd0266e0cb147655cf78f5f04e7ee3e2f512de1d937',
    },
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_inputs(tmp_path_factory.mktemp("streaming"))


@pytest.fixture(scope="module")
def converted(inputs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[Path, dict[str, Any]]:
    out_root = tmp_path_factory.mktemp("converted")
    return out_root, convert_all(inputs, out_root, list(CONVERSIONS))


@pytest.mark.parametrize("name", list(CONVERSIONS))
def test_output_is_byte_identical_to_the_pre_streaming_converter(converted, name: str) -> None:
    assert converted[1][name] == GOLDEN[name]


def test_worker_processes_read_their_shards_rows_byte_identically(inputs, tmp_path) -> None:
    # Shards pickle to forkserver workers as row indices; a CSV's rows come from
    # the parent's temporary Arrow copy.
    from tfpipe.convert import convert

    src, kwargs = CONVERSIONS["img-csv"]
    out = tmp_path / "out"
    m = convert(inputs[src], out, workers=2, **kwargs)
    assert len(m.splits["train"].shards) >= 2
    got = {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
           for p in sorted(out.rglob("*")) if p.is_file()}
    assert got == GOLDEN["img-csv"]


def test_resume_of_a_finished_table_run_rewrites_a_damaged_shard(inputs, tmp_path) -> None:
    from tfpipe.convert import convert

    src, kwargs = CONVERSIONS["img-parquet"]  # with bad rows listed as skipped
    out = tmp_path / "out"
    convert(inputs[src], out, workers=1, **kwargs)
    shard = sorted(out.glob("train-*.tfrecord"))[0]
    shard.write_bytes(b"damaged")
    convert(inputs[src], out, workers=1, resume=True, **kwargs)
    got = {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
           for p in sorted(out.rglob("*")) if p.is_file()}
    assert got == GOLDEN["img-parquet"]


def _records(path: Path) -> list[bytes]:
    """TFRecord framing read by hand: u64 length, u32 crc, data, u32 crc."""
    data, out, at = path.read_bytes(), [], 0
    while at < len(data):
        (n,) = struct.unpack("<Q", data[at:at + 8])
        out.append(data[at + 12:at + 12 + n])
        at += 16 + n
    return out


def _unit(seed: int, domain: str, key: str) -> float:
    # The documented contract (docs/convert.md), re-derived with hashlib.
    return int.from_bytes(hashlib.sha256(f"{seed}:{domain}:{key}".encode()).digest()[:8],
                          "big") / 2.0**64


def _example_class() -> Any:
    """tf.train.Example's protobuf class, built from its schema (example.proto and
    feature.proto) with the protobuf runtime alone: no TensorFlow import."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="tabconv_example.proto",
                                             package="tabconv", syntax="proto3")

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> Any:
        m = fdp.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            field = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                field.type_name = type_name
        return m

    rep, opt = F.LABEL_REPEATED, F.LABEL_OPTIONAL
    message("BytesList", ("value", 1, F.TYPE_BYTES, rep, ""))
    message("FloatList", ("value", 1, F.TYPE_FLOAT, rep, ""))
    message("Int64List", ("value", 1, F.TYPE_INT64, rep, ""))
    feature = message("Feature", ("bytes_list", 1, F.TYPE_MESSAGE, opt, ".tabconv.BytesList"),
                      ("float_list", 2, F.TYPE_MESSAGE, opt, ".tabconv.FloatList"),
                      ("int64_list", 3, F.TYPE_MESSAGE, opt, ".tabconv.Int64List"))
    feature.oneof_decl.add(name="kind")
    for field in feature.field:
        field.oneof_index = 0
    features = message("Features", ("feature", 1, F.TYPE_MESSAGE, rep,
                                    ".tabconv.Features.FeatureEntry"))
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=opt)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=opt,
                    type_name=".tabconv.Feature")
    message("Example", ("features", 1, F.TYPE_MESSAGE, opt, ".tabconv.Features"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tabconv.Example"))


def test_shards_decoded_by_protobuf_equal_pandas_in_plan_order(converted, inputs) -> None:
    import pandas as pd

    example_class = _example_class()
    out = converted[0] / "parquet-stats"
    seed = CONVERSIONS["parquet-stats"][1]["seed"]
    df = pd.read_parquet(inputs["rich.parquet"])
    table = df.to_dict("records")
    manifest = json.loads((out / "manifest.json").read_text())
    seen = 0
    for split in ("train", "val"):
        want = sorted((i for i in range(len(df))
                       if (_unit(seed, "split", f"row:{i}") < 0.7) == (split == "train")),
                      key=lambda i: (_unit(seed, "order", f"row:{i}"), f"row:{i}"))
        shards = manifest["splits"][split]["shards"]
        assert len(shards) > 2
        records = [example_class.FromString(r) for s in shards
                   for r in _records(out / s["path"])]
        got = [(r.features.feature["id"].int64_list.value[0] + 1000) // 7 for r in records]
        assert got == want
        for i, ex in zip(want, records):
            f, row = ex.features.feature, table[i]
            ints = lambda k: list(f[k].int64_list.value)  # noqa: E731
            floats = lambda k: list(f[k].float_list.value)  # noqa: E731
            text = lambda k: list(f[k].bytes_list.value)  # noqa: E731
            assert ints("label") == [row["label"]] and ints("flag") == [int(row["flag"])]
            assert ints("count") == ([] if pd.isna(row["count"]) else [int(row["count"])])
            assert floats("price") == ([] if pd.isna(row["price"])
                                       else [np.float32(row["price"])])
            assert floats("ratio") == [np.float32(row["ratio"])]
            assert text("word") == ([] if pd.isna(row["word"]) else [row["word"].encode()])
            assert text("cat") == [row["cat"].encode()] and text("blob") == [row["blob"]]
            assert text("day") == [row["day"].isoformat().encode()]
            assert text("ts") == ([] if pd.isna(row["ts"]) else
                                  [row["ts"].to_pydatetime().isoformat().encode()])
            assert ints("tags") == ([] if row["tags"] is None else list(row["tags"]))
            # A null inside a list of strings is written as the text "None" (as before).
            assert text("names") == [b"None" if v is None else v.encode() for v in row["names"]]
            assert floats("vec") == [np.float32(v) for v in row["vec"]]
        seen += len(records)
    assert seen == len(df) == sum(s["num_records"] for split in manifest["splits"].values()
                                  for s in split["shards"])


def test_row_sizes_vectorized_equal_the_per_value_estimate() -> None:
    from tfpipe.convert.table import _approx_size, _approx_sizes

    table = rich_table(300)
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        want = [0 if v is None else _approx_size(v) for v in column.to_pylist()]
        assert _approx_sizes(column).tolist() == want, name


def _write_widening_csv(path: Path, rows: int) -> None:
    """x: ints, then one float in a late block; y: empty (null) early, text late."""
    lines = ["x,y,z"]
    for i in range(rows):
        x = f"{i}.5" if i == rows - 7 else str(i)
        y = f"w{i}" if i > rows - 20 else ""
        lines.append(f"{x},{y},{i % 3 == 0}")
    path.write_text("\n".join(lines) + "\n")


def test_csv_column_widened_in_a_later_block_keeps_read_csv_types(tmp_path: Path,
                                                                    monkeypatch) -> None:
    from tfpipe.convert import convert, make_source
    from tfpipe.convert import table as table_mod

    path = tmp_path / "wide.csv"
    _write_widening_csv(path, 1500)
    whole = convert(path, tmp_path / "one-block", shard_size="32KB", workers=1)
    monkeypatch.setattr(table_mod, "CSV_BLOCK_BYTES", 1024)  # ~12 blocks
    source = make_source(path)
    assert source.arrow_schema == pacsv.read_csv(path).schema
    assert source.arrow_schema.field("x").type == pa.float64()
    blocks = convert(path, tmp_path / "blocks", shard_size="32KB", workers=1)
    assert len(blocks.splits["train"].shards) > 3
    assert tree(tmp_path / "blocks") == tree(tmp_path / "one-block")
    assert whole.schema.to_json() == blocks.schema.to_json()


def test_malformed_csv_in_a_later_block_is_one_clear_error(tmp_path: Path, monkeypatch) -> None:
    from tfpipe.convert import make_source
    from tfpipe.convert import table as table_mod
    from tfpipe.errors import InputError

    path = tmp_path / "bad.csv"
    path.write_text("a,b\n" + "1,2\n" * 2000 + "3,4,5\n")
    monkeypatch.setattr(table_mod, "CSV_BLOCK_BYTES", 1024)
    with pytest.raises(InputError, match=r"bad\.csv: cannot read as csv: .*Expected 2 columns, got 3"):
        make_source(path)


def tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_planned_shards_carry_row_indices_not_rows(inputs) -> None:
    from tfpipe.convert import make_source
    from tfpipe.convert._plan import plan_shards

    source = make_source(inputs["rich.parquet"])
    items = source.enumerate().items
    plan = plan_shards(items, {"train": 1.0}, 0, 40_000)
    shard = plan.shards[0]
    # Two int64 arrays (rows, sizes) and the reader: no payloads travel to workers.
    assert len(pickle.dumps(shard)) < 16 * len(shard.items) + 2000
    # Reading the lazy shard gives the Items enumerating the rows one by one gives.
    first = list(shard.items)[:5]
    assert [it.key for it in first] == [f"row:{i}" for i in shard.items.rows[:5].tolist()]
    assert first[0] == shard.items[0] and first[0].payload == items[int(shard.items.rows[0])
                                                                    ].payload


def test_equal_order_hashes_fall_back_to_the_key_text_like_python_sort() -> None:
    from tfpipe.convert.table import _break_ties

    rows = np.array([9, 10, 3, 100, 7], dtype=np.int32)
    order_hash = np.array([0.5, 0.5, 0.1, 0.5, 0.9])
    members = np.array([2, 0, 1, 3, 4], dtype=np.int32)  # sorted by hash; 9, 10, 100 tie
    _break_ties(members, order_hash, rows)
    want = sorted(range(5), key=lambda m: (order_hash[m], f"row:{rows[m]}"))
    assert members.tolist() == want == [2, 1, 3, 0, 4]  # row:10 < row:100 < row:9


if __name__ == "__main__":  # print GOLDEN for the converter of this checkout
    with tempfile.TemporaryDirectory() as tmp:
        result = convert_all(make_inputs(Path(tmp) / "in"), Path(tmp) / "out",
                             list(CONVERSIONS))
    json.dump(result, sys.stdout, indent=1, sort_keys=True)
    print()
