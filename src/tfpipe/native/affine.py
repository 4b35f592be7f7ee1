"""Native nearest/bilinear affine warp (`TfpipeAffineWarp`, affine.cc).

Bit-identical to what `tfpipe.augment.geometry.affine` computes with
``ImageProjectiveTransformV3`` (float32 in, and for uint8 the float32 result
rounded half to even and saturated), so switching only changes speed.
`tfpipe.augment.geometry.affine` calls it when `usable()`; `TFPIPE_NATIVE=0`
or a missing/old library falls back to the pure-TF kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import tensorflow as tf

from tfpipe import native

DTYPES = (tf.uint8, tf.float32)
INTERPOLATIONS = ("nearest", "bilinear")
FILL_MODES = ("constant", "reflect", "wrap", "nearest")


def available() -> bool:
    """Native ops enabled and the built library has the affine kernel (an older
    build without affine.cc does not)."""
    return native.available() and hasattr(native.load(), "tfpipe_affine_warp")


def usable(dtype: tf.DType, interpolation: str) -> bool:
    """Whether `affine_warp` serves this dtype/interpolation right now."""
    return dtype in DTYPES and interpolation in INTERPOLATIONS and available()


def affine_warp(image: tf.Tensor, transforms: tf.Tensor,
                output_size: Union[Sequence[int], tf.Tensor],
                interpolation: str = "bilinear", fill_mode: str = "constant",
                fill_value: float = 0.0) -> tf.Tensor:
    """Warp `image` ([H,W,C] or [B,H,W,C], uint8 or float32).

    `transforms`: [8] or [B|1, 8] OUTPUT->INPUT maps in ImageProjectiveTransformV3
    order (a0 a1 a2 b0 b1 b2 c0 c1; `geometry._inverse_transform_vector`);
    projective rows (c0, c1 != 0) are handled too, exactly as TF does.
    `output_size`: (height, width). Requires `available()`.
    """
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"interpolation must be one of {list(INTERPOLATIONS)}, "
                         f"got {interpolation!r}")
    if fill_mode not in FILL_MODES:
        raise ValueError(f"fill_mode must be one of {list(FILL_MODES)}, got {fill_mode!r}")
    if not available():
        raise native.unavailable("affine kernel", "affine.cc")
    module = native.load()
    image = tf.convert_to_tensor(image)
    if image.dtype not in DTYPES:
        raise TypeError(f"image dtype must be uint8 or float32, got {image.dtype.name}")
    single = image.shape.rank == 3
    if single:
        image = image[None]
    transforms = tf.convert_to_tensor(transforms, tf.float32)
    if transforms.shape.rank == 1:
        transforms = transforms[None]
    size = tf.cast(tf.convert_to_tensor(output_size), tf.int32)
    out = module.tfpipe_affine_warp(image, transforms, size,
                                    tf.cast(fill_value, tf.float32),
                                    interpolation=interpolation.upper(),
                                    fill_mode=fill_mode.upper())
    return out[0] if single else out
