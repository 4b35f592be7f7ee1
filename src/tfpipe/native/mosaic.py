"""Native 2x2 mosaic (`TfpipeMosaic`, mosaic.cc).

Bit-identical to the pure-TF twin in `tfpipe.augment.detection` (uint8: exact
integer arithmetic; float32: the twin's IEEE operations in the twin's order), so
switching only changes speed. `tfpipe.augment.mosaic` calls it when `usable()`;
`TFPIPE_NATIVE=0` or a library built before mosaic.cc falls back to the twin.
"""

from __future__ import annotations

import tensorflow as tf

from tfpipe import native

DTYPES = (tf.uint8, tf.float32)


def available() -> bool:
    """Native ops enabled and the built library has the mosaic kernel."""
    return native.available() and hasattr(native.load(), "tfpipe_mosaic")


def usable(dtype: tf.DType) -> bool:
    """Whether `mosaic_taps` serves this dtype right now."""
    return dtype in DTYPES and available()


def mosaic_taps(images: tf.Tensor, partners: tf.Tensor, centers: tf.Tensor, x0: tf.Tensor,
                wx: tf.Tensor, y0: tf.Tensor, wy: tf.Tensor, apply: tf.Tensor,
                fill_value: float | tf.Tensor = 0.0) -> tf.Tensor:
    """images [B,H,W,C] (uint8 or float32); partners [4,B] (tile q of sample b is
    image partners[q, b]); centers [B,2] int32 (cx, cy: x < cx is the left half,
    y < cy the top half); x0/wx [B,W] and y0/wy [B,H] int32: the first tap and the
    second tap's weight in [0, 256]; apply [B] bool (False rows are copied).
    Requires `available()`."""
    if not available():
        raise native.unavailable("mosaic kernel", "mosaic.cc")
    images = tf.convert_to_tensor(images)
    if images.dtype not in DTYPES:
        raise TypeError(f"image dtype must be uint8 or float32, got {images.dtype.name}")
    i32 = tf.int32
    return native.load().tfpipe_mosaic(
        images, tf.cast(partners, i32), tf.cast(centers, i32), tf.cast(x0, i32),
        tf.cast(wx, i32), tf.cast(y0, i32), tf.cast(wy, i32),
        tf.convert_to_tensor(apply, tf.bool), tf.cast(fill_value, tf.float32))
