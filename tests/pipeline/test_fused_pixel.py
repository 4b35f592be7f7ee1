"""The pipeline's fused batched L3 (`tfpipe.pipeline.fast.FusedPixel`) against a float64
NumPy/matplotlib oracle and against the unfused `tfpipe.augment.color` kernels.

FusedPixel compiles XLA-friendly forms of contrast (channel mean as a dot) and
saturation (channel max/min from slices) and, for uint8 output, carries the
uint8 levels as float32 between the ops; these tests pin that they compute the
sequential ops' values.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import tensorflow as tf
from matplotlib.colors import hsv_to_rgb, rgb_to_hsv

from tfpipe.augment import color as C
from tfpipe.pipeline._settings import Op
from tfpipe.pipeline.fast import FusedPixel

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
KERNELS = {"brightness": C.adjust_brightness, "contrast": C.adjust_contrast,
           "saturation": C.adjust_saturation, "hue": C.adjust_hue, "gamma": C.adjust_gamma}


@pytest.fixture(scope="module")
def photos() -> np.ndarray:
    """Six real photos at 224x224 (the size where a float32 channel mean drifts)."""
    from tfpipe.sample_data import source_photos

    src = list(source_photos().values())
    return np.stack([cv2.resize(src[i % len(src)], (224, 224), interpolation=cv2.INTER_AREA)
                     for i in range(6)])


def _draws(n: int, ops: list[Op], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ranges = {"brightness": (-0.4, 0.4), "contrast": (0.6, 1.4), "saturation": (0.0, 2.0),
              "hue": (-0.2, 0.2), "gamma": (0.7, 1.4)}
    params = np.stack([rng.uniform(*ranges[op.name], n) for op in ops], 1).astype(np.float32)
    apply = np.stack([rng.random(n) < op.p for op in ops], 1)
    return params, apply


def _oracle(images: np.ndarray, params: np.ndarray, apply: np.ndarray, ops: list[Op]) -> np.ndarray:
    """The sequential ops (each clipped to [0, 1]) then normalize, in float64."""
    y = images.astype(np.float64) / 255.0
    for j, op in enumerate(ops):
        v = params[:, j, None, None, None].astype(np.float64)
        if op.name == "brightness":
            out = y + v
        elif op.name == "contrast":
            m = y.mean(axis=(1, 2), keepdims=True)
            out = (y - m) * v + m
        elif op.name in ("saturation", "hue"):
            hsv = rgb_to_hsv(y)
            if op.name == "saturation":
                hsv[..., 1] = np.clip(hsv[..., 1] * v[..., 0], 0.0, 1.0)
            else:
                hsv[..., 0] = np.mod(hsv[..., 0] + v[..., 0], 1.0)
            out = hsv_to_rgb(hsv)
        else:
            out = y ** v
        out = np.clip(out, 0.0, 1.0)
        y = out if op.p >= 1.0 else np.where(apply[:, j, None, None, None], out, y)
    return (y - np.array(MEAN)) / np.array(STD)


def _unfused(images, params, apply, ops: list[Op], to_float: bool) -> np.ndarray:
    y = tf.cast(images, tf.float32) / 255.0 if to_float else tf.constant(images)
    for j, op in enumerate(ops):
        out = KERNELS[op.name](y, params[:, j])
        y = out if op.p >= 1.0 else C.maybe_apply(apply[:, j], out, y)
    return y.numpy()


def test_float_chain_matches_float64_oracle(photos):
    """Within 1e-5 of the exact sequential semantics at 224x224 (normalized units);
    the plain `reduce_mean` kernel chain is ~1e-4 off there (float32 accumulation)."""
    ops = [Op("brightness", params={"max_delta": 0.4}), Op("contrast", params={"lower": 0.6, "upper": 1.4}),
           Op("saturation", p=0.5, params={"lower": 0.0, "upper": 2.0})]
    params, apply = _draws(len(photos), ops)
    apply[:2, 2], apply[2:4, 2] = True, False  # both branches of the p-coin
    got = FusedPixel(ops, MEAN, STD)(tf.constant(photos), tf.constant(params), tf.constant(apply),
                                      to_float=True, normalize=True)
    assert got.dtype == tf.float32 and got.shape == photos.shape
    np.testing.assert_allclose(got.numpy(), _oracle(photos, params, apply, ops), rtol=0, atol=1e-5)


def test_every_fusable_op(photos):
    """All fusable ops, p < 1 included. float32: within 1e-5 of the float64 oracle.
    uint8 output (rounded after every op): equal to the unfused uint8 kernels but for
    rare 1-level float-rounding ties (small crops, where the plain kernel's float32
    channel mean is accurate too)."""
    ops = [Op("brightness", p=0.7, params={"max_delta": 0.4}),
           Op("contrast", params={"lower": 0.6, "upper": 1.4}),
           Op("saturation", p=0.6, params={"lower": 0.0, "upper": 2.0}),
           Op("hue", p=0.5, params={"max_delta": 0.2}),
           Op("gamma", params={"lower": 0.7, "upper": 1.4})]
    params, apply = _draws(len(photos), ops, seed=1)
    fused = FusedPixel(ops, MEAN, STD)
    got = fused(tf.constant(photos), tf.constant(params), tf.constant(apply), to_float=True, normalize=True)
    np.testing.assert_allclose(got.numpy(), _oracle(photos, params, apply, ops), rtol=0, atol=1e-5)

    small = np.ascontiguousarray(photos[:, 40:104, 30:126])  # 64x96 crops
    got8 = fused(tf.constant(small), tf.constant(params), tf.constant(apply), to_float=False, normalize=False)
    ref8 = _unfused(small, params, apply, ops, False)
    assert got8.dtype == tf.uint8
    diff = np.abs(got8.numpy().astype(np.int32) - ref8.astype(np.int32))
    assert diff.max() <= 1 and (diff == 0).mean() > 0.999


def test_xla_kernels_match_plain_kernels():
    """The XLA forms alone, compiled, vs the public kernels (float32 and uint8 in),
    and the dot-form channel mean vs float64 at 224x224."""
    rng = np.random.default_rng(2)
    big = rng.random((2, 224, 224, 3), dtype=np.float32)
    mean = tf.function(C._channel_mean_dot, jit_compile=True)(tf.constant(big))
    assert mean.shape == (2, 1, 1, 3)
    np.testing.assert_allclose(mean.numpy(), big.astype(np.float64).mean(axis=(1, 2), keepdims=True),
                               rtol=0, atol=1e-6)
    x8 = rng.integers(0, 256, (3, 48, 64, 3), dtype=np.uint8)
    x8[0, :10] = 255  # saturated and grey regions: chroma 0 and clipping
    x8[1, 10:20] = 77
    xf = x8.astype(np.float32) / 255.0
    f = tf.constant([0.63, 1.0, 1.37])  # not 0.5: exact .5 ties would flip on the mean's last bit
    for xla_kernel, plain in ((C._adjust_contrast_xla, C.adjust_contrast),
                              (C._adjust_saturation_xla, C.adjust_saturation)):
        compiled = tf.function(xla_kernel, jit_compile=True)
        got = compiled(tf.constant(xf), f)
        np.testing.assert_allclose(got.numpy(), plain(tf.constant(xf), f).numpy(), rtol=0, atol=2e-6)
        got8 = compiled(tf.constant(x8), f)
        diff = np.abs(got8.numpy().astype(np.int32) - plain(tf.constant(x8), f).numpy().astype(np.int32))
        assert got8.dtype == tf.uint8 and diff.max() <= 1 and (diff == 0).mean() > 0.999
