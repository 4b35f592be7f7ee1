"""TfpipeNoise (noise.cc) == its pure-TF twin (`tfpipe.augment.pixel` noise ops
under `native.pure_tf()`), bit for bit, and == an independent NumPy oracle built
on TF's own Philox words (`stateless_uniform` uint32) and scipy's ndtri."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import native
from tfpipe.augment import pixel
from tfpipe.native import noise as native_noise

from .conftest import needs

pytestmark = needs(native_noise.available(), "native noise kernel")

OPS = {"gaussian": pixel.random_gaussian_noise, "speckle": pixel.random_speckle_noise}


def _images(dtype: tf.DType, shape: tuple[int, ...]) -> tf.Tensor:
    rng = np.random.default_rng(7)
    u8 = rng.integers(0, 256, shape, dtype=np.uint8)
    u8.flat[:5] = (0, 255, 0, 255, 128)  # the clip / saturate ends
    return tf.constant(u8) if dtype == tf.uint8 else tf.constant(u8.astype(np.float32) / 255.0)


def _both(fn):
    got = fn().numpy()
    with native.pure_tf():
        ref = fn().numpy()
    return got, ref


@pytest.mark.parametrize("kind", sorted(OPS))
@pytest.mark.parametrize("dtype", [tf.uint8, tf.float32])
@pytest.mark.parametrize("p", [1.0, 0.5])
def test_batch_matches_twin(kind: str, dtype: tf.DType, p: float) -> None:
    # 7x9x3 = 189 values: not a multiple of Philox's 4 per call
    images = _images(dtype, (6, 7, 9, 3))
    seeds = tf.constant([[0, i] for i in range(6)], tf.int64) + tf.constant([[123, 5]], tf.int64)
    got, ref = _both(lambda: OPS[kind](images, seeds, 0.3, p))
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))
    if p < 1.0:  # some rows copied, some noised: both branches exercised
        changed = [(got[i] != images[i].numpy()).any() for i in range(6)]
        assert any(changed) and not all(changed)


@pytest.mark.parametrize("dtype", [tf.uint8, tf.float32])
def test_single_image_matches_twin(dtype: tf.DType) -> None:
    image = _images(dtype, (5, 6, 1))
    seed = tf.constant([-3, 2**40], tf.int64)  # negative and >32-bit words
    for kind in OPS:
        got, ref = _both(lambda: OPS[kind](image, seed, 0.2))
        np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))


def _oracle_normals(shape: tuple[int, ...], seed: np.ndarray) -> np.ndarray:
    """tfpipe's normal in NumPy float32 from TF's own Philox words and knots from
    scipy's ndtri (docs/augment-pixel.md, "noise: tfpipe's standard normal";
    tests/augment/test_normal.py)."""
    from scipy import special

    k = np.arange(31 * 64 + 1)
    a = np.float32(-special.ndtri(np.ldexp(1.0 + (k % 64) / 64.0, k // 64) * 2.0 ** -32))
    a[-1] = np.float32(0)
    d = np.append(a[1:] - a[:-1], np.float32(0))
    words = tf.random.stateless_uniform(shape, seed, minval=None, maxval=None, dtype=tf.uint32,
                                        alg="philox").numpy()
    b = np.maximum((words >> np.uint32(1)).astype(np.int32).astype(np.float32),
                   np.float32(1)).view(np.int32)
    i = (b - 0x3F800000) >> 17
    m = a[i] + d[i] * ((b & 0x1FFFF).astype(np.float32) * np.float32(2.0 ** -17))
    return np.where((words & np.uint32(1)) == 1, -m, m).astype(np.float32)


def test_matches_numpy_oracle() -> None:
    """float32 speckle and uint8 gaussian recomputed in NumPy from TF's Philox words."""
    x = _images(tf.float32, (3, 4, 5, 3)).numpy()
    seeds = np.array([[1, 2], [3, 4], [5, 6]], np.int64)
    sd = np.float32(0.1)
    normals = [_oracle_normals((4, 5, 3), s) for s in seeds]
    got = pixel.random_speckle_noise(tf.constant(x), tf.constant(seeds), 0.1).numpy()
    want = np.stack([np.clip(x[i] + x[i] * (sd * normals[i]), np.float32(0), np.float32(1))
                     for i in range(3)])
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    u8 = _images(tf.uint8, (3, 4, 5, 3)).numpy()
    got8 = pixel.random_gaussian_noise(tf.constant(u8), tf.constant(seeds), 0.1).numpy()
    scale = np.float32(sd * np.float32(255.0))
    want8 = np.stack([np.clip(np.rint(u8[i].astype(np.float32) + scale * normals[i]), 0, 255)
                      for i in range(3)]).astype(np.uint8)
    np.testing.assert_array_equal(got8, want8)


@pytest.mark.parametrize("dtype", [tf.uint8, tf.float32])
def test_speckle_zero_pixels_skip_their_draws(dtype: tf.DType) -> None:
    """All-zero groups of 16 draw nothing natively; the bytes stay the twin's (speckle
    of +0 is 0), black stays black, the pixels after a skipped group keep their noise."""
    images = _images(dtype, (2, 9, 11, 3)).numpy()
    images[:, :5] = 0  # 165 leading zeros: whole groups of 16 and a partial one
    images[1, 7:] = 0
    seeds = tf.constant([[5, 1], [5, 2]], tf.int64)
    got, ref = _both(lambda: pixel.random_speckle_noise(tf.constant(images), seeds, 0.5))
    np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))
    assert (got[:, :5] == 0).all() and (got[:, 5:7] != images[:, 5:7]).any()


def test_bad_shapes_are_clear() -> None:
    with pytest.raises(tf.errors.InvalidArgumentError, match="seeds must be"):
        native_noise.noise(tf.zeros([2, 3, 3, 1]), tf.zeros([3, 2], tf.int64),
                           tf.ones([2], tf.bool), "speckle", 0.1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="table must be"):
        native.load().tfpipe_noise(tf.zeros([1, 3, 3, 1]), tf.zeros([1, 2], tf.int64),
                                   tf.ones([1], tf.bool), tf.zeros([5, 2]), kind="speckle",
                                   stddev=0.1)
