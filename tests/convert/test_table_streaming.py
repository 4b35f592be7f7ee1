"""The table converter streams CSV/Parquet in bounded memory, with unchanged output.

Two independent checks:

- golden: the sha256 of every file the conversion writes (shards, manifest.json,
  statistics.json, TFDS metadata) equals what the converter produced BEFORE it
  streamed (it read the whole table and held every row in Python). GOLDEN was
  computed once with that code (branch `tabstats`, commit 8ccea30) by running
  `PYTHONPATH=src python tests/convert/test_table_streaming.py` there, then
  recomputed for issue #26's value rules (branch `tabconv`): dates/timestamps as
  int64 epoch seconds, a null inside a list dropped instead of written "None", a
  CSV's empty field null, the manifest's new source settings and the statistics
  of the now-numeric time columns. Every other column's bytes are unchanged: the
  same tables without `day`, `ts`, `names` (and the CSV's `word`) give shards
  byte-identical to the converter before that change;
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
            '44181732659bf1276a16da4865e6c090ef95dcb43e41957edb9a5d2b84aad909',
        'features.json':
            '9f0924b949286944c6eb5d85df83fcd1d5bc5efd4a629d4a2aa2f513baa658b6',
        'manifest.json':
            '60cca623ed7fe64e4aa17fadd41ab88819fbc013e481b7ebcf935d53fb493d54',
        'statistics.json':
            'eb50d6e6f5c4439c41012ae10d7ace5c2a0322fd706fbee49cdf041d54243ab8',
        'train-00000-of-00013.tfrecord':
            '4c5ae2408f1658aa0685a48e6163e62e465abf2a4ec5afaf7b101a9cb72da71f',
        'train-00001-of-00013.tfrecord':
            '4861411ff98962a129b5bcd22cb6b463575bfeda532945b664f9b5d49b5b0165',
        'train-00002-of-00013.tfrecord':
            '663edff7e942094bc1a332e19baee37af00f6be7ecf3279f8bd7cb37c34808fd',
        'train-00003-of-00013.tfrecord':
            '6fe9c9e3bd6b254a3ce868157bf5ce5bc815d470d88c39b702005ee59766acd0',
        'train-00004-of-00013.tfrecord':
            '86309d69dc2c1261bf10d233e3a25b6e44ed79af3d719edac65d1129576f0eee',
        'train-00005-of-00013.tfrecord':
            'f18fb132324ed48610cfa4ffe90b5f224b6037bd6d4f5bf73b86794942e48a2b',
        'train-00006-of-00013.tfrecord':
            '392b810bd0b5f78a0ab8877004bfd7ea772a85087cd3d1908d08337e7d044df3',
        'train-00007-of-00013.tfrecord':
            '906086f787c57bb7766925fefe0b665b3e846a384653839776d0f55ac502900d',
        'train-00008-of-00013.tfrecord':
            'b989d3022908b9d423123bde6906ebb9a09b7b079dd04ee8c3219cc73384ffc1',
        'train-00009-of-00013.tfrecord':
            '89f57db1f3fc11b34459c29dbad51704bc905b02a4ca10637f2ebd220c20ace2',
        'train-00010-of-00013.tfrecord':
            '33df066784482651f76c96ca502854fb79806bd78a783110f99cf30b0adface1',
        'train-00011-of-00013.tfrecord':
            'ad1f0040eb860f5272148f8a5748ffdb3b90956482c9f64caaecfb2da0a9e780',
        'train-00012-of-00013.tfrecord':
            '0af0c92c880fd5689f29eb143f8237434cb9182961ea2795f8930448223ce27c',
        'val-00000-of-00004.tfrecord':
            '5da67dfd3157dee860fa092208bc29db99a22e05b86a90164aa53491324475fe',
        'val-00001-of-00004.tfrecord':
            'd3c7bcccded3963fdb585e63f2c239d337a27646bc91189f39ae13de8cd08702',
        'val-00002-of-00004.tfrecord':
            'ce6b82d3cf8f4d361cbd6626433467358498568837648034aa73f5087407e7fd',
        'val-00003-of-00004.tfrecord':
            '0e4ed044cb993ff86d29ec8c5513b4d6c50394bdf85b572ec9b5341e28a71d4a',
    },
    'img-csv': {
        'dataset_info.json':
            '3da0caa66d40e93d05afdcf7264863a1ffd2a7df7103f4dcd0636470e0d5fab1',
        'features.json':
            'd02d7d8374731a9a7271684aa94a96d62f2ce0784e32844fd7d3fe318ecd914d',
        'image.class.label.labels.txt':
            '1524e5d0d84de4991ad3ecb46b0143c3d4e5074fb0628c319ed4fca309a8daf8',
        'manifest.json':
            '5f5486106070318abdab408041ba63c9a10d3a46c3249263f15947f98ea9d09a',
        'train-00000-of-00003.tfrecord':
            'f8fd47785ad022903c3c2c9e1b7179a3e14c8d2819332883e5f41c2295f94795',
        'train-00001-of-00003.tfrecord':
            'cd883f46fcb1f3ed1b625ea55f27e12ba13109eb59570d7f5af16003a73c5a5a',
        'train-00002-of-00003.tfrecord':
            '8abed1c9f37ff61fadbd4e863a27da3d3533a8aa01804c73b3cd726179151e61',
    },
    'img-parquet': {
        'dataset_info.json':
            'cfb6838d76e88b07e04d3de7adb9220493f61c86914b1924fb820696934686cf',
        'features.json':
            '6e79f8a17fef8e028170e00b6215540f5bbf15acfcbd1dfabb059ebb355c0d4f',
        'image.class.label.labels.txt':
            '1524e5d0d84de4991ad3ecb46b0143c3d4e5074fb0628c319ed4fca309a8daf8',
        'manifest.json':
            'fb3d6feac338a114327fb9f0d049cb753b68e69d3f6cbdf7e4be86403d5baa63',
        'train-00000-of-00001.tfrecord':
            '16b1d1bdae98b09bd1ab235bd0f35760a4e81d5ae0f78a06e6c1ac3c2a6bab6b',
        'val-00000-of-00002.tfrecord':
            'acde3e4a6ea66ff62eafbb71c3e0d1bda4614cbd131565102d7830c467589442',
        'val-00001-of-00002.tfrecord':
            'ebf69b7f974652e17f8b727934b7d2c3bf01a715cc18ac624c766c22b506f2ef',
    },
    'parquet-gzip': {
        'manifest.json':
            '503a6dd4aeb33ac78f549fa3afec0401349835b1fd197f090fcc98def724fae9',
        'train-00000-of-00004.tfrecord.gz':
            '52dd5183fbd07fcf271ca4954912e281665479338600c2a8a0cbef78468dee2e',
        'train-00001-of-00004.tfrecord.gz':
            'df9f00d6d1104d6176c7188af81ba3432ca19b49b0cd1d3887eac8e495acc449',
        'train-00002-of-00004.tfrecord.gz':
            'edd6a840612f98be328cc5e20bc2926d9aea78e5ab7e9eb83db13da656b09500',
        'train-00003-of-00004.tfrecord.gz':
            '9f1221b5fe8db3e395754da437f7abed018367e19a94cba8160633abde3db00a',
    },
    'parquet-stats': {
        'dataset_info.json':
            'de0df620e4bf63b2ae152671f18e3b49032d4c89d1fd4a59a4d53efc5fab8303',
        'features.json':
            'bf3380ecff16449dbd3f8d64c8278e363a4c57e127ec9156e0b8954234137d76',
        'manifest.json':
            '73471eda7a19885c305dd9b94914b119558cb15b602dc371def947b398af3b06',
        'statistics.json':
            '16250807d2389fa9aeba7041cf2e514f902016bbf583c24c4cd54290962fa116',
        'train-00000-of-00007.tfrecord':
            'd87c5206be56ba84d3b1a10d1939806a5b7673c70cc627a8d7b882069edbc7aa',
        'train-00001-of-00007.tfrecord':
            '66824bcbc1049f39f982223521b41fa78b3b08dd3cf304885f3e2cf63ac07971',
        'train-00002-of-00007.tfrecord':
            'fd67513511c78b5af1ee9ac89e91fcd9187e861634eaf7b2efbd1d453117fecb',
        'train-00003-of-00007.tfrecord':
            'e78fea8f319465b90b85eb0baf68bd535892b2f18012c2cc78f358690496608b',
        'train-00004-of-00007.tfrecord':
            'fb56cf4ce86efc520b228519c85ebe84194646574b6c80e3563607f0951d56ac',
        'train-00005-of-00007.tfrecord':
            '3f039021b72e3e1bfe32f3f469e01431649e90d05f3faaa915bc664e98005274',
        'train-00006-of-00007.tfrecord':
            '74b441f602e1086591332f59517ec3bbd207a562012809271a9d996f980ced56',
        'val-00000-of-00003.tfrecord':
            '3209b6767a791bca07e481f3435f1c7fa549d3e0adcd8e52c4aa198dd1707054',
        'val-00001-of-00003.tfrecord':
            '63cdcedcf4999b313a7a4656976bb7b7cf108fde7669fbb9d105785d50e0fb4d',
        'val-00002-of-00003.tfrecord':
            'bf2b6491826d621c1fbdaccf01898c0de4d2d851b0e9377aad4b52235b3c9a45',
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
            # Dates and timestamps: int64 epoch seconds, UTC (issue #26 item 5).
            day = row["day"]
            assert ints("day") == [(day - dt.date(1970, 1, 1)).days * 86_400]
            assert ints("ts") == ([] if pd.isna(row["ts"]) else
                                  [int(row["ts"].value // 10**9)])
            assert ints("tags") == ([] if row["tags"] is None else list(row["tags"]))
            # A null inside a list is dropped (list_nulls=drop-element, item 3).
            assert text("names") == [v.encode() for v in row["names"] if v is not None]
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


# sha256[:16] of the shards the converter wrote BEFORE issue #26's value rules (main at
# f6b35c0) for the rich tables without the columns those rules change (day, ts, names;
# the CSV's word, which holds ""): every other column's bytes must not change.
PRE_FIX_SHARDS: dict[str, dict[str, str]] = {
    'r.parquet': {
        'train-00000-of-00007.tfrecord': '07365cc4d3291788',
        'train-00001-of-00007.tfrecord': 'b4630800edc360e6',
        'train-00002-of-00007.tfrecord': 'ded1fcba0f1bcc4d',
        'train-00003-of-00007.tfrecord': '74069ce217b7a751',
        'train-00004-of-00007.tfrecord': 'ff449ea964c2c97c',
        'train-00005-of-00007.tfrecord': '6940a8317d74a083',
        'train-00006-of-00007.tfrecord': '1c8b5d3a63b7b801',
        'val-00000-of-00003.tfrecord': '8c486cb73f355aef',
        'val-00001-of-00003.tfrecord': 'fbf31a9bc2f73e84',
        'val-00002-of-00003.tfrecord': '5b94fdc0cee4e105',
    },
    'p.csv': {
        'train-00000-of-00012.tfrecord': '930b56b8454deb59',
        'train-00001-of-00012.tfrecord': '9dfc0cd5fbb44cd4',
        'train-00002-of-00012.tfrecord': 'f7ac95f75b5e8096',
        'train-00003-of-00012.tfrecord': 'e41df494e05b37c2',
        'train-00004-of-00012.tfrecord': 'e0d65248fb154c29',
        'train-00005-of-00012.tfrecord': 'bd92ce0391286c7f',
        'train-00006-of-00012.tfrecord': 'a0283392a6347879',
        'train-00007-of-00012.tfrecord': 'bc3ff9271e1a3335',
        'train-00008-of-00012.tfrecord': '91919cc8db4740e2',
        'train-00009-of-00012.tfrecord': 'a3957562955430be',
        'train-00010-of-00012.tfrecord': 'e46f72de753cb627',
        'train-00011-of-00012.tfrecord': '6d220c5cf45fede1',
        'val-00000-of-00003.tfrecord': '7c4d33631f23cb0d',
        'val-00001-of-00003.tfrecord': '87081711f1405abd',
        'val-00002-of-00003.tfrecord': '8a18967c6cb56809',
    },
}


def test_columns_the_value_rules_leave_alone_keep_their_pre_fix_bytes(tmp_path: Path) -> None:
    from tfpipe.convert import convert

    pq.write_table(rich_table().drop_columns(["day", "ts", "names"]), tmp_path / "r.parquet",
                   row_group_size=250)
    pacsv.write_csv(csv_table().drop_columns(["day", "ts", "word"]), tmp_path / "p.csv")
    for src, kw in [("r.parquet", dict(split="train=0.7,val=0.3", shard_size="40KB", seed=7)),
                    ("p.csv", dict(split="train=0.8,val=0.2", shard_size="20KB", seed=1))]:
        out = tmp_path / ("out-" + src)
        convert(tmp_path / src, out, workers=1, **kw)
        got = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16]
               for p in sorted(out.glob("*.tfrecord"))}
        assert got == PRE_FIX_SHARDS[src], src


if __name__ == "__main__":  # print GOLDEN for the converter of this checkout
    with tempfile.TemporaryDirectory() as tmp:
        result = convert_all(make_inputs(Path(tmp) / "in"), Path(tmp) / "out",
                             list(CONVERSIONS))
    json.dump(result, sys.stdout, indent=1, sort_keys=True)
    print()
