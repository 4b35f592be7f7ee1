"""L1: decode the encoded bytes, cropping inside the JPEG decoder when we can.

For JPEG, `tf.io.extract_jpeg_shape` reads the size from the header (no pixel
work), the crop window is sampled from that size, and `decode_and_crop_jpeg`
decodes only the MCU rows/columns the window touches. Any other format (PNG,
GIF, BMP) is fully decoded and then sliced with the SAME window, so the window
-- and therefore the output -- does not depend on the file format.

Everything here returns uint8 `[h, w, channels]`: grayscale is replicated to 3
channels, RGBA loses alpha, CMYK JPEGs are converted by libjpeg.

A damaged JPEG scan is an error, not a gray image: TF's JPEG ops only log
libjpeg's "Corrupt JPEG data" warning and return gray where data was missing,
so when the native library is built (`tfpipe.native.jpeg.available()`, decided
when the pipeline is traced) JPEGs go through `decode_jpeg_strict` -- the same
pixels, bit for bit, but an `InvalidArgumentError` on a warning or a damaged
marker structure, which `pipeline.on_error` then skips (and counts) or raises
with the shard and record. Without it (TFPIPE_NATIVE=0, not built) only what
TF's ops reject fails (a file cut before its last rows); docs/pipeline.md
"Bad records" lists exactly what each path catches.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

Window = tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]
WindowFn = Callable[[tf.Tensor, tf.Tensor], Window]


def _strict() -> bool:
    from tfpipe.native import jpeg as native_jpeg

    return native_jpeg.available()


def decode_full(encoded: tf.Tensor, channels: int) -> tf.Tensor:
    """Decode any supported format to uint8 [h, w, channels] (first frame of a GIF)."""
    def any_format() -> tf.Tensor:
        return tf.io.decode_image(encoded, channels=channels, dtype=tf.uint8,
                                  expand_animations=False)

    if _strict():
        from tfpipe.native.jpeg import decode_jpeg_strict

        # decode_image decodes a JPEG exactly as decode_jpeg does (same flags)
        image = tf.cond(tf.io.is_jpeg(encoded),
                        lambda: decode_jpeg_strict(encoded, channels), any_format)
    else:
        image = any_format()
    return tf.ensure_shape(image, [None, None, channels])


def decode_window(encoded: tf.Tensor, channels: int, window_fn: WindowFn,
                  crop_in_decoder: bool = True) -> tuple[tf.Tensor, Window, tf.Tensor]:
    """Decode only `window_fn(height, width)` of the image.

    Returns (uint8 crop [ch, cw, channels], window (oy, ox, ch, cw) int32,
    original size [2] int32). `crop_in_decoder=False` decodes JPEGs fully and
    slices too (for TFLite, which has no kernel for extract_jpeg_shape): NOT the
    same bits at the window's edges where chroma is subsampled.
    """
    strict = _strict()

    def jpeg() -> tuple[tf.Tensor, ...]:
        shape = tf.io.extract_jpeg_shape(encoded, output_type=tf.int32)
        oy, ox, ch, cw = window_fn(shape[0], shape[1])
        if strict:
            from tfpipe.native.jpeg import decode_jpeg_strict

            crop = decode_jpeg_strict(encoded, channels, tf.stack([oy, ox, ch, cw]))
        else:
            crop = tf.io.decode_and_crop_jpeg(encoded, tf.stack([oy, ox, ch, cw]),
                                              channels=channels)
        return crop, oy, ox, ch, cw, shape[0], shape[1]

    def other() -> tuple[tf.Tensor, ...]:
        image = decode_full(encoded, channels)
        shape = tf.shape(image, out_type=tf.int32)
        oy, ox, ch, cw = window_fn(shape[0], shape[1])
        return image[oy:oy + ch, ox:ox + cw, :], oy, ox, ch, cw, shape[0], shape[1]

    if crop_in_decoder:
        crop, oy, ox, ch, cw, h, w = tf.cond(tf.io.is_jpeg(encoded), jpeg, other)
    else:
        crop, oy, ox, ch, cw, h, w = other()
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
