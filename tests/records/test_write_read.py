"""Writer output read back by plain tf.data + tf.io (independent oracle)."""

from __future__ import annotations

import gzip
import hashlib
import os

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.errors import ConfigError, SchemaError
from tfpipe.records import (
    SCHEMA_VERSION,
    FeatureSpec,
    Schema,
    ShardedWriter,
    classification_schema,
    decode_example,
    detection_schema,
    encode_example,
    infer_schema,
    iter_frames,
    parse_size,
    scan_file,
    shard_name,
    write_shard,
)


def _tf_read(path: str, comp: str) -> list[bytes]:
    return [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=comp)]


@pytest.mark.parametrize("compression,tfcomp,suffix", [(None, "", ""), ("gzip", "GZIP", ".gz")])
def test_round_trip_tf_data(tmp_path, cls_records, jpegs, compression, tfcomp, suffix):
    path = str(tmp_path / f"s.tfrecord{suffix}")
    info = write_shard(path, cls_records, compression)
    assert info.num_records == len(cls_records)
    assert info.num_bytes == os.path.getsize(path)
    assert info.sha256 == hashlib.sha256(open(path, "rb").read()).hexdigest()
    assert _tf_read(path, tfcomp) == cls_records
    spec = classification_schema().parse_spec()
    ds = tf.data.TFRecordDataset(path, compression_type=tfcomp).map(
        lambda s: tf.io.parse_single_example(s, spec))
    for i, ex in enumerate(ds):
        assert ex["image/encoded"].numpy() == jpegs[i % len(jpegs)]
        assert int(ex["image/class/label"]) == i % 3
        assert ex["image/class/text"].numpy() == f"c{i % 3}".encode()
        assert int(ex["tfpipe/schema_version"]) == SCHEMA_VERSION
        assert ex["image/source_id"].numpy() == b""  # declared default
    # our own reader agrees with tf.data
    assert [d for _, _, d in iter_frames(path)] == cls_records
    assert scan_file(path) == []
    # no temp file left behind
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(path)]


def test_gzip_is_byte_identical_and_standard(tmp_path, cls_records):
    a = write_shard(tmp_path / "a.tfrecord.gz", cls_records, "gzip")
    b = write_shard(tmp_path / "b.tfrecord.gz", cls_records, "gzip")
    assert a.sha256 == b.sha256
    assert open(a.path, "rb").read() == open(b.path, "rb").read()
    plain = write_shard(tmp_path / "c.tfrecord", cls_records)
    # a stock gunzip yields exactly the plain shard
    assert gzip.decompress(open(a.path, "rb").read()) == open(plain.path, "rb").read()


def test_write_shard_failure_leaves_nothing(tmp_path, cls_records):
    def records():
        yield cls_records[0]
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError):
        write_shard(tmp_path / "x.tfrecord", records())
    assert os.listdir(tmp_path) == []


def test_detection_var_features_round_trip(tmp_path, det_records):
    path = write_shard(tmp_path / "d.tfrecord", det_records).path
    spec = detection_schema().parse_spec()
    for i, s in enumerate(_tf_read(path, "")):
        ex = tf.io.parse_single_example(s, spec)
        ymin = tf.sparse.to_dense(ex["image/object/bbox/ymin"]).numpy()
        np.testing.assert_allclose(ymin, np.float32([0.1 * j for j in range(i + 1)]))
        labels = tf.sparse.to_dense(ex["image/object/class/label"]).numpy()
        assert labels.tolist() == list(range(i + 1))


def test_sharded_writer_rolls_by_size(tmp_path, cls_records):
    frame = max(len(r) for r in cls_records) + 16
    target = 2 * frame + 1  # a few records per shard
    with ShardedWriter(tmp_path, "train", target) as w:
        for r in cls_records:
            w.write(r)
    infos = w.infos
    # greedy packing computed independently from the frame sizes
    expected, size = [0], 0
    for r in cls_records:
        if expected[-1] and size + len(r) + 16 > target:
            expected.append(0)
            size = 0
        expected[-1] += 1
        size += len(r) + 16
    assert len(expected) >= 3
    assert [i.num_records for i in infos] == expected
    n = len(infos)
    assert [os.path.basename(i.path) for i in infos] == \
        [f"train-{k:05d}-of-{n:05d}.tfrecord" for k in range(n)]
    assert all(i.num_bytes <= target for i in infos)
    assert sum(i.num_records for i in infos) == len(cls_records)
    back = [r for i in infos for r in _tf_read(i.path, "")]
    assert back == cls_records
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(i.path) for i in infos)


