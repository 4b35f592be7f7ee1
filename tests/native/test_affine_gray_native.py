"""TfpipeAffineWarp's grayscale fast paths (1 channel, constant / nearest fill: the
medical-ultrasound preset's translate, bilinear; a segmentation class mask through
any rotation, nearest) == TF's ImageProjectiveTransformV3, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A
from tfpipe import native
from tfpipe.native import affine as native_affine

from .conftest import needs

pytestmark = needs(native_affine.available(), "native affine kernel")


@pytest.mark.parametrize("dtype", [tf.uint8, tf.float32])
@pytest.mark.parametrize("fill_mode", ["constant", "nearest"])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
def test_gray_matches_tf_kernel(dtype: tf.DType, fill_mode: str, interpolation: str) -> None:
    rng = np.random.default_rng(1)
    u8 = rng.integers(0, 256, (6, 45, 70, 1), dtype=np.uint8)
    images = tf.constant(u8) if dtype == tf.uint8 else tf.constant(u8.astype(np.float32) / 255.0)
    # sub-pixel translations (the medical preset), a rotation + zoom, a far shift, and
    # half-pixel ties (nearest rounds x.5 away from zero): a shift of exactly half a
    # pixel (axis-aligned kernel), and a quarter turn plus half-pixel shifts (the
    # rotated kernel: its cos is not 0 in float32, yet most coordinates are ties)
    mats = tf.stack([A.translate_matrix(3.3, -2.7),
                     A.compose(A.rotation_matrix(17.0, (35.0, 22.0)), A.scale_matrix(1.3)),
                     A.translate_matrix(-60.5, 10.25),
                     A.translate_matrix(-0.5, 2.5),
                     A.compose(A.rotation_matrix(90.0, (20.0, 30.0)), A.translate_matrix(0.5, -3.5)),
                     A.compose(A.rotation_matrix(-95.0, (20.0, 30.0)), A.translate_matrix(0.5, -40.0))])
    got = A.affine(images, mats, (41, 77), interpolation, fill_mode, 0.4).numpy()
    with native.pure_tf():
        ref = A.affine(images, mats, (41, 77), interpolation, fill_mode, 0.4).numpy()
    np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))
