"""Records tfpipe did not write: verify without a manifest, `tfpipe adopt`,
`tfpipe inspect`'s suggested data.keys (shards written here by TF's own
tf.train.Example / tf.io.TFRecordWriter, with TFDS, OD API and custom keys)."""

from __future__ import annotations

import json

import pytest
import tensorflow as tf
from click.testing import CliRunner

from tfpipe.cli.main import cli


def _run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _feature(v):
    if isinstance(v, (bytes, str)) or (isinstance(v, list) and v and isinstance(v[0], bytes)):
        vals = v if isinstance(v, list) else [v]
        return tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[x.encode() if isinstance(x, str) else x for x in vals]))
    vals = v if isinstance(v, list) else [v]
    if vals and isinstance(vals[0], float):
        return tf.train.Feature(float_list=tf.train.FloatList(value=vals))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=vals))


def example(**feats) -> bytes:
    """A tf.train.Example from keyword features (``__`` in a name is ``/``)."""
    return tf.train.Example(features=tf.train.Features(feature={
        k.replace("__", "/"): _feature(v) for k, v in feats.items()})).SerializeToString()


def write(path, records) -> str:
    with tf.io.TFRecordWriter(str(path)) as w:
        for r in records:
            w.write(r)
    return str(path)


@pytest.fixture(scope="module")
def tfds_style(tmp_path_factory, request) -> str:
    """A directory of TFDS-named shards (keys image, label, file_name), no manifest:
    train 2 shards x 3 records, validation 1 shard x 2 records."""
    from tfpipe.sample_data import make_jpeg_bytes

    jpegs = make_jpeg_bytes(8, seed=3, size_range=(24, 40))
    d = tmp_path_factory.mktemp("tfds_style")
    recs = [example(image=jpegs[i], label=i % 3, file_name=f"img{i}.jpg") for i in range(8)]
    write(d / "mine-train.tfrecord-00000-of-00002", recs[0:3])
    write(d / "mine-train.tfrecord-00001-of-00002", recs[3:6])
    write(d / "mine-validation.tfrecord-00000-of-00001", recs[6:8])
    return str(d)


def test_verify_without_manifest_tfds_names_and_foreign_image_key(tfds_style, tmp_path):
    """Before: a directory of TFDS-named shards was DAMAGED ('no manifest.json and no
    TFRecord files'), and --deep never decoded an image not under image/encoded."""
    r = _run("verify", tfds_style)
    assert r.exit_code == 0, r.output
    assert "DAMAGED" not in r.output and "not checked" in r.output
    rep = json.loads(_run("verify", tfds_style, "--json", "--deep").output)
    assert rep["ok"] and rep["files_checked"] == 3 and rep["records_checked"] == 8
    checked = " ".join(rep["checked"])
    assert "framing and CRCs" in checked and "tf.train.Example" in checked
    assert "image" in checked
    unchecked = " ".join(rep["unchecked"])
    assert "sha256" in unchecked and "schema" in unchecked and "tfpipe adopt" in unchecked
    # a glob is accepted too; a broken image under a foreign key is found by --deep
    bad = tmp_path / "x-train.tfrecord-00000-of-00001"
    write(bad, [example(image=b"\xff\xd8\xff\xe0" + b"\0" * 40, label=0)])
    rep = json.loads(_run("verify", str(tmp_path / "x-*"), "--json", "--deep").output)
    assert [(f["kind"], f["index"]) for f in rep["findings"]] == [("bad-image", 0)]
    assert "'image'" in rep["findings"][0]["message"]


def _sha(path) -> str:
    import hashlib

    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_adopt_foreign_keys_then_verify(tfds_style, tmp_path):
    """Before: no `adopt` verb (exit 2, 'No such command')."""
    import os
    import shutil

    d = tmp_path / "d"
    shutil.copytree(tfds_style, d)
    shards = sorted(str(p) for p in d.iterdir())
    r = _run("adopt", str(d), "--json")
    assert r.exit_code == 0, r.output
    m = json.loads((d / "manifest.json").read_text())
    assert sorted(m["splits"]) == ["train", "val"]  # validation -> val, as convert names it
    for split, want in (("train", shards[:2]), ("val", shards[2:])):
        got = m["splits"][split]["shards"]
        assert [e["path"] for e in got] == [os.path.basename(p) for p in want]
        # independent oracles: TF's own reader counts, hashlib, the file system
        assert [e["num_records"] for e in got] == \
            [sum(1 for _ in tf.data.TFRecordDataset(p)) for p in want]
        assert [e["sha256"] for e in got] == [_sha(p) for p in want]
        assert [e["num_bytes"] for e in got] == [os.path.getsize(p) for p in want]
    assert {k: (v["dtype"], v["kind"]) for k, v in m["schema"].items()
            if k != "tfpipe/schema_version"} == {
        "image": ("string", "fixed"), "label": ("int64", "fixed"),
        "file_name": ("string", "fixed")}
    assert m["source"]["labels"] == {"key": "label", "min": 0, "max": 2,
                                     "counts": {"0": 3, "1": 3, "2": 2}}
    assert [_sha(p) for p in shards] == [_sha(os.path.join(tfds_style, os.path.basename(p)))
                                         for p in shards]  # not rewritten
    rep = json.loads(_run("verify", str(d), "--json").output)
    assert rep["ok"] and rep["manifest"] and rep["records_checked"] == 8
    with open(shards[1], "r+b") as f:  # flip one byte inside a record
        f.seek(40)
        b = f.read(1)
        f.seek(40)
        f.write(bytes([b[0] ^ 1]))
    r = _run("verify", str(d), "--json")
    assert r.exit_code == 1
    kinds = {f["kind"] for f in json.loads(r.output)["findings"]}
    assert "checksum-mismatch" in kinds and "corrupted-data" in kinds
    assert "already has a manifest.json" in _run("adopt", str(d)).output


