"""Positioned resume: `build_pipeline(cfg, epoch=e, step=k)` and PipelinePosition.

Bit-identity against the uninterrupted epoch (and the epoch after it), with
L4 (mixup: batch seeds) and enable_rate < 1 (batch-level draws) on and with two
workers; the skipped records are never decoded (a corrupt image among them
does not raise under on_error: raise); the position refuses another config,
seed or dataset, naming what changed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.errors import ConfigError
from tfpipe.pipeline import build_pipeline, set_epoch
from tfpipe.train import PipelinePosition, ResumeError, epochs, restore

from train_data import batches, config, convert_raw


def _same(a, b) -> None:
    assert len(a) == len(b)
    for (xa, ya), (xb, yb) in zip(a, b):
        assert xa.dtype == xb.dtype and np.array_equal(xa, xb)
        assert np.array_equal(ya, yb)


@pytest.mark.slow
def test_step_is_the_rest_of_the_epoch_then_whole_epochs(train_dataset):
    """Direct (`build_pipeline(step=)` iterated twice) and through the epochs
    helper (one pipeline; a peek between epochs does not shift the next one).
    Per-worker positioning: test_train_kill.py (one pipeline per replica)."""
    # mixup draws from batch seeds, enable_rate < 1 once per planned batch: both
    # depend on the batch numbering, which must start at `step`
    cfg = config(train_dataset, **{"augment.batch": {"mixup": {"alpha": 0.4}},
                                   "augment.enable_rate": 0.5})
    ref = build_pipeline(cfg, epoch=2)  # iterations: epochs 2, 3 (tests/pipeline/test_epochs.py)
    e2, e3 = batches(ref), batches(ref)
    assert len(e2) == 8
    pos = build_pipeline(cfg, epoch=2, step=3)
    _same(batches(pos), e2[3:])  # the rest of epoch 2 ...
    _same(batches(pos), e3)      # ... then epoch 3 whole

    position = PipelinePosition(cfg, epoch=2, step=3)
    seen = []
    for e, ds in epochs(cfg, 4, position=position):
        assert position.value() == (e, 3 if e == 2 else 0)
        seen.append(batches(ds))
        if e == 2:
            next(iter(ds))  # a peek uses up an iteration: the next yield pins its epoch
    _same(seen[0], e2[3:])
    _same(seen[1], e3)


@pytest.mark.slow
def test_skipped_records_are_never_decoded(train_dataset, tmp_path):
    """A corrupt image in the skipped part: the full epoch fails (on_error:
    raise), the positioned one does not, so it never decoded the record."""
    shutil.copytree(train_dataset, tmp_path / "d")
    first = tmp_path / "d" / "train-00000-of-00004.tfrecord"
    recs = list(tf.data.TFRecordDataset(str(first)).as_numpy_iterator())
    # the converter's record, its image overwritten in place (the same length: the
    # shard keeps the size its manifest states)
    bad = tf.train.Example.FromString(recs[0])
    image = bad.features.feature["image/encoded"].bytes_list.value
    image[:] = [b"x" * len(image[0])]
    with tf.io.TFRecordWriter(str(first)) as w:
        for r in [bad.SerializeToString()] + recs[1:]:
            w.write(r)
    # no shuffle: the stream starts with shard 0's first record (the bad one)
    cfg = config(str(tmp_path / "d"),
                 **{"pipeline.shuffle_buffer": 1, "pipeline.on_error": "raise"})
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad record 0"):
        batches(build_pipeline(cfg))
    good = batches(build_pipeline(cfg, step=1))
    assert len(good) == 7


def test_bad_step_and_set_epoch_on_eval(train_dataset, split_dataset):
    with pytest.raises(ConfigError, match="step must be an integer >= 0"):
        build_pipeline(config(train_dataset), step=-1)
    with pytest.raises(Exception, match="set_epoch: needs a train dataset"):
        set_epoch(build_pipeline(config(split_dataset), split="val"), 1)


def test_position_round_trips_through_a_checkpoint(train_dataset, tmp_path):
    cfg = config(train_dataset)
    pos = PipelinePosition(cfg)
    pos.set(3, 6)
    ckpt = tf.train.Checkpoint(position=pos)
    path = ckpt.save(str(tmp_path / "c"))
    back = PipelinePosition(cfg)
    assert restore(tf.train.Checkpoint(position=back), back, path)
    assert back.value() == (3, 6)


@pytest.mark.parametrize("over, named", [
    ({"seed": 6}, "seed: checkpoint .* has 5, the config 6"),
    ({"pipeline.batch_size": 16}, "batch_size: checkpoint .* has 8, the config 16"),
    ({"augment.pixel": {}}, "pixel: checkpoint"),
])
def test_refuses_another_config(train_dataset, tmp_path, over, named):
    pos = PipelinePosition(config(train_dataset))
    pos.set(1, 2)
    path = tf.train.Checkpoint(position=pos).save(str(tmp_path / "c"))
    other = PipelinePosition(config(train_dataset, **over))
    with pytest.raises(ResumeError, match=named):
        restore(tf.train.Checkpoint(position=other), other, path)
    # threads and buffers never change a batch: not a reason to refuse
    same = PipelinePosition(config(train_dataset, **{"pipeline.num_parallel_calls": 1}))
    assert restore(tf.train.Checkpoint(position=same), same, path)


def test_refuses_changed_data(train_dataset, tmp_path):
    """The data re-converted with one image fewer (a new manifest) under the same
    path: the checkpoint of the old data is refused."""
    shutil.copytree(train_dataset, tmp_path / "d")
    cfg = config(str(tmp_path / "d"))
    pos = PipelinePosition(cfg)
    path = tf.train.Checkpoint(position=pos).save(str(tmp_path / "c"))
    shutil.copytree(Path(train_dataset).parent / "raw", tmp_path / "raw")
    shutil.rmtree(tmp_path / "raw" / "c63")
    shutil.rmtree(tmp_path / "d")
    convert_raw(tmp_path / "raw", tmp_path / "d")
    other = PipelinePosition(cfg)
    with pytest.raises(ResumeError, match="dataset .* changed since checkpoint"):
        restore(tf.train.Checkpoint(position=other), other, path)


def test_refuses_a_checkpoint_without_position(tmp_path):
    path = tf.train.Checkpoint(v=tf.Variable(1.0)).save(str(tmp_path / "c"))
    pos = PipelinePosition(config("/nonexistent/train-*.tfrecord"))
    with pytest.raises(ResumeError, match="holds no tfpipe.train.PipelinePosition"):
        restore(tf.train.Checkpoint(position=pos), pos, path)
