"""tfpipe.native.pixel: the native colour chain + normalize is bit-identical to its
pure-TF twin (`FusedPixel._chain`, the plain `tfpipe.augment.color` kernels).

Real photos at the pipeline's size (224x224, batch 64) and odd sizes, float32 and
uint8 chains, p < 1 gates with both outcomes, normalize on and off, a float input.
The twin's own correctness (float64 oracle) is tests/pipeline/test_fused_pixel.py.
"""

from __future__ import annotations


import cv2
import numpy as np
import pytest
import tensorflow as tf

from tfpipe import native
from tfpipe.native import pixel as NP
from tfpipe.pipeline._settings import Op
from tfpipe.pipeline.fast import FusedPixel, normalizer
from tfpipe import switches

from .conftest import needs

needs_native = needs(NP.available(), "native pixel chain")

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
RANGES = {"brightness": (-0.4, 0.4), "contrast": (0.6, 1.4), "saturation": (0.0, 2.0)}


def _photos(n: int, h: int, w: int, seed: int = 0) -> np.ndarray:
    from tfpipe.sample_data import random_crop, source_photos

    rng = np.random.default_rng(seed)
    src = [p for p in source_photos().values() if p.ndim == 3]
    out = []
    for i in range(n):
        crop = random_crop(src[i % len(src)], rng, (max(h, w), max(h, w) + 40))
        out.append(cv2.resize(crop, (w, h), interpolation=cv2.INTER_AREA))
    batch = np.stack(out)
    batch[0, : max(1, h // 4)] = 255  # saturated rows: clipping, chroma 0
    if n > 1:
        batch[1, : max(1, h // 4)] = 77  # grey rows
    return batch


def _draws(n: int, ops: list[Op], seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    params = np.stack([rng.uniform(*RANGES[op.name], n) for op in ops], 1).astype(np.float32)
    apply = np.stack([rng.random(n) < op.p for op in ops], 1)
    if n >= 2:
        apply[0], apply[1] = True, False  # both outcomes of every gate
    return params, apply


CHAINS = {
    "imagenet": [Op("brightness", params={"max_delta": 0.4}),
                 Op("contrast", params={"lower": 0.6, "upper": 1.4}),
                 Op("saturation", params={"lower": 0.6, "upper": 1.4})],
    "gated, contrast twice": [Op("contrast", p=0.5, params={"lower": 0.6, "upper": 1.4}),
                              Op("saturation", p=0.7, params={"lower": 0.0, "upper": 2.0}),
                              Op("brightness", p=0.5, params={"max_delta": 0.4}),
                              Op("contrast", params={"lower": 0.6, "upper": 1.4})],
    "brightness only": [Op("brightness", params={"max_delta": 0.2})],
}


def _both(ops, images, params, apply, to_float, normalize):
    fused = FusedPixel(ops, MEAN, STD)
    assert fused.native()
    args = (tf.constant(images), tf.constant(params), tf.constant(apply))
    got = fused(*args, to_float=to_float, normalize=normalize)
    # the twin as the pipeline runs it: in a graph. (Eagerly, TF's cache of Python
    # scalar constants can hand a clip bound 0.0 a tensor made from -0.0 earlier in the
    # process, which turns max(v < 0, 0) into -0.0: seen after tests/native/test_affine.)
    ref = tf.function(lambda x, p, a: fused._chain(x, p, a, to_float, normalize))(*args)
    return got.numpy(), ref.numpy()


@needs_native
@pytest.mark.parametrize("chain", sorted(CHAINS))
@pytest.mark.parametrize("to_float,normalize", [(True, True), (True, False), (False, False),
                                                (False, True)])
def test_chain_bit_identical_at_224_batch_64(chain, to_float, normalize):
    ops = CHAINS[chain]
    images = _photos(64, 224, 224)
    params, apply = _draws(64, ops, seed=len(chain))
    got, ref = _both(ops, images, params, apply, to_float, normalize)
    assert got.dtype == (np.float32 if to_float or normalize else np.uint8)
    assert got.shape == images.shape
    np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))  # bits, not values


@needs_native
@pytest.mark.parametrize("shape", [(3, 37, 53), (2, 1, 1), (1, 3, 5), (2, 17, 256), (1, 129, 3)])
@pytest.mark.parametrize("to_float", [True, False])
def test_chain_bit_identical_odd_sizes(shape, to_float):
    ops = CHAINS["gated, contrast twice"]
    n, h, w = shape
    images = _photos(n, h, w, seed=h * w)
    params, apply = _draws(n, ops, seed=w)
    for normalize in (False, True):
        got, ref = _both(ops, images, params, apply, to_float, normalize)
        np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))


@needs_native
def test_normalizer_native_equals_plain_tf(monkeypatch):
    images = _photos(5, 45, 67)
    floats = images.astype(np.float32) / 255.0
    norm = normalizer(MEAN, STD)
    got8, gotf = norm(tf.constant(images)).numpy(), norm(tf.constant(floats)).numpy()
    monkeypatch.setitem(switches.OVERRIDES, "TFPIPE_NATIVE", False)
    ref8, reff = norm(tf.constant(images)).numpy(), norm(tf.constant(floats)).numpy()
    np.testing.assert_array_equal(got8.view(np.uint8), ref8.view(np.uint8))
    np.testing.assert_array_equal(gotf.view(np.uint8), reff.view(np.uint8))
    oracle = (images / 255.0 - np.array(MEAN)) / np.array(STD)
    np.testing.assert_allclose(got8, oracle, rtol=0, atol=2e-6)


@needs_native
def test_thread_count_does_not_change_bits():
    """One image per shard or all in one: the same bytes (each image is one thread's)."""
    ops = CHAINS["imagenet"]
    images = _photos(8, 64, 80)
    params, apply = _draws(8, ops, seed=3)
    one = FusedPixel(ops, MEAN, STD)(tf.constant(images), tf.constant(params),
                                     tf.constant(apply), to_float=True, normalize=True)
    parts = [FusedPixel(ops, MEAN, STD)(tf.constant(images[i:i + 1]), tf.constant(params[i:i + 1]),
                                        tf.constant(apply[i:i + 1]), to_float=True, normalize=True)
             for i in range(8)]
    np.testing.assert_array_equal(one.numpy().view(np.uint8),
                                  np.concatenate([p.numpy() for p in parts]).view(np.uint8))


@needs_native
def test_bad_arguments_raise():
    images = tf.zeros([2, 4, 4, 3], tf.uint8)
    with pytest.raises(ValueError, match="ops must be in"):
        NP.pixel_chain(images, tf.zeros([2, 1]), tf.ones([2, 1], tf.bool), ["hue"], [False],
                       to_float=True, normalize=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match="saturation needs 3 channels"):
        NP.pixel_chain(tf.zeros([2, 4, 4, 1], tf.uint8), tf.zeros([2, 1]),
                       tf.ones([2, 1], tf.bool), ["saturation"], [False], to_float=True,
                       normalize=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"params and apply must be \[2, 1\]"):
        NP.pixel_chain(images, tf.zeros([3, 1]), tf.ones([3, 1], tf.bool), ["contrast"],
                       [False], to_float=True, normalize=False)


def test_hue_and_gamma_chains_run_in_plain_tf():
    ops = [Op("brightness", params={"max_delta": 0.4}), Op("hue", params={"max_delta": 0.1})]
    assert not FusedPixel(ops, MEAN, STD).native()
    assert not NP.usable(["brightness", "gamma"])


@needs_native
@pytest.mark.parametrize("to_float", [True, False])
def test_chain_bit_identical_with_extreme_params(to_float):
    """Parameters far outside the configured ranges: most values land on (or cross)
    the clip bounds, where the levels' round-then-clip order matters (-0.5 < v < 0,
    v > 255.5), and negative factors flip the sign of (x - m)."""
    ops = [Op("brightness", params={"max_delta": 0.4}),
           Op("contrast", params={"lower": 0.6, "upper": 1.4}),
           Op("saturation", params={"lower": 0.6, "upper": 1.4}),
           Op("contrast", params={"lower": 0.6, "upper": 1.4})]
    images = _photos(8, 31, 45, seed=5)
    rng = np.random.default_rng(11)
    params = np.stack([rng.uniform(-3, 3, 8), rng.uniform(-40, 40, 8), rng.uniform(-5, 60, 8),
                       rng.uniform(-2, 2, 8)], 1).astype(np.float32)
    params[0] = [-0.0015, 0.999, 1.0, 0.0]  # rounding near 0: -0.5 < v < 0
    params[1] = [1.002, 1e30, 0.0, 1.0]
    apply = np.ones_like(params, dtype=bool)
    for normalize in (False, True):
        got, ref = _both(ops, images, params, apply, to_float, normalize)
        np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))


@needs_native
def test_no_ops_uint8_in_float_chain_normalizes_x01():
    """ops=[] with to_float: the uint8 input is scaled to [0, 1] before normalize, as
    in the twin (the old normalize-alone fast path left the 1/255 out)."""
    images = _photos(3, 20, 24)
    empty = tf.zeros([3, 0], tf.float32)
    got = NP.pixel_chain(tf.constant(images), empty, tf.cast(empty, tf.bool), [], [],
                         to_float=True, normalize=True, mean=MEAN, std=STD).numpy()
    ref = FusedPixel([], MEAN, STD)._chain(tf.constant(images), empty, tf.cast(empty, tf.bool),
                                           True, True).numpy()
    np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))
    oracle = (images / 255.0 - np.array(MEAN)) / np.array(STD)
    np.testing.assert_allclose(got, oracle, rtol=0, atol=2e-6)
