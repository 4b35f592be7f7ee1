"""Native elastic-warp kernels (elastic.cc): the displacement field's noise + blur
(`TfpipeElasticNoiseBlur`) and the dense remap (`TfpipeElasticRemap`).

Bit-identical to the pure-TF twins in `tfpipe.augment.elastic` (stateless
uniform noise, `_blur_valid` along rows then columns) and
`tfpipe.augment.geometry.remap` (bilinear / nearest, every fill mode):
tests/native/test_elastic_native.py. `tfpipe.augment.elastic` calls them when
`available()`; `TFPIPE_NATIVE=0` or an older library falls back to the twins.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from tfpipe import native

DTYPES = (tf.uint8, tf.float32)
INTERPOLATIONS = ("nearest", "bilinear")
FILL_MODES = ("constant", "reflect", "wrap", "nearest")


def available() -> bool:
    """Native ops enabled and the built library has the elastic kernels."""
    return native.available() and hasattr(native.load(), "tfpipe_elastic_remap")


def usable(dtype: tf.DType, interpolation: str, fill_mode: str) -> bool:
    """Whether `remap` serves this image dtype / interpolation / fill mode now."""
    return (dtype in DTYPES and interpolation in INTERPOLATIONS and fill_mode in FILL_MODES
            and available())


def noise_blur(seed: tf.Tensor, height: tf.Tensor, width: tf.Tensor,
               taps: Sequence[float]) -> tf.Tensor:
    """U(-1, 1) noise [height, width, 2] from `seed` (int64 [2], philox), blurred VALID
    along rows then columns by `taps`: [height - n + 1, width - n + 1, 2] float32."""
    if not available():
        raise native.unavailable("elastic kernels", "elastic.cc")
    size = tf.cast(tf.stack([height, width]), tf.int32)
    return native.load().tfpipe_elastic_noise_blur(
        tf.cast(seed, tf.int64), size, taps=[float(t) for t in taps])


def remap(image: tf.Tensor, field: tf.Tensor, interpolation: str = "bilinear",
          fill_mode: str = "reflect", fill_value: float = 0.0) -> tf.Tensor:
    """image [H,W,C] sampled at (x + field[..., 0], y + field[..., 1])."""
    if not usable(tf.convert_to_tensor(image).dtype, interpolation, fill_mode):
        raise native.unavailable("elastic kernels", "elastic.cc")
    return native.load().tfpipe_elastic_remap(
        image, tf.cast(field, tf.float32), tf.cast(fill_value, tf.float32),
        interpolation=interpolation, fill_mode=fill_mode)
