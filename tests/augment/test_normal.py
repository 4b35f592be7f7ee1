"""tfpipe's standard normal (`pixel.normal_from_bits` / `sample_noise`): the knot
table against scipy's inverse normal CDF, the definition against a NumPy oracle
on TF's own Philox words, and the distribution against scipy.stats (mean, std,
Kolmogorov-Smirnov, tail mass). Pure TF (no native library needed)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from scipy import special, stats

from tfpipe import native
from tfpipe.augment import pixel
from tfpipe.native import noise as native_noise


def _knots() -> np.ndarray:
    """The knots regenerated independently: -ndtri(F 2^-32) over F = 2^e (1 + k/64)."""
    i = np.arange(31 * 64 + 1)
    f = np.ldexp(1.0 + (i % 64) / 64.0, i // 64)
    a = np.float32(-special.ndtri(f * 2.0 ** -32))
    a[-1] = np.float32(0.0)  # -ndtri(0.5) is -0.0; the table stores +0
    return a


def oracle(words: np.ndarray) -> np.ndarray:
    """NumPy float32 recomputation of the definition (docs/augment-pixel.md,
    "noise: tfpipe's standard normal")."""
    a = _knots()
    d = np.append(a[1:] - a[:-1], np.float32(0))
    v = (words >> np.uint32(1)).astype(np.int32)
    f = np.maximum(v.astype(np.float32), np.float32(1))
    b = f.view(np.int32)
    i = (b - 0x3F800000) >> 17
    frac = (b & 0x1FFFF).astype(np.float32) * np.float32(2.0 ** -17)
    m = a[i] + d[i] * frac
    return np.where((words & np.uint32(1)) == 1, -m, m).astype(np.float32)


def test_table_is_scipy_inverse_cdf() -> None:
    table = native_noise.normal_table()
    assert table.shape == (1986, 2) and table.dtype == np.float32
    np.testing.assert_array_equal(table[:1985, 0].view(np.uint32), _knots().view(np.uint32))
    assert (np.diff(table[:1985, 0]) < 0).all()  # strictly decreasing: a monotone map


def test_definition_matches_numpy_oracle() -> None:
    seed = tf.constant([11, -7], tf.int64)
    words = tf.random.stateless_uniform([64, 33, 3], seed, minval=None, maxval=None,
                                        dtype=tf.uint32, alg="philox").numpy()
    # the ends of the word range: f = 0 -> 1, the rounding up to 2^31, both signs
    words.flat[:8] = [0, 1, 2, 3, 0xFFFFFFFF, 0xFFFFFFFE, 0x7FFFFFFF, 0x80000000]
    got = pixel.normal_from_bits(tf.constant(words)).numpy()
    np.testing.assert_array_equal(got.view(np.uint32), oracle(words).view(np.uint32))
    with native.pure_tf():
        drawn = pixel.sample_noise(seed, [64, 33, 3]).numpy()
    want = oracle(tf.random.stateless_uniform([64, 33, 3], seed, minval=None, maxval=None,
                                              dtype=tf.uint32, alg="philox").numpy())
    np.testing.assert_array_equal(drawn.view(np.uint32), want.view(np.uint32))


def test_distribution_against_scipy() -> None:
    z = pixel.sample_noise(tf.constant([3, 1], tf.int64), [1024, 1024, 1]).numpy().ravel()
    n = z.size
    assert np.abs(z).max() <= 6.2303  # the largest knot: |n| <= -ndtri(2^-32)
    assert abs(z.mean()) < 5 / np.sqrt(n)
    assert abs(z.std() - 1.0) < 5 * np.sqrt(0.5 / n)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    for t in (1.0, 2.0, 3.0):  # two-sided tail mass vs the normal's, within 5 sigma
        p = 2 * stats.norm.sf(t)
        assert abs((np.abs(z) > t).mean() - p) < 5 * np.sqrt(p * (1 - p) / n)
    assert stats.skew(z) == pytest.approx(0.0, abs=0.02)
    assert stats.kurtosis(z) == pytest.approx(0.0, abs=0.04)
