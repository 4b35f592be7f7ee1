"""TfpipeAffineWarp's axis-aligned path (translation and/or scale: taps, weights and
bounds once per column and per row) == TF's ImageProjectiveTransformV3, bit for bit.

The oracle is TF's own kernel on float32 (for uint8: round half to even, then
saturate), called directly with the same [B, 8] transform vectors -- signed-zero
off-diagonals included, which no matrix inversion would produce on purpose."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.native import affine as native_affine

from .conftest import needs

pytestmark = needs(native_affine.available(), "native affine kernel")

Z = -0.0
# output -> input vectors a0 a1 a2 b0 b1 b2 c0 c1: fractional / integer / far
# translations, scales down and up with shifts, signed-zero off-diagonals, and two
# tiny shears and a projective row (the per-pixel path) in the same batch
TRANSFORMS = np.array([
    [1, 0, 3.3, 0, 1, -2.7, 0, 0],
    [1, Z, -4.0, Z, 1, 6.0, 0, 0],
    [0.73, 0, -1.37, 0, 1.19, 2.05, 0, 0],
    [1.61, Z, -9.8, 0, 0.55, 0.35, Z, Z],
    [1, 0, -60.5, 0, 1, 10.25, 0, 0],
    [1, 1e-3, 0.5, 0, 1, -0.5, 0, 0],
    [1, 0, 0.5, 2e-3, 1, -0.5, 0, 0],
    [1, 0, 0.25, 0, 1, 0.75, 1e-3, 0],
    [-1, 0, 36.6, 0, -0.9, 21.3, 0, 0],
], np.float32)


def _oracle(images: np.ndarray, transforms: np.ndarray, size: tuple[int, int],
            interpolation: str, fill_mode: str, fill: float) -> np.ndarray:
    ref = tf.raw_ops.ImageProjectiveTransformV3(
        images=tf.constant(images.astype(np.float32)), transforms=tf.constant(transforms),
        output_shape=tf.constant(size, tf.int32), fill_value=tf.constant(fill, tf.float32),
        interpolation=interpolation.upper(), fill_mode=fill_mode.upper()).numpy()
    if images.dtype == np.uint8:
        ref = np.clip(np.round(ref), 0, 255).astype(np.uint8)  # np.round: half to even
    return ref


@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_axis_aligned_matches_tf_kernel(dtype: str, interpolation: str) -> None:
    rng = np.random.default_rng(7)
    b = len(TRANSFORMS)
    for channels, size in ((1, (21, 41)), (3, (25, 33)), (2, (17, 29)), (1, (6, 300))):
        u8 = rng.integers(0, 256, (b, 23, 37, channels), dtype=np.uint8)
        images = u8 if dtype == "uint8" else u8.astype(np.float32) / 255.0
        for fill_mode in ("constant", "reflect", "wrap", "nearest"):
            got = native_affine.affine_warp(images, TRANSFORMS, size, interpolation,
                                            fill_mode, 0.4).numpy()
            ref = _oracle(images, TRANSFORMS, size, interpolation, fill_mode, 0.4)
            assert got.dtype == ref.dtype
            np.testing.assert_array_equal(
                got.view(np.uint8), ref.view(np.uint8),
                err_msg=f"{channels} channels, {size}, {fill_mode}")


def test_one_transform_for_the_batch_and_last_image_edge() -> None:
    # one [1, 8] vector for every image; a shift that reads the last source rows
    # and columns of the last image (the wide loads must stay inside the buffer)
    rng = np.random.default_rng(8)
    u8 = rng.integers(0, 256, (3, 32, 40, 1), dtype=np.uint8)
    t = np.array([[1, 0, 7.25, 0, 1, 9.75, 0, 0]], np.float32)
    for images in (u8, u8.astype(np.float32)):
        got = native_affine.affine_warp(images, t, (32, 40), "bilinear", "constant",
                                        0.0).numpy()
        ref = _oracle(images, t, (32, 40), "bilinear", "constant", 0.0)
        np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))
