"""Shards tfpipe did not write (tfpipe's keys, plain tf.io.TFRecordWriter):
adopted, they give cardinality, exact resume and `check` as converted data;
labels outside [0, num_classes) fail by name; data.label_offset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import build_pipeline
from tfpipe.errors import ConfigError
from tfpipe.records.adopt import adopt

from .conftest import _example, base_config, make_images, write_shards

N_TRAIN, N_VAL = 26, 6


def _cfg(path: str, **over) -> dict:
    return base_config(path, **{"pipeline.batch_size": 4, "pipeline.shuffle_buffer": 16,
                                "augment.pixel": {}, **over})


def _write(out: Path, labels_of) -> Path:
    images = make_images(N_TRAIN + N_VAL, seed=11)
    recs = [_example(enc, fmt, labels_of(i)) for i, (enc, fmt, _) in enumerate(images)]
    write_shards(out, "train", recs[:N_TRAIN], 2)
    write_shards(out, "val", recs[N_TRAIN:], 1)
    return out


@pytest.fixture(scope="module")
def adopted(tmp_path_factory) -> str:
    out = _write(tmp_path_factory.mktemp("own"), lambda i: i % 4)
    adopt(out)
    return str(out)


def _batches(ds) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(b["image"].numpy(), b["label"].numpy()) for b in ds]


def test_adopted_shards_cardinality_and_exact_resume(adopted):
    """Before adoption the directory was refused (no manifest.json); as bare shards
    its cardinality is unknown (tests/pipeline/test_cardinality.py)."""
    cfg = _cfg(adopted)
    ds = build_pipeline(cfg)
    assert int(ds.cardinality()) == N_TRAIN // 4  # the manifest's counts, drop_remainder: 6
    full = _batches(ds.take(N_TRAIN // 4))
    resumed = _batches(build_pipeline(cfg, step=2).take(N_TRAIN // 4 - 2))
    assert len(resumed) == len(full) - 2
    for (xa, ya), (xb, yb) in zip(full[2:], resumed):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)


def test_check_on_adopted_shards(adopted):
    from tfpipe.bench.check import run_checks

    (r,) = run_checks(_cfg(adopted), only=["records"], batches=1)
    assert r.passed and not r.skipped, r.detail  # skipped before: no manifest to compare


@pytest.fixture(scope="module")
def one_based(tmp_path_factory) -> Path:
    return _write(tmp_path_factory.mktemp("one_based"), lambda i: 1 + i % 4)


def test_one_based_labels_fail_by_name_and_label_offset_fixes(one_based, tmp_path):
    """Before: labels 1..4 with num_classes 4 went out as they were (label 4: an
    all-zero one-hot row), no error anywhere."""
    glob = str(one_based / "*.tfrecord")
    # a bare glob: the graph check fails the iteration naming value, sample, range and
    # fix, under on_error: skip too (the default): a config error, not a bad record
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"label 4 \(stored value 4\) of sample 1 is outside \[0, 4\).*"
                             r"data.label_offset: 1"):
        _batches(build_pipeline(_cfg(glob, **{"pipeline.on_error": "skip"}), split="val"))
    # adopted: the manifest's label range fails the build itself, before any read
    import shutil

    d = tmp_path / "adopted"
    shutil.copytree(one_based, d)
    adopt(d)
    with pytest.raises(ConfigError, match=r"labels range over \[1, 4\].*outside \[0, 4\).*"
                                          r"data.label_offset: 1"):
        build_pipeline(_cfg(str(d)))
    # the fix: every label minus 1, in the order of the records (oracle: TF's parser)
    stored = [int(tf.io.parse_single_example(r, {"image/class/label": tf.io.FixedLenFeature(
        [], tf.int64)})["image/class/label"]) for r in tf.data.TFRecordDataset(
            sorted(str(p) for p in one_based.glob("val-*")))]
    got = np.concatenate([y for _, y in _batches(build_pipeline(
        _cfg(str(d), **{"data.label_offset": 1}), split="val"))])
    assert got.tolist() == [v - 1 for v in stored] and sorted(set(stored)) == [1, 2, 3, 4]
    # check names the shard and record, and the fix
    from tfpipe.bench.check import run_checks

    (r,) = run_checks(_cfg(glob), only=["labels"], batches=1)
    assert not r.passed
    # shard 1 holds records 1, 3, 5, ... (labels 2, 4, ...): its record 1 is the first 4
    assert "record 1 of " in r.detail and "train-00001-of-00002.tfrecord" in r.detail
    assert "image/class/label 4 outside [0, 4)" in r.detail
    assert "labels found: [1, 4]" in r.detail and "data.label_offset: 1" in r.detail
