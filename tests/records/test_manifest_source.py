"""Manifest validation and open_source (manifest checks, schema evolution)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
import tensorflow as tf

from tfpipe.errors import InputError, ManifestError, SchemaError
from tfpipe.records import (
    SCHEMA_VERSION,
    FeatureSpec,
    Manifest,
    Schema,
    SkippedInput,
    classification_schema,
    detection_schema,
    encode_example,
    open_source,
    write_shard,
)


def test_manifest_matches_files_and_is_deterministic(tmp_path, cls_records, make_dataset):
    m = make_dataset(tmp_path, cls_records)
    text = (tmp_path / "manifest.json").read_text()
    loaded = Manifest.load(tmp_path)
    assert loaded.dumps() == text  # stable serialisation
    assert loaded.num_records == {"train": 6, "val": 6}
    for split, info in loaded.splits.items():
        assert info.skipped == [SkippedInput("bad.jpg", "not an image")]
        for e in info.shards:
            data = (tmp_path / e.path).read_bytes()
            assert e.num_bytes == len(data)
            assert e.sha256 == hashlib.sha256(data).hexdigest()
            assert e.num_records == sum(1 for _ in tf.data.TFRecordDataset(str(tmp_path / e.path)))
    assert loaded.schema == classification_schema()
    # same inputs again -> byte-identical manifest (no timestamps)
    other = tmp_path / "again"
    make_dataset(other, cls_records)
    assert (other / "manifest.json").read_text() == text
    assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]
    assert m.splits["train"].num_bytes == sum(e.num_bytes for e in m.splits["train"].shards)


def _write_manifest(tmp_path, mutate, make_dataset):
    make_dataset(tmp_path, [b"x"] * 4, splits=("train",))
    obj = json.loads((tmp_path / "manifest.json").read_text())
    mutate(obj)
    (tmp_path / "manifest.json").write_text(json.dumps(obj))


@pytest.mark.parametrize("mutate,match", [
    (lambda o: o["splits"]["train"]["shards"][0].update(path="../outside.tfrecord"), r"'\.\.'"),
    (lambda o: o["splits"]["train"]["shards"][0].update(path="/etc/passwd"), "absolute"),
    (lambda o: o.pop("schema"), "missing required keys"),
    (lambda o: o.update(schema_version="1"), "schema_version: must be an int"),
    (lambda o: o["splits"]["train"]["shards"][0].update(num_bytes=-3), "num_bytes"),
    (lambda o: o["splits"]["train"]["shards"][0].update(sha256="xyz"), "sha256"),
    (lambda o: o.update(compression="zstd"), "compression"),
    (lambda o: o["schema"].update(x={"dtype": "float64"}), "dtype must be one of"),
])
def test_manifest_load_rejects(tmp_path, mutate, match, make_dataset):
    _write_manifest(tmp_path, mutate, make_dataset)
    with pytest.raises(ManifestError, match=match):
        Manifest.load(tmp_path)


def test_manifest_rejects_symlink_escape_and_bad_json(tmp_path, make_dataset):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "s.tfrecord").write_bytes(b"")
    ds = tmp_path / "ds"
    make_dataset(ds, [b"x"] * 2, splits=("train",))
    os.symlink(outside / "s.tfrecord", ds / "link.tfrecord")
    obj = json.loads((ds / "manifest.json").read_text())
    obj["splits"]["train"]["shards"][0]["path"] = "link.tfrecord"
    (ds / "manifest.json").write_text(json.dumps(obj))
    with pytest.raises(ManifestError, match="outside the dataset directory"):
        Manifest.load(ds)
    (ds / "manifest.json").write_text('{"tool_version": "0.1", ')
    with pytest.raises(ManifestError, match="malformed JSON at line 1"):
        Manifest.load(ds)
    with pytest.raises(ManifestError, match="no manifest.json"):
        Manifest.load(tmp_path / "nowhere")


def test_open_source_parses_with_tf_data(tmp_path, cls_records, jpegs, make_dataset):
    make_dataset(tmp_path, cls_records, compression="gzip")
    src = open_source(str(tmp_path), split="val")
    assert src.compression == "gzip" and src.manifest is not None
    assert src.num_records == 6 and all(f.endswith(".tfrecord.gz") for f in src.files)
    got = [ex for ex in src.dataset().map(src.parse)]
    assert [int(e["image/class/label"]) for e in got] == [i % 3 for i in range(1, 12, 2)]
    assert [e["image/encoded"].numpy() for e in got] == \
        [jpegs[i % len(jpegs)] for i in range(1, 12, 2)]
    with pytest.raises(ManifestError, match="available"):
        open_source(str(tmp_path), split="test")


def test_open_source_checks_sizes(tmp_path, cls_records, make_dataset):
    make_dataset(tmp_path, cls_records)
    shard = open_source(str(tmp_path)).files[0]
    with open(shard, "ab") as f:
        f.write(b"junk")
    with pytest.raises(ManifestError, match="manifest says"):
        open_source(str(tmp_path))
    os.remove(shard)
    with pytest.raises(ManifestError, match="missing"):
        open_source(str(tmp_path))


def test_open_source_bare_glob_infers_schema(tmp_path, det_records):
    write_shard(tmp_path / "a.tfrecord", det_records[:2])
    write_shard(tmp_path / "b.tfrecord", det_records[2:])
    src = open_source(str(tmp_path / "*.tfrecord"))
    assert src.manifest is None and src.num_records == 4
    assert src.schema["image/object/bbox/xmin"].kind == "var"
    batch = next(iter(src.dataset().batch(4).map(src.parse_batch)))
    assert batch["image/object/class/label"].to_list() == [list(range(k)) for k in range(1, 5)]
    one = next(iter(src.dataset().skip(2).map(src.parse)))
    assert one["image/object/bbox/xmax"].numpy().tolist() == [0.5] * 3
    sub = next(iter(src.dataset().map(lambda s: src.parse(s, ["image/object/class/label"]))))
    assert list(sub) == ["image/object/class/label"] and sub["image/object/class/label"].shape == [1]
    with pytest.raises(SchemaError, match="not in the dataset schema"):
        src.parse_spec(["nope"])
    with pytest.raises(InputError, match="no files match"):
        open_source(str(tmp_path / "*.nothing"))


def _old_dataset(tmp_path, make_dataset, version=0):
    # A dataset from before "image/source_id" and "image/class/label" existed.
    old = Schema([FeatureSpec("image/encoded", "string")])
    recs = [encode_example({"image/encoded": b"img%d" % i}, old) for i in range(3)]
    make_dataset(tmp_path, recs, schema=old, splits=("train",))
    obj = json.loads((tmp_path / "manifest.json").read_text())
    obj["schema_version"] = version
    (tmp_path / "manifest.json").write_text(json.dumps(obj))


def test_schema_evolution_defaults(tmp_path, cls_records, make_dataset):
    _old_dataset(tmp_path, make_dataset)
    src = open_source(str(tmp_path), required=[
        "image/source_id",  # standard spec declares default ""
        FeatureSpec("weight", "float32", [], "fixed", 1.0),
    ])
    assert src.dataset_version == 0
    ex = next(iter(src.dataset().map(src.parse)))
    assert ex["image/source_id"].numpy() == b""
    assert float(ex["weight"]) == 1.0
    assert ex["image/encoded"].numpy() == b"img0"


def test_schema_evolution_missing_required_names_feature_and_shard(tmp_path, cls_records,
                                                                   make_dataset):
    _old_dataset(tmp_path, make_dataset)
    with pytest.raises(SchemaError, match=r"'image/class/label'.*train-00000-of-00001"):
        open_source(str(tmp_path), required=["image/class/label"])
    # bare glob: the shard named is the one lacking it
    write_shard(tmp_path / "new.tfrecord", cls_records[:1])
    with pytest.raises(SchemaError, match=r"'image/class/label'.*train-00000"):
        open_source(str(tmp_path / "*.tfrecord"), required=["image/class/label"])


def test_newer_dataset_refused(tmp_path, cls_records, make_dataset):
    _old_dataset(tmp_path, make_dataset, version=SCHEMA_VERSION + 1)
    with pytest.raises(SchemaError, match="newer"):
        open_source(str(tmp_path))


def test_detection_schema_round_trip_in_manifest(tmp_path, det_records, make_dataset):
    make_dataset(tmp_path, det_records, schema=detection_schema(), splits=("train",))
    assert Manifest.load(tmp_path).schema == detection_schema()
