"""L1: decode the encoded bytes, cropping inside the JPEG decoder when we can.

For JPEG, `tf.io.extract_jpeg_shape` reads the size from the header (no pixel
work), the crop window is sampled from that size, and `decode_and_crop_jpeg`
decodes only the MCU rows/columns the window touches. Any other format (PNG,
GIF, BMP) is fully decoded and then sliced with the SAME window, so the window
-- and therefore the output -- does not depend on the file format.

Everything here returns uint8 `[h, w, channels]`: grayscale is replicated to 3
channels, RGBA loses alpha, CMYK JPEGs are converted by libjpeg.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

Window = tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]
WindowFn = Callable[[tf.Tensor, tf.Tensor], Window]


def decode_full(encoded: tf.Tensor, channels: int) -> tf.Tensor:
    """Decode any supported format to uint8 [h, w, channels] (first frame of a GIF)."""
    image = tf.io.decode_image(encoded, channels=channels, dtype=tf.uint8,
                               expand_animations=False)
    return tf.ensure_shape(image, [None, None, channels])


def decode_window(encoded: tf.Tensor, channels: int, window_fn: WindowFn
                  ) -> tuple[tf.Tensor, Window, tf.Tensor]:
    """Decode only `window_fn(height, width)` of the image.

    Returns (uint8 crop [ch, cw, channels], window (oy, ox, ch, cw) int32,
    original size [2] int32).
    """

    def jpeg() -> tuple[tf.Tensor, ...]:
        shape = tf.io.extract_jpeg_shape(encoded, output_type=tf.int32)
        oy, ox, ch, cw = window_fn(shape[0], shape[1])
        crop = tf.io.decode_and_crop_jpeg(encoded, tf.stack([oy, ox, ch, cw]),
                                          channels=channels)
        return crop, oy, ox, ch, cw, shape[0], shape[1]

    def other() -> tuple[tf.Tensor, ...]:
        image = decode_full(encoded, channels)
        shape = tf.shape(image, out_type=tf.int32)
        oy, ox, ch, cw = window_fn(shape[0], shape[1])
        return image[oy:oy + ch, ox:ox + cw, :], oy, ox, ch, cw, shape[0], shape[1]

    crop, oy, ox, ch, cw, h, w = tf.cond(tf.io.is_jpeg(encoded), jpeg, other)
    crop = tf.ensure_shape(crop, [None, None, channels])
    return crop, (oy, ox, ch, cw), tf.stack([h, w])


def resize_uint8(image: tf.Tensor, size: tuple[int, int]) -> tf.Tensor:
    """Bilinear (half-pixel centres) resize, rounded and saturated back to uint8.

    Exactly what `tfpipe.augment.crop_and_resize` does after its slice, so the
    fused path and decode-then-`random_resized_crop` agree bit for bit. Runs the
    native kernel when `tfpipe.native.available()` (decided when the pipeline is
    traced): same float formula, bit-identical output (tests/native), ~3x faster.
    """
    from tfpipe import native

    if image.dtype == tf.uint8 and native.available():
        out = native.resize_bilinear_u8(image, size)
        return tf.ensure_shape(out, [size[0], size[1], image.shape[-1]])
    out = tf.image.resize(image, size, method="bilinear")
    out = tf.saturate_cast(tf.round(out), tf.uint8)
    return tf.ensure_shape(out, [size[0], size[1], image.shape[-1]])