def test_sharded_writer_gzip_and_abort(tmp_path, cls_records):
    with ShardedWriter(tmp_path / "g", "val", "1MiB", compression="gzip") as w:
        for r in cls_records:
            w.write(r)
    assert [os.path.basename(i.path) for i in w.infos] == ["val-00000-of-00001.tfrecord.gz"]
    assert _tf_read(w.infos[0].path, "GZIP") == cls_records
    with pytest.raises(KeyError):
        with ShardedWriter(tmp_path / "h", "train", 100) as w2:
            for r in cls_records:
                w2.write(r)
            raise KeyError("boom")
    assert os.listdir(tmp_path / "h") == []


def test_shard_name_and_parse_size():
    assert shard_name("train", 3, 12) == "train-00003-of-00012.tfrecord"
    assert shard_name("val", 0, 1, "gzip") == "val-00000-of-00001.tfrecord.gz"
    with pytest.raises(ValueError):
        shard_name("train", 2, 2)
    assert parse_size("256MB") == 256 * 10**6
    assert parse_size("1GiB") == 1 << 30
    assert parse_size("512M") == 512 << 20
    assert parse_size(1234) == 1234
    for bad in ("12 parsecs", "", "-5MB", 0, True):
        with pytest.raises(ConfigError):
            parse_size(bad)


def test_schema_json_round_trip_and_parse_spec():
    s = detection_schema().with_features(FeatureSpec("emb", "float32", [4], "fixed", [0.0] * 4),
                                         FeatureSpec("blob", "string", [], "fixed", b"\xff\x00"))
    back = Schema.from_json(s.to_json())
    assert back == s
    assert back["blob"].default == b"\xff\x00"
    spec = back.parse_spec()
    assert isinstance(spec["image/object/bbox/xmin"], tf.io.VarLenFeature)
    assert spec["emb"].shape == [4] and list(spec["emb"].default_value) == [0.0] * 4
    with pytest.raises(SchemaError, match="dtype must be one of"):
        Schema.from_json({"x": {"dtype": "float64", "shape": [], "kind": "fixed"}})


def test_encode_example_checks_and_protobuf_oracle():
    s = Schema([FeatureSpec("a", "int64"), FeatureSpec("v", "float32", [], "var"),
                FeatureSpec("t", "string", [2])])
    raw = encode_example({"a": 7, "v": np.float32([1.5, 2.5]), "t": ["x", b"y"]}, s)
    ex = tf.train.Example.FromString(raw)
    assert ex.features.feature["a"].int64_list.value == [7]
    assert list(ex.features.feature["v"].float_list.value) == [1.5, 2.5]
    assert ex.features.feature["t"].bytes_list.value == [b"x", b"y"]
    assert ex.features.feature["tfpipe/schema_version"].int64_list.value == [SCHEMA_VERSION]
    assert decode_example(raw)["a"] == [7]
    with pytest.raises(SchemaError, match="'a' is required"):
        encode_example({"t": ["x", "y"]}, s)
    with pytest.raises(SchemaError, match="not in the schema"):
        encode_example({"a": 1, "t": ["x", "y"], "zzz": 1}, s)
    with pytest.raises(SchemaError, match="needs 2 values"):
        encode_example({"a": 1, "t": ["x"]}, s)


def test_infer_schema_python_and_arrow():
    import pyarrow as pa

    s = infer_schema({"name": "x", "n": 3, "f": 0.5, "tags": ["a", "b"], "emb": np.zeros((2, 3))})
    assert (s["name"].dtype, s["n"].dtype, s["f"].dtype) == ("string", "int64", "float32")
    assert s["tags"].kind == "var" and s["emb"].shape == [2, 3]
    t = pa.table({"a": pa.array([1, 2]), "b": pa.array(["x", "y"]),
                  "c": pa.array([[1.0], [2.0, 3.0]]),
                  "d": pa.array([[1, 2], [3, 4]], type=pa.list_(pa.int32(), 2))})
    s2 = infer_schema(t)
    assert s2["a"].dtype == "int64" and s2["b"].dtype == "string"
    assert s2["c"].kind == "var" and s2["c"].dtype == "float32"
    assert s2["d"].shape == [2]
    with pytest.raises(SchemaError, match="column 'ts'"):
        infer_schema(pa.schema([("ts", pa.timestamp("s"))]))


def test_sharded_writer_gzip_rolls(tmp_path, cls_records):
    with ShardedWriter(tmp_path, "train", 8000, compression="gzip") as w:
        for r in cls_records:
            w.write(r)
    n = len(w.infos)
    assert n >= 2
    assert [os.path.basename(i.path) for i in w.infos] == \
        [shard_name("train", k, n, "gzip") for k in range(n)]
    assert [r for i in w.infos for r in _tf_read(i.path, "GZIP")] == cls_records
