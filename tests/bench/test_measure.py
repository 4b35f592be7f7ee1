"""measure(): counts, bytes and fields on datasets whose contents are known."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.bench import Result, element_nbytes, measure


def _batched(n: int = 40, batch: int = 8) -> tf.data.Dataset:
    ds = tf.data.Dataset.range(n).map(
        lambda i: {"image": tf.fill([4, 3], tf.cast(i, tf.float32)), "label": i})
    return ds.batch(batch, drop_remainder=True)


def test_counts_steps_elements_and_bytes() -> None:
    r = measure(_batched(), warmup=2, steps=3)
    assert (r.steps, r.warmup, r.elements) == (3, 2, 24)
    # per element: 4x3 float32 image + int64 label
    assert r.bytes_per_s * r.wall_s == pytest.approx(24 * (12 * 4 + 8), rel=1e-9)
    assert r.elements_per_s == pytest.approx(r.elements / r.wall_s)
    assert r.batches_per_s == pytest.approx(3 / r.wall_s)
    assert r.p50_ms <= r.p90_ms <= r.p99_ms
    assert 0.0 <= r.cpu_util <= 1.0 and r.available_cpus >= 1
    assert r.peak_rss_mb >= r.rss_start_mb and r.rss_delta_mb >= 0


def test_repeat_continues_past_the_end_and_stop_does_not() -> None:
    # 5 batches per pass
    assert measure(_batched(), warmup=1, steps=12).steps == 12
    r = measure(_batched(), warmup=1, steps=12, repeat=False)
    assert (r.steps, r.elements) == (4, 32)


def test_unbatched_counts_one_per_step_and_element_bytes_override() -> None:
    ds = tf.data.Dataset.range(100).map(lambda i: tf.zeros([5, 7]))
    r = measure(ds, warmup=0, steps=10, batched=False)
    assert r.elements == 10
    r = measure(ds, warmup=0, steps=10, batched=False, element_bytes=1000)
    assert r.bytes_per_s * r.wall_s == pytest.approx(10 * 1000)


def test_string_bytes_are_their_lengths() -> None:
    assert element_nbytes({"s": tf.constant([b"ab", b"cde"]), "x": tf.zeros([2], tf.int32)}) == 5 + 8
    assert element_nbytes(tf.constant(b"hello")) == 5


def test_too_short_dataset_and_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="fewer than warmup"):
        measure(_batched(16), warmup=5, steps=1, repeat=False)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        measure(_batched(), steps=0)


def test_result_to_dict_has_mb_per_s() -> None:
    r = measure(_batched(), warmup=0, steps=2)
    d = r.to_dict()
    assert d["mb_per_s"] == pytest.approx(r.bytes_per_s / 1e6)
    assert set(f.name for f in dataclasses.fields(Result)) <= set(d)
    assert np.isfinite([v for v in d.values() if isinstance(v, float)]).all()
