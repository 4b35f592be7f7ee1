"""`salvage_dataset`: every damaged shard of a dataset, with a manifest of its own."""

from __future__ import annotations

import json
import os

import numpy as np

from tfpipe.records import (Manifest, decode_example, iter_frames, salvage_dataset, summarize,
                            verify)


def test_salvage_dataset_writes_a_manifest_verify_accepts(tmp_path, cls_records, make_dataset):
    ds = tmp_path / "ds"
    make_dataset(ds, cls_records, shard_size=1 << 20)
    shard = ds / "train-00000-of-00001.tfrecord"
    first = len(cls_records[0]) + 16
    data = bytearray(shard.read_bytes())
    data[first + 12 + 30] ^= 1  # record 1's data (train holds records 0, 2, 4, ...)
    shard.write_bytes(bytes(data))

    out = tmp_path / "fixed"
    rep = salvage_dataset(ds, out)
    assert not rep.intact and len(rep.shards) == 1
    (s,) = rep.shards
    assert rep.records_lost(s) == (1, True)
    assert rep.to_dict()["salvaged"][0]["records_lost_per_manifest"] == 1
    # the kept records are the originals, minus the damaged one, in order
    kept = [d for _, _, d in iter_frames(str(out / shard.name))]
    assert kept == [cls_records[i] for i in range(0, 12, 2) if i != 2]
    m = Manifest.load(out)
    # the whole dataset: the val shard (intact) too; the converter's skipped inputs kept
    assert list(m.splits) == ["train", "val"] and m.splits["train"].num_records == 5
    assert m.splits["val"].num_records == 6
    assert m.class_names == ["c0", "c1", "c2"] and m.source["kind"] == "salvage"
    assert [k.input for k in m.splits["train"].skipped] == ["bad.jpg", f"{shard.name}@{first}"]
    v = verify(out)
    assert v.ok and v.files_checked == 2 and v.records_checked == 11
    assert summarize(out)["splits"]["train"]["records"] == 5


def test_salvage_of_an_intact_dataset_writes_nothing(tmp_path, cls_records, make_dataset):
    make_dataset(tmp_path / "ds", cls_records)
    rep = salvage_dataset(tmp_path / "ds", tmp_path / "out")
    assert rep.intact and rep.verify.ok and not (tmp_path / "out").exists()


# ------------------------------------------------------------- complete datasets
def _readable(path) -> list[bytes]:
    """Oracle: the records the Python framing reader returns before the first damage."""
    from tfpipe.errors import RecordError

    out = []
    if not os.path.exists(path):
        return out
    try:
        for _, _, data in iter_frames(path):
            out.append(data)
    except RecordError:
        pass
    return out


def _truncate_mid_record(path) -> None:
    offsets = [off for _, off, _ in iter_frames(path)]
    os.truncate(path, offsets[-1] + 20)


