"""TfpipeDecodeCropResize (window_decode.cc): the bytes of the composed train L1.

Oracle: the pure-TF composition (under `native.pure_tf()`): extract_jpeg_shape,
`augment.crop_window_from_draws`, `decode_and_crop_jpeg` (at the DCT ratio
`_decode.dct_ratio` picks), `tf.image.resize` rounded and saturated,
`tf.reverse` for the flip.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment, native, sample_data
from tfpipe.pipeline._decode import decode_window

jpeg = pytest.importorskip("tfpipe.native.jpeg")
pytestmark = pytest.mark.skipif(not jpeg.has_decode_crop_resize(),
                                reason="native kernels not built")

RATIO = (3 / 4, 4 / 3)


def composed_pure_tf(enc, draws, crop_on, flip, size, dct):
    with native.pure_tf():
        def window(h, w):
            win = augment.crop_window_from_draws(draws, h, w, RATIO)
            return win if crop_on else (tf.constant(0), tf.constant(0), h, w)

        crop, _, _ = decode_window(tf.constant(enc), 3, window, target=size if dct else None)
        out = tf.saturate_cast(tf.round(tf.image.resize(crop, size, "bilinear")), tf.uint8)
        return (tf.reverse(out, [1]) if flip else out).numpy()


@pytest.fixture(scope="module")
def jpegs():
    photos = sample_data.source_photos()
    big = photos["retina"][:700, :911]
    return [tf.io.encode_jpeg(big, quality=90).numpy(),
            tf.io.encode_jpeg(big, quality=85, chroma_downsampling=False).numpy(),
            tf.io.encode_jpeg(big[..., :1], quality=90).numpy(),  # grayscale -> 3 channels
            sample_data.encode(photos["coffee"][:301, :207], "jpeg", 90)]


def test_equals_the_pure_tf_composition(jpegs):
    seeds_ = tf.constant([[7, i] for i in range(8)], tf.int64)
    draws = augment.crop_window_draws(seeds_, (0.08, 1.0), RATIO)
    for k, enc in enumerate(jpegs):
        for i in range(8):
            size = [(32, 32), (24, 40), (224, 224)][(i + k) % 3]
            crop_on, flip, dct = i % 4 != 3, i % 2 == 0, i % 5 != 4
            got = jpeg.decode_crop_resize(enc, draws[i], crop_on, flip, size, RATIO, 3, dct)
            np.testing.assert_array_equal(
                got.numpy(), composed_pure_tf(enc, draws[i], crop_on, flip, size, dct),
                err_msg=f"image {k} draw {i} size {size} crop {crop_on} flip {flip} dct {dct}")


def test_damaged_jpeg_is_an_error(jpegs):
    data = bytearray(jpegs[0])
    bad = bytes(data[:len(data) // 2])
    draws = augment.crop_window_draws(tf.constant([1, 2], tf.int64), (0.08, 1.0), RATIO)
    with pytest.raises(tf.errors.InvalidArgumentError, match="damaged JPEG|Invalid JPEG"):
        jpeg.decode_crop_resize(bad, draws, True, False, (32, 32), RATIO)
