"""The pipeline's fused batched L3 (`tfpipe.pipeline.fast.FusedPixel`) against a float64
NumPy/matplotlib oracle and against the unfused `tfpipe.augment.color` kernels.

FusedPixel runs the native chain (tfpipe.native.pixel) when the library is loaded
and the plain TF kernels otherwise (both paths are tested here: `path` fixture);
for uint8 output it carries the uint8 levels as float32 between the ops; these
tests pin that they compute the sequential ops' values.
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
from tfpipe import switches

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
KERNELS = {"brightness": C.adjust_brightness, "contrast": C.adjust_contrast,
           "saturation": C.adjust_saturation, "hue": C.adjust_hue, "gamma": C.adjust_gamma}


@pytest.fixture(params=["native", "plain-tf"])
def path(request, monkeypatch):
    """Run the test with the native chain (where built) and with its pure-TF twin."""
    from tfpipe.native import pixel

    if request.param == "plain-tf":
        monkeypatch.setitem(switches.OVERRIDES, "TFPIPE_NATIVE", False)
    elif not pixel.available():
        pytest.skip("native pixel chain not built")
    return request.param


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


def test_float_chain_matches_float64_oracle(photos, path):
    """Within 1e-5 of the exact sequential semantics at 224x224 (normalized units):
    the pairwise-tree channel mean is accurate where a float32 running sum (~1e-4
    off there) is not."""
    ops = [Op("brightness", params={"max_delta": 0.4}), Op("contrast", params={"lower": 0.6, "upper": 1.4}),
           Op("saturation", p=0.5, params={"lower": 0.0, "upper": 2.0})]
    params, apply = _draws(len(photos), ops)
    apply[:2, 2], apply[2:4, 2] = True, False  # both branches of the p-coin
    got = FusedPixel(ops, MEAN, STD)(tf.constant(photos), tf.constant(params), tf.constant(apply),
                                      to_float=True, normalize=True)
    assert got.dtype == tf.float32 and got.shape == photos.shape
    np.testing.assert_allclose(got.numpy(), _oracle(photos, params, apply, ops), rtol=0, atol=1e-5)


def test_every_fusable_op(photos, path):
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


def test_fixed_order_channel_mean():
    """The pairwise-tree mean (float) and the exact integer mean (uint8) against float64,
    static and dynamic shapes, odd sizes; the tree adds pairs (i, i + P/2) after zero
    padding, so a reordered sum would show in the bits of the crafted case."""
    rng = np.random.default_rng(2)
    big = rng.random((2, 224, 224, 3), dtype=np.float32)
    mean = C._channel_mean(tf.constant(big))
    assert mean.shape == (2, 1, 1, 3)
    np.testing.assert_allclose(mean.numpy(), big.astype(np.float64).mean(axis=(1, 2), keepdims=True),
                               rtol=0, atol=1e-6)
    odd = rng.random((3, 37, 53, 3), dtype=np.float32)
    dyn = tf.function(C._channel_mean, input_signature=[tf.TensorSpec([None, None, None, 3])])
    np.testing.assert_array_equal(dyn(tf.constant(odd)).numpy(), C._channel_mean(tf.constant(odd)).numpy())
    x8 = rng.integers(0, 256, (2, 513, 511, 3), dtype=np.uint8)  # 255 * N > 2^24: needs int64
    exact = x8.astype(np.float64).mean(axis=(1, 2), keepdims=True).astype(np.float32)
    np.testing.assert_allclose(C._channel_mean(tf.constant(x8)).numpy(), exact, rtol=2 ** -23, atol=0)
    # N = 5 -> padded to 8: [1, 2^24, 1, 1, 1, 0, 0, 0] -> [2, 2^24, 1, 1] -> [3, 2^24]
    # -> 2^24 + 3, rounded to 2^24 + 4; a left-to-right float32 sum gives 2^24
    v = np.array([1.0, 2.0 ** 24, 1.0, 1.0, 1.0], np.float32).reshape(1, 5, 1)
    assert C._pairwise_sum(tf.constant(v)).numpy().ravel()[0] == 2.0 ** 24 + 4


def test_no_xla_or_matmul_in_the_chain_graph():
    """The twin and the normalizer are plain elementwise graphs: no XLA cluster, no
    MatMul/Conv/Einsum whose kernel is picked per host."""
    from tfpipe.native import pure_tf

    with pure_tf():
        from tfpipe.pipeline.fast import normalizer

        ops = [Op("brightness", params={"max_delta": 0.4}), Op("contrast", params={"lower": 0.6, "upper": 1.4}),
               Op("saturation", params={"lower": 0.6, "upper": 1.4})]
        fused = FusedPixel(ops, MEAN, STD)
        norm = normalizer(MEAN, STD)
        fn = tf.function(lambda x, p, a: (fused(x, p, a, to_float=True, normalize=True), norm(x)))
        graph = fn.get_concrete_function(tf.TensorSpec([2, 16, 16, 3], tf.uint8),
                                         tf.TensorSpec([2, 3]), tf.TensorSpec([2, 3], tf.bool)).graph
        kinds = {op.type for op in graph.get_operations()}
        # a float Sum/Mean would be a reduction in the kernel's own order
        assert not kinds & {"MatMul", "BatchMatMulV2", "Einsum", "Conv2D", "DepthwiseConv2dNative",
                            "XlaLaunch", "Mean", "Sum"}, kinds
        assert not any(op.get_attr("_XlaMustCompile") for op in graph.get_operations()
                       if "_XlaMustCompile" in op.node_def.attr)