def test_adopt_out_links_classes_and_refusals(tfds_style, tmp_path):
    import os

    out = tmp_path / "adopted"
    classes = tmp_path / "classes.txt"
    classes.write_text("cat\ndog\nbird\n")
    r = _run("adopt", os.path.join(tfds_style, "mine-*"), "--out", str(out),
             "--classes", str(classes))
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["class_names"] == ["cat", "dog", "bird"]
    for e in m["splits"]["train"]["shards"]:  # hard links: the same inode, no copy
        assert os.path.samefile(out / e["path"], os.path.join(tfds_style, e["path"]))
    # a key whose type differs between shards: named
    bad = tmp_path / "bad"
    bad.mkdir()
    write(bad / "train-0.tfrecord", [example(image=b"x", label=1)])
    write(bad / "train-1.tfrecord", [example(image=b"x", label=1.5)])
    r = CliRunner().invoke(cli, ["adopt", str(bad)])
    assert r.exit_code == 2 and "feature 'label' holds ['float32', 'int64']" in r.output
    # a damaged shard is refused by record, with the way on
    with open(bad / "train-1.tfrecord", "r+b") as f:
        f.seek(20)
        f.write(b"\0\0")
    r = CliRunner().invoke(cli, ["adopt", str(bad)])
    assert r.exit_code != 0 and "train-1.tfrecord: record 0" in r.output
    assert "--salvage" in r.output


TFDS_BLOCK = """data:
  keys:
    image: image
    label: label
    filename: file_name
"""


def test_inspect_tfds_style_suggests_keys(tfds_style):
    """Before: no key table and no suggestion (and a directory without manifest.json
    was refused: 'no manifest.json in ...')."""
    import yaml

    r = _run("inspect", tfds_style)
    assert r.exit_code == 0, r.output
    assert TFDS_BLOCK in r.output  # verbatim, ready to paste
    for row in (("image", "string", "[]"), ("label", "int64", "[]"),
                ("file_name", "string", "[]")):
        assert any(all(c in line for c in row) for line in r.output.splitlines()), row
    s = json.loads(_run("inspect", tfds_style, "--json").output)
    assert yaml.safe_load(s["suggested_keys"]["yaml"]) == {
        "data": {"keys": {"image": "image", "label": "label", "filename": "file_name"}}}
    assert s["label_key"] == "label"
    assert [(h["label"], h["count"]) for h in s["class_histogram"]] == [(0, 2), (1, 2), (2, 2)]


def test_inspect_detection_tfds_od_api_and_generic(tmp_path):
    import yaml

    from tfpipe.records.suggest import features, suggest
    from tfpipe.sample_data import make_jpeg_bytes

    jpg = make_jpeg_bytes(1, seed=0, size_range=(16, 16))[0]
    coco = [example(image=jpg, image__filename="a.jpg", objects__bbox=[0.1, 0.2, 0.5, 0.6] * k,
                    objects__label=[3] * k) for k in (1, 2)]
    s = suggest(features(coco), 2)
    assert s.yaml() == ("data:\n  keys:\n    image: image\n    boxes: objects/bbox\n"
                        "    box_format: yxyx\n    box_units: normalized\n"
                        "    box_labels: objects/label\n    filename: image/filename\n")
    od = [example(image__encoded=jpg, image__source_id="17", image__height=16,
                  image__width=16, **{f"image__object__bbox__{c}": [0.5] for c in
                                      ("xmin", "ymin", "xmax", "ymax")},
                  image__object__class__label=[1])]
    s = suggest(features(od), 1)
    assert s.own and s.keys["boxes"] == {c: f"image/object/bbox/{c}"
                                         for c in ("ymin", "xmin", "ymax", "xmax")}
    assert yaml.safe_load(s.yaml())["data"]["keys"]["filename"] == "image/source_id"
    # generic keys: the image by its magic bytes, the label-like int64 scalar, boxes noted
    generic = [example(pixels=jpg, img_id=7 + i, cls=i % 2, bboxes=[3.0, 4.0, 30.0, 40.0],
                       caption="a cat") for i in range(3)]
    write(tmp_path / "mine.tfrecord", generic)
    r = _run("inspect", str(tmp_path / "*.tfrecord"))
    assert r.exit_code == 0, r.output
    assert ("data:\n  keys:\n    image: pixels\n    label: cls\n    boxes: bboxes\n"
            "    box_format: yxyx\n    box_units: pixels\n") in r.output
    assert "order of the four numbers" in " ".join(r.output.split())
