"""`tfpipe inspect` / `tfpipe verify` through click's CliRunner."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from tfpipe.cli.main import cli
from tfpipe.records import Manifest, ShardedWriter, ShardEntry, SplitInfo, detection_schema



def _run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_inspect_json(tmp_path, cls_records, make_dataset):
    make_dataset(tmp_path, cls_records)
    r = _run("inspect", str(tmp_path), "-n", "2", "--json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)
    assert s["splits"]["train"]["records"] == 6 and s["splits"]["val"]["records"] == 6
    # train holds records 0, 2, 4, ... whose labels are i % 3
    expected = {}
    for i in range(0, 12, 2):
        expected[i % 3] = expected.get(i % 3, 0) + 1
    assert {h["label"]: h["count"] for h in s["class_histogram"]} == expected
    assert [h["name"] for h in s["class_histogram"]] == ["c0", "c1", "c2"]
    assert len(s["records"]) == 2 and s["records"][0]["format"] == "jpeg"
    assert s["records"][0]["filename"] == "img0.jpg"
    r = _run("inspect", str(tmp_path), "--split", "val")
    assert r.exit_code == 0 and "img1.jpg" in r.output
    assert _run("inspect", str(tmp_path / "nothing*")).exit_code == 2


def test_inspect_detection_boxes(tmp_path, det_records):
    m = Manifest(schema=detection_schema())
    with ShardedWriter(tmp_path, "train") as w:
        for r in det_records:
            w.write(r)
    m.splits["train"] = SplitInfo([ShardEntry.from_info(i, tmp_path) for i in w.infos])
    m.save(tmp_path)
    s = json.loads(_run("inspect", str(tmp_path), "--json").output)
    assert [rec["boxes"] for rec in s["records"]] == [1, 2, 3, 4]
    assert {h["label"]: h["count"] for h in s["class_histogram"]} == {0: 4, 1: 3, 2: 2, 3: 1}


def test_verify_exit_codes_and_salvage(tmp_path, cls_records, make_dataset):
    ds = tmp_path / "ds"
    make_dataset(ds, cls_records, shard_size=1 << 20)
    r = _run("verify", str(ds), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["ok"] is True
    shard = ds / "train-00000-of-00001.tfrecord"
    first = len(cls_records[0]) + 16
    with open(shard, "r+b") as f:  # damage record 1's data
        f.seek(first + 12 + 30)
        b = f.read(1)
        f.seek(first + 12 + 30)
        f.write(bytes([b[0] ^ 1]))
    r = _run("verify", str(ds), "--json", "--salvage", str(tmp_path / "out"))
    assert r.exit_code == 1
    rep = json.loads(r.output)
    kinds = sorted(f["kind"] for f in rep["findings"])
    assert kinds == ["checksum-mismatch", "corrupted-data", "count-mismatch"]
    bad = next(f for f in rep["findings"] if f["kind"] == "corrupted-data")
    assert (bad["path"], bad["index"], bad["offset"]) == (str(shard), 1, first)
    sal = rep["salvaged"][0]
    assert sal["records_kept"] == 5 and sal["records_lost_known"] == 1
    assert sal["records_lost_per_manifest"] == 1
    assert os.path.exists(tmp_path / "out" / shard.name)
    # human output names file, record and offset
    r = _run("verify", str(ds))
    assert r.exit_code == 1 and "corrupted-data" in r.output and str(first) in r.output
    # a single file, and a missing path
    assert _run("verify", str(tmp_path / "out" / shard.name)).exit_code == 0
    assert _run("verify", str(tmp_path / "nope")).exit_code == 2


def test_verify_deep_finds_bad_image_and_box(tmp_path, det_records, jpegs):
    from tfpipe.records import encode_example, write_shard

    bad_box = encode_example({
        "image/encoded": jpegs[0], "image/format": "jpeg", "image/height": 1, "image/width": 1,
        "image/object/bbox/ymin": [0.6], "image/object/bbox/xmin": [0.1],
        "image/object/bbox/ymax": [0.2], "image/object/bbox/xmax": [1.5],
        "image/object/class/label": [0]}, detection_schema())
    bad_img = encode_example({
        "image/encoded": b"not an image", "image/format": "jpeg", "image/height": 1,
        "image/width": 1}, detection_schema())
    path = str(tmp_path / "d.tfrecord")
    write_shard(path, det_records + [bad_box, bad_img])
    assert _run("verify", path).exit_code == 0  # framing is intact
    r = _run("verify", path, "--deep", "--json")
    assert r.exit_code == 1
    found = {(f["kind"], f["index"]) for f in json.loads(r.output)["findings"]}
    assert found == {("bad-image", 4), ("bad-box", 4), ("bad-image", 5)}


def test_verify_deep_checks_records_against_the_schema(tmp_path, make_dataset, cls_records):
    from tfpipe.records import FeatureSpec, Schema, encode_example

    other = Schema([FeatureSpec("image/encoded", "string"), FeatureSpec("image/class/label",
                                                                         "float32")])
    odd = encode_example({"image/encoded": b"x", "image/class/label": 1.0}, other)
    make_dataset(tmp_path, cls_records[:2] + [odd], splits=("train",), shard_size=1 << 20)
    r = _run("verify", str(tmp_path), "--deep", "--json")
    assert r.exit_code == 1
    msgs = [(f["kind"], f["index"], f["message"]) for f in json.loads(r.output)["findings"]]
    assert ("bad-example", 2, "required feature 'image/format' is missing") in msgs
    assert ("bad-example", 2, "feature 'image/class/label' holds float_list, "
            "the schema says int64") in msgs
    assert all(i == 2 for _, i, _ in msgs)


def test_verify_gzip_dataset(tmp_path, make_dataset, cls_records):
    make_dataset(tmp_path, cls_records, compression="gzip", shard_size=1 << 20)
    r = _run("verify", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["records_checked"] == len(cls_records)
    (tmp_path / ".train-00000-of-00001.tfrecord.gz.tmp-123-4").write_bytes(b"")
    found = json.loads(_run("verify", str(tmp_path), "--json").output)["findings"]
    assert [f["kind"] for f in found] == ["unlisted-file"]


def test_verify_without_a_manifest_checks_what_it_can(tmp_path, cls_records, make_dataset):
    """Before: a directory without manifest.json was DAMAGED (exit 1, a `manifest`
    finding) and a glob was 'does not exist' (exit 2)."""
    ds = tmp_path / "ds"
    make_dataset(ds, cls_records, shard_size=1 << 20)
    (ds / "manifest.json").unlink()
    r = _run("verify", str(ds))
    assert r.exit_code == 0, r.output
    assert "DAMAGED" not in r.output and "no manifest.json" in r.output
    assert "not checked" in r.output
    rep = json.loads(_run("verify", str(ds), "--json").output)
    assert rep["ok"] is True and rep["manifest"] is False and rep["files_checked"] == 2
    assert rep["records_checked"] == len(cls_records)
    assert any("record counts" in n and "sha256" in n for n in rep["unchecked"])
    r = _run("verify", str(ds / "train-*.tfrecord"), "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["files_checked"] == 1 and rep["records_checked"] == 6
    assert _run("verify", str(ds), "--deep").exit_code == 0
    # real damage is still found, by file, record and offset
    shard = ds / "val-00000-of-00001.tfrecord"
    with open(shard, "r+b") as f:
        f.seek(len(cls_records[1]) + 16 + 12 + 30)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 1]))
    r = _run("verify", str(ds), "--json")
    assert r.exit_code == 1
    found = [(f["kind"], f["path"], f["index"]) for f in json.loads(r.output)["findings"]]
    assert found == [("corrupted-data", str(shard), 1)]
    assert _run("verify", str(tmp_path / "nothing-*.tfrecord")).exit_code == 2
