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
