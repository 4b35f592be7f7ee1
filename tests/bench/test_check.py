"""Pre-flight checks pass on the real pipeline and fail, with a clear reason, on broken ones.

The broken builders wrap a small synthetic dataset (the check's logic is what is
under test); the passing run uses the real pipeline, all checks in one go.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.bench import check as C


def synthetic(images=None, labels=None, dtype=tf.float32):
    """A builder of 3 batches of 8 float32 32x32x3 images, int64 labels."""
    def build(config, split="train", epoch=0, worker=None, **kw):
        ds = tf.data.Dataset.range(24).map(lambda i: {
            "image": tf.cast(tf.fill([32, 32, 3], tf.cast(i, tf.float32) / 24), dtype),
            "label": i % 4}).batch(8)
        if images is not None:
            ds = ds.map(lambda b: {**b, "image": images(b["image"])})
        if labels is not None:
            ds = ds.map(lambda b: {**b, "label": labels(b["label"])})
        return ds
    return build


def test_diff_batches_names_batch_key_and_size() -> None:
    a = [{"image": np.zeros((2, 3), np.float32), "label": np.arange(2)}]
    b = [{"image": np.array([[0, 0.5, 0], [0, 0, 2]], np.float32), "label": np.arange(2)}]
    assert C.diff_batches(a, a) is None
    assert C.diff_batches(a, b) == ("batch 0, key 'image': 2 of 6 elements differ, "
                                    "max abs diff 2")
    assert "gave 1 and 2 batches" in C.diff_batches(a, a + a)
    # bit-identical means bits: -0.0 == 0.0 numerically, but not the same batch
    c = [{"image": -np.zeros((2, 3), np.float32), "label": np.arange(2)}]
    assert C.diff_batches(a, c) is not None


def test_every_check_passes_on_the_real_pipeline(tiny_config) -> None:
    results = C.run_checks(tiny_config, batches=2)
    by = {r.name: r for r in results}
    assert list(by) == ["reproducible", "dtypes and shapes", "labels", "memory",
                        "bad input (on_error: skip)", "two workers", "enable_rate"]
    assert all(r.passed for r in results), [(r.name, r.detail) for r in results]
    assert "float32[8, 32, 32, 3]" in by["dtypes and shapes"].detail
    assert "1 counted as skipped" in by["bad input (on_error: skip)"].detail
    assert "together = all 32" in by["two workers"].detail
    assert "disjoint" in by["two workers"].detail
    assert "8 of 8 batches augmented" in by["enable_rate"].detail


def test_mixup_labels_sum_to_one_on_the_real_pipeline(tiny_config) -> None:
    from tfpipe.bench._build import resolve_config

    cfg = resolve_config(tiny_config, ["augment.batch.mixup.enabled=true",
                                       "augment.batch.mixup.p=1.0"])
    (ok,) = C.run_checks(cfg, only=["labels"], batches=1)
    assert ok.passed and "mixup" in ok.detail


def test_non_reproducible_builder_fails_with_a_diff(tiny_config) -> None:
    # A fresh op seed per build: with only the global seed, a test that ran
    # tf.keras.utils.set_random_seed earlier in the same worker would make two
    # builds draw the same "random" numbers and the check (rightly) pass.
    def stateful_images(x):
        return x + tf.random.uniform(tf.shape(x), seed=int.from_bytes(os.urandom(4), "little"))

    stateful = synthetic(images=stateful_images)
    (r,) = C.run_checks(tiny_config, only=["reproducible"], batches=2, builder=stateful)
    assert not r.passed
    assert "batch 0, key 'image': 24576 of 24576 elements differ, max abs diff" in r.detail


def test_broken_labels_dtypes_and_workers_fail(tiny_config) -> None:
    one_hot = synthetic(labels=lambda y: tf.one_hot(y, 4) * 1.1)
    (r,) = C.run_checks(tiny_config, only=["labels"], batches=1, builder=one_hot)
    assert not r.passed and "row 0: label sums to 1.100000" in r.detail

    (r,) = C.run_checks(tiny_config, only=["dtypes"], batches=1,
                        builder=synthetic(dtype=tf.float16))
    assert not r.passed and "image dtype float16, configured float32" in r.detail

    # a builder that ignores `worker` hands every worker everything
    (r,) = C.run_checks(tiny_config, only=["workers"], builder=synthetic())
    assert not r.passed and "24 images delivered to both workers" in r.detail

    # augmentation that never happens: 0 of 8 batches differ at enable_rate 1.0
    (r,) = C.run_checks(tiny_config, only=["enable_rate"], builder=synthetic())
    assert not r.passed and "0 of 8 batches augmented" in r.detail


def test_unknown_check_and_missing_path() -> None:
    with pytest.raises(ValueError, match="unknown checks"):
        C.run_checks({"data": {"path": "/x"}}, only=["nope"])
    with pytest.raises(ValueError, match="data.path"):
        C.run_checks({"data": {}})


def test_fractional_enable_rate_on_the_real_pipeline(tiny_config) -> None:
    from tfpipe.bench._build import resolve_config

    cfg = resolve_config(tiny_config, ["augment.enable_rate=0.5"])
    (r,) = C.run_checks(cfg, only=["enable_rate"])
    assert r.passed, r.detail
    assert "of 48 batches augmented, enable_rate 0.5 expects 24.0 +- 11.4" in r.detail
