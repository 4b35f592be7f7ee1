"""TfpipeElasticNoiseBlur / TfpipeElasticRemap (elastic.cc) == their pure-TF twins
in `tfpipe.augment.elastic` (under `native.pure_tf()`), bit for bit, and == NumPy
oracles built on TF's own `tf.random.stateless_uniform` draws."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import native
from tfpipe.native import elastic as native_elastic

from .conftest import needs

E = importlib.import_module("tfpipe.augment.elastic")  # the module, not the function
pytestmark = needs(native_elastic.available(), "native elastic kernels")


def _both(fn):
    got = [t.numpy() for t in fn()]
    with native.pure_tf():
        ref = [t.numpy() for t in fn()]
    return got, ref


def _photo(dtype: tf.DType, shape=(37, 50, 3)) -> tf.Tensor:
    rng = np.random.default_rng(3)
    u8 = rng.integers(0, 256, shape, dtype=np.uint8)
    return tf.constant(u8) if dtype == tf.uint8 else tf.constant(u8.astype(np.float32) / 255.0)


@pytest.mark.parametrize("sigma", [4.0, 7.0])  # factor 1 and 2 (coarse grid + resize)
def test_field_matches_twin(sigma: float) -> None:
    seed = tf.constant([11, -2], tf.int64)
    got, ref = _both(lambda: [E.sample_elastic_field(seed, (37, 50), 20.0, sigma)])
    np.testing.assert_array_equal(got[0].view(np.uint32), ref[0].view(np.uint32))


@pytest.mark.parametrize("dtype", [tf.uint8, tf.float32])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
@pytest.mark.parametrize("fill_mode", ["reflect", "constant", "wrap", "nearest"])
def test_warp_matches_twin(dtype: tf.DType, interpolation: str, fill_mode: str) -> None:
    image = _photo(dtype)
    seed = tf.constant([5, 6], tf.int64)
    # alpha 40: displacements of many pixels, so every border rule is exercised
    got, ref = _both(lambda: E.elastic(image, seed, 40.0, 3.0, interpolation, fill_mode, 0.25))
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g.view(np.uint8), r.view(np.uint8))


def test_numpy_oracle_on_tf_uniforms() -> None:
    """Field: TF's own uniforms, blurred in NumPy float32 in the documented order;
    warp: NumPy bilinear with reflect borders on that field."""
    h, w, sigma, alpha = 21, 26, 2.0, 15.0
    seed = tf.constant([9, 9], tf.int64)
    taps, r = E._gaussian_kernel(sigma)
    noise_seed = tf.random.experimental.stateless_split(seed, 1, alg="philox")[0]
    gh, gw = h + 1, w + 1  # factor 1: one extra grid node per axis
    noise = tf.random.stateless_uniform([gh + 2 * r, gw + 2 * r, 2], noise_seed, -1.0, 1.0,
                                        alg="philox").numpy()
    t = [np.float32(v) for v in taps]

    def blur(x: np.ndarray, axis: int) -> np.ndarray:
        n = x.shape[axis] - (len(t) - 1)
        acc = np.take(x, range(0, n), axis) * t[0]
        for k in range(1, len(t)):
            acc = acc + np.take(x, range(k, k + n), axis) * t[k]
        return acc
    field = (blur(blur(noise, 0), 1)[:h, :w] * np.float32(alpha)).astype(np.float32)
    got_field = E.sample_elastic_field(seed, (h, w), alpha, sigma).numpy()
    np.testing.assert_array_equal(got_field.view(np.uint32), field.view(np.uint32))

    image = _photo(tf.uint8, (h, w, 3))
    got, got_f = E.elastic(image, seed, alpha, sigma)
    img = image.numpy().astype(np.float32)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    px, py = xs + field[..., 0], ys + field[..., 1]
    x0f, y0f = np.floor(px), np.floor(py)
    tx, ty = (px - x0f)[..., None], (py - y0f)[..., None]
    x0, y0 = x0f.astype(np.int64), y0f.astype(np.int64)

    def fold(i: np.ndarray, n: int) -> np.ndarray:
        j = np.mod(i, 2 * n)
        return np.where(j >= n, 2 * n - 1 - j, j)

    def tap(yi: np.ndarray, xi: np.ndarray) -> np.ndarray:
        return img[fold(yi, h), fold(xi, w)]
    one = np.float32(1.0)
    top = tap(y0, x0) * (one - tx) + tap(y0, x0 + 1) * tx
    bot = tap(y0 + 1, x0) * (one - tx) + tap(y0 + 1, x0 + 1) * tx
    want = np.clip(np.rint(top * (one - ty) + bot * ty), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got.numpy(), want)


def test_bad_field_shape_is_clear() -> None:
    with pytest.raises(tf.errors.InvalidArgumentError, match="field must be"):
        native_elastic.remap(tf.zeros([4, 5, 3], tf.uint8), tf.zeros([4, 4, 2]))
