"""The elastic kernels' interior fast paths (elastic.cc: register-blocked blur,
plain-read bilinear interior, the 3-channel SSE2 pixel, the inline floor and
rounding) == the pure-TF twins, bit for bit, at a size and displacement where
most pixels are interior, for 1 and 3 channels (the remote-sensing preset's warp)."""

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


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("dtype", [tf.uint8, tf.float32])
def test_interior_warp_and_field_match_twin(channels: int, dtype: tf.DType) -> None:
    rng = np.random.default_rng(channels)
    u8 = rng.integers(0, 256, (61, 83, channels), dtype=np.uint8)
    image = tf.constant(u8) if dtype == tf.uint8 else tf.constant(u8.astype(np.float32) / 255.0)
    seed = tf.constant([3, channels], tf.int64)
    # alpha 6, sigma 4 (the preset's sigma: a full-resolution 25-tap blur, rows of
    # 2 * 107 floats: the 16-wide blocks and the scalar tail both run)
    run = lambda: [t.numpy() for t in E.elastic(image, seed, 6.0, 4.0, "bilinear", "reflect")]  # noqa: E731
    got = run()
    with native.pure_tf():
        ref = run()
    np.testing.assert_array_equal(got[1].view(np.uint32), ref[1].view(np.uint32))  # field
    np.testing.assert_array_equal(got[0].view(np.uint8), ref[0].view(np.uint8))
