"""Each new iteration of a train dataset is the next epoch (issue 9, bug 6).

Iteration n of `build_pipeline(cfg, epoch=e)` is epoch e + n, bit for bit the
same as a fresh `build_pipeline(cfg, epoch=e + n)`: in a `for` loop, through
Keras `fit(epochs=3)`, in a new process, whatever the user's global seed, and
with the records cache on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.pipeline import build_pipeline

from .epochs_child import _cfg, _digest, _pass, fit_digests

# one xdist worker builds the module fixtures (fresh) once
pytestmark = pytest.mark.xdist_group("pipeline-epochs")

SRC = str(Path(tfpipe.__file__).resolve().parents[1])  # the child runs this same tfpipe


@pytest.fixture(scope="module")
def fresh(dataset) -> list[str]:
    """Digests of epochs 0..3, each from its own freshly built pipeline."""
    return [_digest(_pass(build_pipeline(_cfg(dataset), epoch=e))) for e in range(4)]


def test_for_loops_run_the_next_epochs(dataset, fresh):
    assert len(set(fresh)) == 4, "epochs 0..3 must differ"
    ds = build_pipeline(_cfg(dataset))
    assert [_digest(_pass(ds)) for _ in range(3)] == fresh[:3]
    # resume (build_pipeline(epoch=1): iteration n is epoch 1 + n):
    # test_global_seed_does_not_change_the_shuffle, which builds it under a global seed
    # repeat() re-iterates its input too: two passes are epochs 0 and 1
    rep = build_pipeline(_cfg(dataset)).repeat(2)
    both = _pass(rep)
    half = len(both) // 2
    assert [_digest(both[:half]), _digest(both[half:])] == fresh[:2]


def test_epochs_differ_in_order_and_augmentation(dataset):
    """Not only other pixels: another shuffle order (labels) per epoch."""
    ds = build_pipeline(_cfg(dataset, **{"augment.geometry": {}, "augment.pixel": {}}))
    labels = [np.concatenate([y for _, y in _pass(ds)]) for _ in range(2)]
    assert not np.array_equal(labels[0], labels[1])


def test_eval_split_repeats_exactly(dataset):
    ds = build_pipeline(_cfg(dataset), split="validation")
    assert _digest(_pass(ds)) == _digest(_pass(ds))


def test_keras_fit_trains_three_distinct_epochs(dataset, fresh):
    ds = build_pipeline(_cfg(dataset), as_supervised=True)
    assert fit_digests(ds, 3) == fresh[:3]


def test_new_process_fits_the_same_three_epochs(dataset, fresh):
    child = str(Path(__file__).with_name("epochs_child.py"))
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL="2")
    res = subprocess.run([sys.executable, child, dataset],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["unseeded"] == got["seeded"] == fresh[0]
    assert got["fit"] == fresh[:3]


def test_global_seed_does_not_change_the_shuffle(dataset, fresh):
    """Resumed at epoch 1 under a user's global seed: its for loops are epochs 1, 2, 3
    of the unseeded fresh builds (the resume case of the for loops above, seeded)."""
    tf.random.set_seed(99)
    try:
        later = build_pipeline(_cfg(dataset), epoch=1)  # resume: iteration n is epoch 1 + n
        assert [_digest(_pass(later)) for _ in range(3)] == fresh[1:4]
    finally:
        tf.random.set_seed(None)


@pytest.mark.parametrize("cache", ["memory", "dir"])
def test_records_cache_is_filled_once_and_serves_every_epoch(dataset, fresh, tmp_path, cache):
    """The records cache sits outside the per-epoch part: after one full pass the
    shards can vanish and the next epochs still come, equal to the live ones."""
    data = tmp_path / "data"
    data.mkdir()
    for f in Path(dataset).parent.glob("train-*.tfrecord"):
        shutil.copy(f, data / f.name)
    value = "memory" if cache == "memory" else str(tmp_path / "cache")
    ds = build_pipeline(_cfg(str(data / "train-*.tfrecord"), **{"pipeline.cache": value}))
    assert _digest(_pass(ds)) == fresh[0]
    shutil.rmtree(data)
    assert [_digest(_pass(ds)) for _ in range(2)] == fresh[1:3]


def test_options_still_apply_to_train(dataset):
    cfg = _cfg(dataset, **{"pipeline.private_threadpool": 2, "pipeline.ram_budget_mb": 128})
    opts = build_pipeline(cfg).options()
    assert opts.threading.private_threadpool_size == 2
    assert opts.autotune.ram_budget == 128 << 20 and opts.deterministic