def test_salvage_writes_a_complete_dataset_build_pipeline_trains_on(converted, tmp_path):
    """A truncated shard and a missing one: every readable record of every shard,
    renamed into one complete dataset with a manifest (counts, sha256), TFDS
    metadata, trainable. Before: only the truncated shard was written, and the
    manifest listed it alone."""
    import tensorflow as tf
    from click.testing import CliRunner

    from tfpipe.cli.main import cli
    from tfpipe.pipeline import build_pipeline

    m = Manifest.load(converted)
    train = [converted / e.path for e in m.splits["train"].shards]
    val = [converted / e.path for e in m.splits["val"].shards]
    _truncate_mid_record(train[1])
    os.remove(train[2])
    oracle = {"train": [_readable(p) for p in train if p.exists()],
              "val": [_readable(p) for p in val]}
    out = tmp_path / "salvaged"
    r = CliRunner().invoke(cli, ["verify", str(converted), "--salvage", str(out)])
    assert r.exit_code == 1, r.output  # the source is damaged
    assert "wrote" in r.output and "complete dataset" in r.output

    got = Manifest.load(out)
    assert sorted(got.splits) == ["train", "val"]
    for split, want in oracle.items():
        entries = got.splits[split].shards
        assert [e.path for e in entries] == [
            f"{split}-{i:05d}-of-{len(want):05d}.tfrecord" for i in range(len(want))]
        assert [[d for _, _, d in iter_frames(out / e.path)] for e in entries] == want
        assert [e.num_records for e in entries] == [len(w) for w in want]
    skipped = {k.input: k.reason for k in got.splits["train"].skipped}
    assert "missing" in skipped[train[2].name] and \
        f"{m.splits['train'].shards[2].num_records} records" in skipped[train[2].name]
    assert any(k.startswith(train[1].name) for k in skipped)
    assert got.source["kind"] == "salvage" and got.class_names == m.class_names
    v = verify(out)
    assert v.ok, v.findings
    assert v.records_checked == sum(len(x) for w in oracle.values() for x in w)
    info = json.loads((out / "dataset_info.json").read_text())
    lengths = {s["name"]: [int(n) for n in s["shardLengths"]] for s in info["splits"]}
    assert lengths == {k: [len(x) for x in w] for k, w in oracle.items()}
    # intact shards are linked or copied byte for byte
    assert (out / "train-00000-of-00003.tfrecord").read_bytes() == train[0].read_bytes()

    cfg = {"seed": 0, "data": {"path": str(out), "image_size": [32, 32], "num_classes": 4},
           "pipeline": {"batch_size": 4, "shuffle_buffer": 8, "on_error": "raise",
                        "drop_remainder": False}, "augment": {}}
    labels = [int(v) for b in build_pipeline(cfg) for v in b["label"].numpy()]
    want_labels = [int(decode_example(d)["image/class/label"][0])
                   for w in oracle["train"] for d in w]
    assert sorted(labels) == sorted(want_labels)
    model = tf.keras.Sequential([tf.keras.layers.GlobalAveragePooling2D(),
                                 tf.keras.layers.Dense(4)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(build_pipeline(cfg, as_supervised=True), epochs=1, verbose=0,
                     shuffle=False)
    assert np.isfinite(hist.history["loss"][0])


def test_a_wrong_manifest_count_over_an_intact_shard_is_diagnosed(converted, tmp_path):
    """Before: "re-convert the dataset"; the data is intact, the manifest is wrong."""
    from tfpipe.cli.verify import next_step

    path = converted / "manifest.json"
    obj = json.loads(path.read_text())
    entry = obj["splits"]["train"]["shards"][0]
    true, entry["num_records"] = entry["num_records"], 70
    path.write_text(json.dumps(obj))
    rep = verify(converted)
    assert [(f.kind, f.path) for f in rep.findings] == [
        ("count-mismatch", str(converted / entry["path"]))]
    assert rep.findings[0].message == (
        f"manifest says 70 records, the shard holds {true} intact records and reads to its "
        "end (every frame and CRC valid): the manifest is wrong, not the data")
    step = next_step(rep)
    assert "re-convert" not in step and f"tfpipe verify {converted} --salvage" in step
    assert "manifest" in step
    out = tmp_path / "fixed"
    s = salvage_dataset(converted, out)
    assert not s.intact
    fixed = Manifest.load(out)
    assert fixed.splits["train"].shards[0].num_records == true
    assert verify(out).ok


def test_a_wrong_manifest_sha256_over_an_intact_shard_is_diagnosed(converted):
    path = converted / "manifest.json"
    obj = json.loads(path.read_text())
    obj["splits"]["val"]["shards"][1]["sha256"] = "0" * 64
    path.write_text(json.dumps(obj))
    rep = verify(converted)
    assert [f.kind for f in rep.findings] == ["checksum-mismatch"]
    assert "its records are intact" in rep.findings[0].message
    assert "the manifest's sha256 is wrong, or the shard was rewritten" in \
        rep.findings[0].message
