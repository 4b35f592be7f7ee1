"""Colour ops (L3): brightness, contrast, saturation, hue, grayscale, gamma,
PIL-style enhance ops, normalization and the fused `color_affine`.

Every op comes as three functions:

- a pure kernel with explicit parameters (`adjust_brightness(image, delta)`),
- a seeded sampler (`sample_brightness(seed, max_delta, batch_shape=())`),
- a convenience `random_brightness(image, seed, max_delta, p=1.0)`.

Images are uint8 in [0, 255] or float32 in [0, 1]; the output has the input's
dtype (uint8: rounded to nearest and saturated; float32: clipped to [0, 1]).
Kernels take `[H, W, C]` or `[B, H, W, C]`, and every parameter may be a
scalar or a per-sample `[B]` vector: draw parameters per sample from
per-sample seeds, batch them with the uint8 images, then apply the kernel once
to the whole batch (see docs/augment-pixel.md, "Batch mode").

Seeds are int64/int32 `[2]` tensors, or `[B, 2]` (one seed per sample: sample
i's parameters then depend only on row i). Only stateless random ops are used.
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

import tensorflow as tf

from tfpipe import seeds

Number = Union[float, int, tf.Tensor]
ALG = seeds.ALG  # pinned "philox": "auto_select" may pick another generator on another device

__all__ = [
    "adjust_brightness", "sample_brightness", "random_brightness",
    "adjust_contrast", "sample_contrast", "random_contrast",
    "adjust_saturation", "sample_saturation", "random_saturation",
    "adjust_hue", "sample_hue", "random_hue",
    "to_grayscale", "random_grayscale",
    "adjust_gamma", "sample_gamma", "random_gamma",
    "enhance_brightness", "enhance_contrast", "enhance_color",
    "normalize", "color_affine", "sample_color_affine", "Normalize",
    "sample_apply", "maybe_apply", "split_seed", "xla", "Levels",
]


# --------------------------------------------------------------------------- helpers
def _check_image(image: tf.Tensor) -> tf.Tensor:
    image = tf.convert_to_tensor(image)
    if image.dtype not in (tf.uint8, tf.float32):
        raise TypeError(f"image dtype must be uint8 [0,255] or float32 [0,1], got {image.dtype.name}")
    if image.shape.rank not in (3, 4):
        raise ValueError(f"image must be [H,W,C] or [B,H,W,C], got shape {image.shape}")
    return image


class Levels:
    """A uint8 image carried as integer-valued float32 0..255 between the kernels of
    one chain (`tfpipe.pipeline.fast.FusedPixel`'s plain-TF twin, uint8 output).

    The kernels take and return it like uint8 (same scale, same round + saturate,
    so the same values; contrast's mean stays an exact integer sum), without an
    f32 -> u8 -> f32 conversion after every op.
    """

    dtype = "levels"  # what `_restore` is handed as the input dtype

    def __init__(self, x: tf.Tensor) -> None:
        self.x = x


def _as_float(image: tf.Tensor) -> tuple[tf.Tensor, float]:
    """(float32 view, scale): values stay on the input's scale (255 or 1).

    Working on the 0..255 scale for uint8 saves a full multiply pass in and out.
    """
    if isinstance(image, Levels):
        return image.x, 255.0
    image = _check_image(image)
    if image.dtype == tf.uint8:
        return tf.cast(image, tf.float32), 255.0
    return image, 1.0


def _restore(x: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """Back to the input dtype: uint8 rounded + saturated, float32 clipped to [0,1]."""
    if isinstance(dtype, str) and dtype == Levels.dtype:
        return Levels(tf.clip_by_value(tf.round(x), 0.0, 255.0))
    if dtype == tf.uint8:
        return tf.cast(tf.clip_by_value(tf.round(x), 0.0, 255.0), tf.uint8)
    return tf.clip_by_value(x, 0.0, 1.0)


def _param(value: Number, image: tf.Tensor, dtype: tf.DType = tf.float32) -> tf.Tensor:
    """Scalar stays scalar; a per-sample [B] vector becomes [B,1,1,1] for a batch."""
    value = tf.convert_to_tensor(value)
    if value.dtype != dtype:
        value = tf.cast(value, dtype)
    if value.shape.rank == 0:
        return value
    if value.shape.rank == 1:
        if image.shape.rank != 4:
            raise ValueError("a per-sample [B] parameter needs a batched [B,H,W,C] image, "
                             f"got image shape {image.shape} and parameter shape {value.shape}")
        return tf.reshape(value, [-1, 1, 1, 1])
    raise ValueError(f"parameter must be a scalar or a per-sample [B] vector, got shape {value.shape}")


# The seed plumbing (validation, split, rank dispatch) lives in tfpipe.seeds.
def split_seed(seed) -> tuple[tf.Tensor, tf.Tensor]:
    """(parameter seed, apply seed): the split every `random_*` uses when p < 1.

    Draw the parameters from the first and the p-coin (`sample_apply`) from the
    second; drawing both from one seed would correlate them.
    """
    return seeds.split_pair(seeds.as_seed(seed))


def sample_apply(seed, p: float, batch_shape: Sequence[int] = ()) -> tf.Tensor:
    """Bool: apply the op? True with probability p (one draw per seed)."""
    return seeds.bernoulli(seed, p, batch_shape)


def maybe_apply(apply: tf.Tensor, out: tf.Tensor, image: tf.Tensor) -> tf.Tensor:
    """Select `out` where `apply` is true (scalar, or per-sample [B] in batch mode)."""
    apply = tf.convert_to_tensor(apply)
    if apply.shape.rank == 1:
        apply = tf.reshape(apply, [-1, 1, 1, 1])
    return tf.where(apply, out, image)


def random_op(image, seed, p: float, sample: Callable[[tf.Tensor], object],
              kernel: Callable[..., tf.Tensor]) -> tf.Tensor:
    """Shared body of every `random_*`: draw params (and the p-coin), apply, select."""
    image = _check_image(image)
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    seed = seeds.as_seed(seed)
    if (seed.shape.rank == 2) != (image.shape.rank == 4):
        raise ValueError("use a seed [2] with an [H,W,C] image or per-sample seeds [B,2] with a "
                         f"[B,H,W,C] batch; got seed {seed.shape}, image {image.shape}")
    if float(p) >= 1.0:
        return kernel(image, sample(seed))
    pseed, aseed = split_seed(seed)
    return maybe_apply(sample_apply(aseed, p), kernel(image, sample(pseed)), image)


def _check_range(name: str, lower: float, upper: float, minimum: float = 0.0,
                 strict: bool = True) -> None:
    bad = lower <= minimum if strict else lower < minimum
    if bad or upper < lower:
        op = ">" if strict else ">="
        raise ValueError(f"{name}: need {minimum} {'<' if strict else '<='} lower <= upper "
                         f"(lower {op} {minimum}), got lower={lower}, upper={upper}")


def xla(fn: Callable) -> Callable:
    """`tf.function(fn, jit_compile=True)`: XLA fuses a batch-mode chain of
    elementwise kernels (e.g. saturation + color_affine) into one loop over memory.

    Works inside `tf.data.Dataset.map` on CPU; 1.4-7x faster than the same batch-mode ops
    unfused on this machine (docs/performance-history.md, "Augmentation ops"). Opt-in, and
    never used by `build_pipeline`: XLA's float rounding differs from the plain
    kernels by ~1 ulp and between CPU types (vector width, FMA contraction are
    picked per host), so the bits would depend on the machine; and
    `adjust_jpeg_quality` cannot be compiled.
    """
    return tf.function(fn, jit_compile=True, autograph=False)


# --------------------------------------------------------------------------- brightness
def adjust_brightness(image, delta: Number) -> tf.Tensor:
    """`image + delta` (delta on the [0,1] scale), like `tf.image.adjust_brightness`."""
    x, scale = _as_float(image)
    return _restore(x + _param(delta, x) * scale, image.dtype)


def sample_brightness(seed, max_delta: float, batch_shape: Sequence[int] = ()) -> tf.Tensor:
    """delta ~ U[-max_delta, max_delta)."""
    if not 0.0 <= max_delta <= 1.0:
        raise ValueError(f"brightness.max_delta must be in [0, 1], got {max_delta}")
    return seeds.uniform(seed, batch_shape, -max_delta, max_delta)


def random_brightness(image, seed, max_delta: float, p: float = 1.0) -> tf.Tensor:
    return random_op(image, seed, p, lambda s: sample_brightness(s, max_delta), adjust_brightness)


# --------------------------------------------------------------------------- contrast
def _levels_valued(image) -> bool:
    """uint8 input, or uint8 levels carried as float32: exact integer data."""
    return isinstance(image, Levels) or tf.convert_to_tensor(image).dtype == tf.uint8


def _pairwise_sum(x: tf.Tensor) -> tf.Tensor:
    """Sum of x [M, N, K] over N in a fixed order -> [M, K].

    Pad N with zeros to the next power of two P, then add the upper half to the lower
    half elementwise until one row is left. Only elementwise float adds, so the result
    does not depend on vector width, FMA, thread count or the reduction kernel; the
    native chain (tfpipe.native.pixel.cc) adds the same pairs in the same order. Error
    grows with log2(N), not N (a float32 running sum is ~1e-4 off at 224x224).
    """
    n = x.shape[1]
    if n is not None:
        p = 1
        while p < n:
            p *= 2
        if p > n:
            x = tf.pad(x, [[0, 0], [0, p - n], [0, 0]])
        while p > 1:
            p //= 2
            x = x[:, :p] + x[:, p:]
        return x[:, 0]
    n = tf.shape(x)[1]
    p = tf.while_loop(lambda p: p < n, lambda p: (p * 2,), (tf.constant(1),))[0]
    x = tf.pad(x, [[0, 0], [0, p - n], [0, 0]])

    def halve(p, x):
        h = p // 2
        return h, x[:, :h] + x[:, h:p]

    _, x = tf.while_loop(lambda p, x: p > 1, halve, [p, x],
                         shape_invariants=[tf.TensorShape([]),
                                           tf.TensorShape([x.shape[0], None, x.shape[2]])])
    return x[:, 0]


def _fixed_mean(x: tf.Tensor, integer: bool) -> tf.Tensor:
    """Per-image, per-channel mean of x [..., H, W, C] -> [..., 1, 1, C], host-independent.

    integer (uint8 levels): an exact int64 sum, times 1/N in float64, rounded once to
    float32. Otherwise `_pairwise_sum` * (1/N) in float32.
    """
    shape = tf.shape(x)
    lead, c = x.shape[:-3], x.shape[-1]
    flat = tf.reshape(x, tf.concat([[-1], [shape[-3] * shape[-2]], shape[-1:]], 0))
    if x.shape[-3] is not None and x.shape[-2] is not None:
        flat = tf.ensure_shape(flat, [None, x.shape[-3] * x.shape[-2], c])
    n = tf.shape(flat)[1]
    # times the reciprocal, never `/ n`: with a static n Grappler's constant folding
    # rewrites a division by a constant into that multiply (ReduceDivToReciprocalMul)
    # in some graphs and not in others, which changed the last bit
    if integer:
        s = tf.reduce_sum(tf.cast(flat, tf.int64), axis=1)
        mean = tf.cast(tf.cast(s, tf.float64) * (1.0 / tf.cast(n, tf.float64)), tf.float32)
    else:
        mean = _pairwise_sum(flat) * (1.0 / tf.cast(n, tf.float32))
    out_shape = tf.concat([shape[:-3], [1, 1], shape[-1:]], 0)
    return tf.ensure_shape(tf.reshape(mean, out_shape), lead.concatenate([1, 1, c]))


def _channel_mean(image) -> tf.Tensor:
    """Mean per image and channel of `image` (uint8, levels or float32 [0,1])."""
    x, _ = _as_float(image)
    return _fixed_mean(x, _levels_valued(image))


def adjust_contrast(image, factor: Number) -> tf.Tensor:
    """`(x - mean) * factor + mean`, mean per image and channel (`tf.image.adjust_contrast`).

    The mean is computed in a fixed order (`_fixed_mean`: exact integer sum for uint8,
    pairwise tree for float32), so the result is the same on every host and equals
    the native chain bit for bit.
    """
    x, _ = _as_float(image)
    mean = _fixed_mean(x, _levels_valued(image))
    return _restore((x - mean) * _param(factor, x) + mean, image.dtype)


def sample_contrast(seed, lower: float, upper: float, batch_shape: Sequence[int] = ()) -> tf.Tensor:
    """factor ~ U[lower, upper)."""
    _check_range("contrast", lower, upper)
    return seeds.uniform(seed, batch_shape, lower, upper)


def random_contrast(image, seed, lower: float, upper: float, p: float = 1.0) -> tf.Tensor:
    return random_op(image, seed, p, lambda s: sample_contrast(s, lower, upper), adjust_contrast)


# --------------------------------------------------------------------------- saturation
def _saturation_check(image) -> tf.Tensor:
    x, _ = _as_float(image)
    if x.shape[-1] != 3:
        raise ValueError(f"saturation needs 3 channels, got {x.shape[-1]}")
    return x


def adjust_saturation(image, factor: Number) -> tf.Tensor:
    """HSV saturation times `factor` (clipped to 1), like `tf.image.adjust_saturation`.

    Computed in RGB without the HSV round trip: with hue and value fixed every
    channel is affine in S, so `c' = V - r (V - c)` with `r = min(factor, V / (V - min))`.
    Same result as the HSV path (to float rounding), about 3x fewer passes.
    """
    x = _saturation_check(image)
    f = _param(factor, x)
    v = tf.reduce_max(x, axis=-1, keepdims=True)
    chroma = v - tf.reduce_min(x, axis=-1, keepdims=True)
    r = tf.minimum(f, tf.math.divide_no_nan(v, chroma))
    r = tf.where(chroma > 0, r, tf.zeros_like(r))  # gray pixels: c == V, any r works
    return _restore(v - r * (v - x), image.dtype)


def sample_saturation(seed, lower: float, upper: float, batch_shape: Sequence[int] = ()) -> tf.Tensor:
    _check_range("saturation", lower, upper, strict=False)
    return seeds.uniform(seed, batch_shape, lower, upper)


def random_saturation(image, seed, lower: float, upper: float, p: float = 1.0) -> tf.Tensor:
    return random_op(image, seed, p, lambda s: sample_saturation(s, lower, upper), adjust_saturation)


# --------------------------------------------------------------------------- hue
def adjust_hue(image, delta: Number) -> tf.Tensor:
    """Rotate HSV hue by `delta` (fraction of a turn), like `tf.image.adjust_hue`."""
    x, scale = _as_float(image)
    if x.shape[-1] != 3:
        raise ValueError(f"hue needs 3 channels, got {x.shape[-1]}")
    if scale != 1.0:
        x = x / scale
    hsv = tf.image.rgb_to_hsv(x)
    d = _param(delta, x)
    if d.shape.rank == 4:
        d = d[..., 0]
    h = tf.math.floormod(hsv[..., 0] + d, 1.0)
    rgb = tf.image.hsv_to_rgb(tf.stack([h, hsv[..., 1], hsv[..., 2]], axis=-1))
    return _restore(rgb * scale if scale != 1.0 else rgb, image.dtype)


def sample_hue(seed, max_delta: float, batch_shape: Sequence[int] = ()) -> tf.Tensor:
    if not 0.0 <= max_delta <= 0.5:
        raise ValueError(f"hue.max_delta must be in [0, 0.5], got {max_delta}")
    return seeds.uniform(seed, batch_shape, -max_delta, max_delta)


def random_hue(image, seed, max_delta: float, p: float = 1.0) -> tf.Tensor:
    return random_op(image, seed, p, lambda s: sample_hue(s, max_delta), adjust_hue)


# --------------------------------------------------------------------------- grayscale
_GRAY_TF = (0.2989, 0.5870, 0.1140)  # tf.image.rgb_to_grayscale
_GRAY_PIL = (0.299, 0.587, 0.114)  # PIL convert("L"): ITU-R 601-2 luma


def _luma(x: tf.Tensor, weights=_GRAY_TF) -> tf.Tensor:
    """r*w0 + g*w1 + b*w2, left to right, as elementwise ops: a tensordot would be a
    oneDNN matmul, whose kernel (and rounding) depends on the host's ISA."""
    return (x[..., 0:1] * weights[0] + x[..., 1:2] * weights[1]) + x[..., 2:3] * weights[2]


def to_grayscale(image) -> tf.Tensor:
    """Luma (tf.image.rgb_to_grayscale weights) repeated over the 3 channels; shape kept."""
    x, _ = _as_float(image)
    if x.shape[-1] == 1:
        return image
    if x.shape[-1] != 3:
        raise ValueError(f"grayscale needs 1 or 3 channels, got {x.shape[-1]}")
    return _restore(tf.broadcast_to(_luma(x), tf.shape(x)), image.dtype)


def random_grayscale(image, seed, p: float = 1.0) -> tf.Tensor:
    return random_op(image, seed, p, lambda s: None, lambda im, _: to_grayscale(im))


# --------------------------------------------------------------------------- gamma
def adjust_gamma(image, gamma: Number) -> tf.Tensor:
    """`x ** gamma` on the [0,1] scale (`tf.image.adjust_gamma` with gain 1)."""
    x, scale = _as_float(image)
    g = _param(gamma, x)
    if scale != 1.0:
        return _restore(tf.pow(x / scale, g) * scale, image.dtype)
    return _restore(tf.pow(x, g), image.dtype)


def sample_gamma(seed, lower: float, upper: float, batch_shape: Sequence[int] = ()) -> tf.Tensor:
    _check_range("gamma", lower, upper)
    return seeds.uniform(seed, batch_shape, lower, upper)


def random_gamma(image, seed, lower: float, upper: float, p: float = 1.0) -> tf.Tensor:
    return random_op(image, seed, p, lambda s: sample_gamma(s, lower, upper), adjust_gamma)


# --------------------------------------------------------------------------- PIL ImageEnhance
def _blend(degenerate: tf.Tensor, x: tf.Tensor, factor: tf.Tensor) -> tf.Tensor:
    """PIL Image.blend: degenerate + factor * (x - degenerate)."""
    return degenerate + factor * (x - degenerate)


def enhance_brightness(image, factor: Number) -> tf.Tensor:
    """PIL `ImageEnhance.Brightness`: blend with black, i.e. `x * factor`."""
    x, _ = _as_float(image)
    return _restore(x * _param(factor, x), image.dtype)


def enhance_contrast(image, factor: Number) -> tf.Tensor:
    """PIL `ImageEnhance.Contrast`: blend with the mean grey level of the whole image.

    uint8: the mean is rounded to an integer, as PIL does.
    """
    x, scale = _as_float(image)
    gray = _luma(x, _GRAY_PIL) if x.shape[-1] == 3 else x
    integer = x.shape[-1] != 3 and _levels_valued(image)
    mean = _fixed_mean(gray, integer)  # [...,1,1,1]: one gray channel, fixed order
    if scale != 1.0:
        mean = tf.floor(mean + 0.5)
    return _restore(_blend(mean, x, _param(factor, x)), image.dtype)


def enhance_color(image, factor: Number) -> tf.Tensor:
    """PIL `ImageEnhance.Color`: blend with the grayscale image (factor 0 = grey)."""
    x, scale = _as_float(image)
    if x.shape[-1] == 1:
        return image
    gray = _luma(x, _GRAY_PIL)
    if scale != 1.0:
        gray = tf.round(gray)
    return _restore(_blend(gray, x, _param(factor, x)), image.dtype)


# --------------------------------------------------------------------------- normalize / fused
def _mean_std(mean, std, channels) -> tuple[tf.Tensor, tf.Tensor]:
    mean = tf.cast(tf.convert_to_tensor(mean), tf.float32)
    std = tf.cast(tf.convert_to_tensor(std), tf.float32)
    for name, t in (("mean", mean), ("std", std)):
        if t.shape.rank not in (0, 1) or (t.shape.rank == 1 and t.shape[0] not in (1, channels)):
            raise ValueError(f"normalize.{name} must be a scalar or have {channels} values, got shape {t.shape}")
    return mean, std


def normalize(image, mean, std) -> tf.Tensor:
    """`(x01 - mean) / std` as float32, x01 the image on the [0,1] scale.

    One multiply-add with precomputed `1/(scale*std)` and `-mean/std`.
    """
    x, scale = _as_float(image)
    mean, std = _mean_std(mean, std, x.shape[-1])
    return x * (1.0 / (scale * std)) - mean / std


def _add_channels(z: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """z + b for b scalar, [C] or [B,1,1,C]; [C] goes through `bias_add`, whose
    dedicated kernel is several times faster than Eigen's [C]-broadcast add."""
    if b.shape.rank == 0:
        return z + b
    if b.shape.rank == 1 or (b.shape.rank == 3 and z.shape.rank == 3):
        return tf.nn.bias_add(z, tf.reshape(b, [-1]))
    return z + b


def _scale_channels(z: tf.Tensor, s: tf.Tensor) -> tf.Tensor:
    """z * s for s scalar or [C]. A plain broadcast multiply: a 1x1 depthwise
    convolution was ~2x faster here (93 vs 51 ms on 64x224x224x3) but runs in oneDNN,
    whose kernel and rounding depend on the host's ISA."""
    return z * s


def color_affine(image, brightness: Number = 0.0, contrast: Number = 1.0, mean=None, std=None,
                 clip: bool = True) -> tf.Tensor:
    """Brightness + contrast (+ normalization) folded into one multiply-add per sample.

    Equals `adjust_brightness -> adjust_contrast -> normalize` without the
    intermediate saturation after brightness (as albumentations'
    RandomBrightnessContrast does): contrast is mean-preserving per channel, so
    `contrast(x + d) = c x + (1 - c) m + d` with m the per-channel mean of x,
    computed once. With `clip`, the result is clipped to the image range
    ([0,1] scale, or its normalized image when mean/std are given); without
    mean/std the output is always clipped (it keeps the input dtype).

    Returns float32 when mean/std are given, else the input dtype.

    Kernel choice (benchmarks/pixel_bench.py): every [C]-broadcast elementwise op
    costs ~2x a scalar one on CPU, so the value is computed as z = 6 y01 with a
    scalar multiply + `bias_add`, clipped by `relu6` (one pass, scalar bounds),
    then the per-channel 1/std multiply + `bias_add`. The channel mean is the
    fixed-order `_fixed_mean`, so the result does not depend on the host.
    """
    x, scale = _as_float(image)
    c = _param(contrast, x)
    d = _param(brightness, x)
    if (mean is None) != (std is None):
        raise ValueError("color_affine: give both mean and std, or neither")
    static_c = tf.get_static_value(c)
    # y01 = x * c / scale + bias01, bias01 = d + (1 - c) * m01
    bias = d
    if static_c is None or static_c.shape or float(static_c) != 1.0:
        m01 = _fixed_mean(x, image.dtype == tf.uint8) / scale  # [1,1,C] or [B,1,1,C]
        bias = bias + (1.0 - c) * m01
    k = 6.0 if clip else 1.0  # relu6 clips z = 6 y01 to [0, 6] == y01 to [0, 1]
    z = _add_channels(x * (c * (k / scale)), bias * k)
    if clip:
        z = tf.nn.relu6(z)
    if mean is None:
        if image.dtype == tf.uint8:
            y = z * (255.0 / k)
            return tf.cast(tf.round(y), tf.uint8) if clip else _restore(y, tf.uint8)
        return z * (1.0 / k) if clip else _restore(z, tf.float32)
    mean, std = _mean_std(mean, std, x.shape[-1])
    return _add_channels(_scale_channels(z, 1.0 / (k * std)), -mean / std)


def sample_color_affine(seed, max_delta: float = 0.0, lower: float = 1.0, upper: float = 1.0,
                        batch_shape: Sequence[int] = ()) -> tuple[tf.Tensor, tf.Tensor]:
    """(brightness delta, contrast factor) from one seed: the draws `random_brightness`
    and `random_contrast` would make with the sub-seeds `op_seed`-style 0 and 1."""
    seed = seeds.as_seed(seed)

    def both(s):
        s2 = tf.random.experimental.stateless_split(s, 2, alg=ALG)
        return tf.stack([sample_brightness(s2[0], max_delta, batch_shape),
                         sample_contrast(s2[1], lower, upper, batch_shape)])

    out = seeds.per_seed(seed, both)
    return (out[0], out[1]) if seed.shape.rank == 1 else (out[:, 0], out[:, 1])


@tf.keras.utils.register_keras_serializable(package="tfpipe")
class Normalize(tf.keras.layers.Layer):
    """Keras layer: uint8 [0,255] (or float [0,1]) in -> float32 `(x01 - mean) / std` out.

    Put it first in the model when the pipeline emits uint8 batches, so the
    normalization runs on the accelerator and the host moves 4x fewer bytes.

    A saved model (`model.save("m.keras")`) holding it loads with
    `keras.models.load_model` once `tfpipe.augment` is imported (that registers
    "tfpipe>Normalize"; Keras imports no third-party module by itself). Without
    the import, Keras's "Could not locate class 'Normalize'" error prints the saved
    config, whose `load_hint` says what to import.
    """

    LOAD_HINT = "import tfpipe.augment before keras.models.load_model"

    def __init__(self, mean: Sequence[float], std: Sequence[float], **kwargs):
        kwargs.pop("load_hint", None)  # written by get_config for the error message only
        super().__init__(**kwargs)
        self.mean = [float(v) for v in (mean if isinstance(mean, (list, tuple)) else [mean])]
        self.std = [float(v) for v in (std if isinstance(std, (list, tuple)) else [std])]
        if any(s <= 0 for s in self.std):
            raise ValueError(f"Normalize.std must be > 0, got {self.std}")

    def call(self, inputs):
        x = tf.convert_to_tensor(inputs)
        scale = 255.0 if x.dtype == tf.uint8 else 1.0
        x = tf.cast(x, tf.float32)
        mean = tf.constant(self.mean, tf.float32)
        std = tf.constant(self.std, tf.float32)
        return x * (1.0 / (scale * std)) - mean / std

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"mean": self.mean, "std": self.std, "load_hint": self.LOAD_HINT})
        return config
