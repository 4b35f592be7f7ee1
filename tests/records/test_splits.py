"""Globs and plain directories honour the split (records/splits.py via open_source)."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfpipe.errors import InputError
from tfpipe.records import open_source
from tfpipe.records.splits import split_of


def _write(path, records):
    # written by TF's own writer: shards tfpipe did not write
    with tf.io.TFRecordWriter(str(path)) as w:
        for r in records:
            w.write(r)


def _labels(src):
    return [int(e["image/class/label"]) for e in src.dataset().map(src.parse)]


def test_split_of_names():
    assert split_of("/d/train-00000-of-00004.tfrecord") == "train"
    assert split_of("/d/mnist-train.tfrecord-00000-of-00004") == "train"
    assert split_of("/d/imagenet2012-validation.tfrecord-00003-of-00064") == "val"
    assert split_of("/d/val_0.tfrec") == "val"
    assert split_of("/d/my-test.tfrecord.gz") == "test"
    assert split_of("/d/EVAL-1.tfrecord") == "eval"
    # words, not substrings; the parent directory only when named for a split
    assert split_of("/d/training.tfrecord") is None
    assert split_of("/d/pretrain-0.tfrecord") is None
    assert split_of("/data/val/part-0.tfrecord") == "val"
    assert split_of("/tmp/test_glob0/part-0.tfrecord") is None


def test_glob_honours_split_tfpipe_and_tfds_names(tmp_path, cls_records):
    # 12 records: labels 0,1,2,0,1,2,...; train gets records 0-5, val 6-8, test 9-11
    _write(tmp_path / "train-00000-of-00002.tfrecord", cls_records[0:3])
    _write(tmp_path / "train-00001-of-00002.tfrecord", cls_records[3:6])
    _write(tmp_path / "val-00000-of-00001.tfrecord", cls_records[6:9])
    _write(tmp_path / "test-00000-of-00001.tfrecord", cls_records[9:12])
    glob = str(tmp_path / "*.tfrecord")
    train = open_source(glob, split="train")
    assert [f.rsplit("/", 1)[1] for f in train.files] == \
        ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]
    assert train.num_records == 6
    # before: every split read all 12 records (val silently read the training shards)
    assert _labels(open_source(glob, split="val")) == [0, 1, 2]
    assert open_source(glob, split="validation").files == open_source(glob, split="val").files
    assert open_source(glob, split="test").num_records == 3

    tfds = tmp_path / "tfds"
    tfds.mkdir()
    _write(tfds / "mnist-train.tfrecord-00000-of-00002", cls_records[0:4])
    _write(tfds / "mnist-train.tfrecord-00001-of-00002", cls_records[4:8])
    _write(tfds / "mnist-validation.tfrecord-00000-of-00001", cls_records[8:11])
    # a plain directory (no manifest) is read like a glob of its shards
    src = open_source(str(tfds), split="val")
    assert src.manifest is None and src.num_records == 3
    assert _labels(src) == [2, 0, 1]
    assert open_source(str(tfds), split="train").num_records == 8
    assert open_source(str(tfds / "mnist-*"), split="validation").num_records == 3


def test_split_without_files_is_an_error_naming_them(tmp_path, cls_records):
    _write(tmp_path / "train-00000-of-00001.tfrecord", cls_records[:4])
    with pytest.raises(InputError) as e:
        open_source(str(tmp_path / "train-*.tfrecord"), split="val")
    msg = str(e.value)
    assert "no file names split 'val'" in msg and "'validation'" in msg
    assert "train-00000-of-00001.tfrecord (train)" in msg and "['train']" in msg
    with pytest.raises(InputError, match="no file names split 'test'"):
        open_source(str(tmp_path), split="test")


def test_unnamed_shards_are_train_only(tmp_path, cls_records):
    _write(tmp_path / "part-0.tfrecord", cls_records[:5])
    _write(tmp_path / "part-1.tfrecord", cls_records[5:9])
    assert open_source(str(tmp_path / "part-*.tfrecord")).num_records == 9
    assert open_source(str(tmp_path)).num_records == 9  # plain directory, split train
    with pytest.raises(InputError) as e:
        open_source(str(tmp_path / "part-*.tfrecord"), split="val")
    assert "no file names any split" in str(e.value)
    assert "part-0.tfrecord (no split), part-1.tfrecord (no split)" in str(e.value)
    # a directory named for the split names its shards
    (tmp_path / "val").mkdir()
    _write(tmp_path / "val" / "part-0.tfrecord", cls_records[9:])
    assert _labels(open_source(str(tmp_path / "val"), split="val")) == [0, 1, 2]


def test_directory_without_shards_or_manifest(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(InputError, match="no manifest.json and no TFRecord shards"):
        open_source(str(tmp_path))


def test_inspect_defaults_to_a_split_the_files_name(tmp_path, cls_records):
    """A glob of val shards alone (or one val shard): inspect shows 'val' rather than
    failing on the default 'train'."""
    from tfpipe.records import summarize

    _write(tmp_path / "val-00000-of-00001.tfrecord", cls_records[:3])
    for path in (str(tmp_path / "val-*"), str(tmp_path / "val-00000-of-00001.tfrecord")):
        s = summarize(path, num_records=1)
        assert s["split"] == "val" and s["splits"]["val"]["records"] == 3
