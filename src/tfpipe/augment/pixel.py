"""Pixel ops (L3) beyond colour: noise, blur, sharpen, erasing, posterize,
solarize, equalize, autocontrast, JPEG quality, channel shuffle.

Same conventions as `tfpipe.augment.color` (kernel + sampler + `random_*`;
uint8 [0,255] or float32 [0,1] in, same dtype out; `[H,W,C]` or `[B,H,W,C]`
with scalar or per-sample `[B]` parameters; seeds `[2]` or per-sample `[B,2]`).
Pixel ops never touch coordinates: boxes pass through unchanged.
"""

from __future__ import annotations

from typing import Sequence, Union

import tensorflow as tf

from tfpipe import seeds
from tfpipe.augment.color import (
    ALG, Number, _as_float, _check_image, _check_range, _param, _restore, random_op,
    sample_apply, split_seed,
)
from tfpipe.native import noise as native_noise

__all__ = [
    "normal_from_bits", "sample_noise", "gaussian_noise", "random_gaussian_noise",
    "speckle_noise", "random_speckle_noise",
    "gaussian_kernel1d", "gaussian_blur", "sample_blur_sigma", "random_gaussian_blur",
    "sharpen", "sample_sharpen", "random_sharpen",
    "box_masks", "erase", "sample_erasing", "random_erasing",
    "posterize", "random_posterize", "solarize", "random_solarize",
    "equalize", "random_equalize", "autocontrast", "random_autocontrast",
    "adjust_jpeg_quality", "sample_jpeg_quality", "random_jpeg_quality",
    "permute_channels", "sample_channel_permutation", "random_channel_shuffle",
]


def _batched(x: tf.Tensor) -> tuple[tf.Tensor, bool]:
    single = x.shape.rank == 3
    return (x[None] if single else x), single


# --------------------------------------------------------------------------- noise
def normal_from_bits(bits: tf.Tensor) -> tf.Tensor:
    """tfpipe's standard normal of uint32 words (any shape), elementwise: the 31
    high bits through the piecewise-linear inverse normal CDF of
    `tfpipe.native.noise.normal_table` (64 knots per octave of the float32 grid),
    the low bit the sign. Integer and single IEEE float32 operations only (no
    libm, no FMA): the same bits on every host and in the native kernel
    (docs/augment-pixel.md, "noise: tfpipe's standard normal": |n| <= 6.23, std 1
    within 1e-5)."""
    bits = tf.convert_to_tensor(bits, tf.uint32)
    v = tf.bitcast(tf.bitwise.right_shift(bits, tf.constant(1, tf.uint32)), tf.int32)
    f = tf.maximum(tf.cast(v, tf.float32), 1.0)  # v = 0 joins v = 1 (p 2^-31)
    b = tf.bitcast(f, tf.int32)
    i = tf.bitwise.right_shift(b - 0x3F800000, native_noise.FRAC_BITS)
    frac = (tf.cast(tf.bitwise.bitwise_and(b, (1 << native_noise.FRAC_BITS) - 1), tf.float32)
            * (2.0 ** -native_noise.FRAC_BITS))
    table = tf.constant(native_noise.normal_table())
    m = tf.gather(table[:, 0], i) + tf.gather(table[:, 1], i) * frac
    negative = tf.equal(tf.bitwise.bitwise_and(bits, tf.constant(1, tf.uint32)), 1)
    return tf.where(negative, -m, m)


def sample_noise(seed, shape, distribution: str = "normal") -> tf.Tensor:
    """Standard normal (or U[0,1) with distribution="uniform") noise of `shape`
    ([H,W,C]) per seed: [H,W,C] for a seed [2], [B,H,W,C] for seeds [B,2].

    "normal" is tfpipe's normal (`normal_from_bits`) of the seed's Philox words
    (`stateless_uniform(shape, seed, None, None, uint32, "philox")`: full-range
    words, element j from word j of the row-major order), not TF's Box-Muller
    `stateless_normal`."""
    if distribution not in ("normal", "uniform"):
        raise ValueError(f"distribution must be 'normal' or 'uniform', got {distribution!r}")
    if distribution == "uniform":
        return seeds.per_seed(seed, lambda s: tf.random.stateless_uniform(shape, s, alg=ALG))
    return seeds.per_seed(seed, lambda s: normal_from_bits(
        tf.random.stateless_uniform(shape, s, minval=None, maxval=None, dtype=tf.uint32,
                                    alg=ALG)))


def gaussian_noise(image, noise: tf.Tensor, stddev: Number) -> tf.Tensor:
    """`x + stddev * noise` ([0,1] scale; noise standard normal, image-shaped)."""
    x, scale = _as_float(image)
    return _restore(x + (_param(stddev, x) * scale) * noise, image.dtype)


def speckle_noise(image, noise: tf.Tensor, stddev: Number) -> tf.Tensor:
    """Multiplicative noise `x * (1 + stddev * noise)` (skimage's "speckle")."""
    x, _ = _as_float(image)
    return _restore(x + x * (_param(stddev, x) * noise), image.dtype)


def _check_stddev(stddev: float) -> None:
    if not 0.0 <= stddev <= 1.0:
        raise ValueError(f"noise stddev must be in [0, 1], got {stddev}")


def _native_noise(image: tf.Tensor, seed, stddev: float, p: float, kind: str) -> tf.Tensor:
    """`random_op` with the noise drawn and applied by the native kernel: the same
    seed split and p-coin, the same bits (tests/augment/test_noise_native.py);
    rows whose coin says no draw nothing."""
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    seed = seeds.as_seed(seed)
    if (seed.shape.rank == 2) != (image.shape.rank == 4):
        raise ValueError("use a seed [2] with an [H,W,C] image or per-sample seeds [B,2] with a "
                         f"[B,H,W,C] batch; got seed {seed.shape}, image {image.shape}")
    single = image.shape.rank == 3
    if float(p) >= 1.0:
        nseed, apply = seed, tf.ones(tf.shape(seed)[:-1], tf.bool)
    else:
        nseed, aseed = split_seed(seed)
        apply = sample_apply(aseed, p)
    if single:
        image, nseed, apply = image[None], nseed[None], tf.reshape(apply, [1])
    out = native_noise.noise(image, nseed, apply, kind, stddev)
    return out[0] if single else out


def _noise_op(image, seed, stddev: float, p: float, kind: str) -> tf.Tensor:
    _check_stddev(stddev)
    image = _check_image(image)
    if native_noise.available():
        return _native_noise(image, seed, stddev, p, kind)
    kernel = gaussian_noise if kind == "gaussian" else speckle_noise
    return random_op(image, seed, p, lambda s: sample_noise(s, tf.shape(image)[-3:]),
                     lambda im, n: kernel(im, n, stddev))


def random_gaussian_noise(image, seed, stddev: float, p: float = 1.0) -> tf.Tensor:
    """`gaussian_noise` with tfpipe's N(0, 1) noise from `sample_noise(seed)` (per row),
    p-gated. The native kernel (noise.cc) when built: the same bits, skipped rows draw
    nothing."""
    return _noise_op(image, seed, stddev, p, "gaussian")


def random_speckle_noise(image, seed, stddev: float, p: float = 1.0) -> tf.Tensor:
    """`speckle_noise` with tfpipe's N(0, 1) noise from `sample_noise(seed)` (per row),
    p-gated. The native kernel (noise.cc) when built: the same bits (all-zero pixel
    groups, whose speckle is 0 whatever the noise, draw nothing there)."""
    return _noise_op(image, seed, stddev, p, "speckle")


# --------------------------------------------------------------------------- blur
def gaussian_kernel1d(sigma: Number, kernel_size: int) -> tf.Tensor:
    """Normalized 1-D Gaussian taps, [k] or [B,k] (same as cv2.getGaussianKernel)."""
    sigma = tf.convert_to_tensor(sigma, tf.float32)
    r = kernel_size // 2
    t = tf.range(-r, r + 1, dtype=tf.float32)
    s = sigma[..., None]
    w = tf.exp(-(t * t) / (2.0 * s * s))
    return w / tf.reduce_sum(w, axis=-1, keepdims=True)


def gaussian_blur(image, sigma: Number, kernel_size: int = 5) -> tf.Tensor:
    """Separable Gaussian blur, reflect-101 borders (cv2.GaussianBlur's default).

    Depthwise convolutions; with per-sample sigmas the batch is folded into the
    channel axis ([1,H,W,B*C]) so every sample gets its own taps in ONE conv.
    """
    if kernel_size < 3 or kernel_size % 2 == 0:
        raise ValueError(f"gaussian_blur.kernel_size must be odd and >= 3, got {kernel_size}")
    x, _ = _as_float(image)
    x, single = _batched(x)
    sigma = tf.convert_to_tensor(sigma, tf.float32)
    r = kernel_size // 2
    c = x.shape[-1]
    x = tf.pad(x, [[0, 0], [r, r], [r, r], [0, 0]], mode="REFLECT")
    if sigma.shape.rank == 0:
        k = gaussian_kernel1d(sigma, kernel_size)
        kv = tf.tile(tf.reshape(k, [kernel_size, 1, 1, 1]), [1, 1, c, 1])
        kh = tf.reshape(kv, [1, kernel_size, c, 1])
        y = tf.nn.depthwise_conv2d(x, kv, [1, 1, 1, 1], "VALID")
        y = tf.nn.depthwise_conv2d(y, kh, [1, 1, 1, 1], "VALID")
    else:
        if single:
            raise ValueError("per-sample sigma needs a batched [B,H,W,C] image")
        k = gaussian_kernel1d(sigma, kernel_size)                       # [B,k]
        taps = tf.reshape(tf.repeat(k, c, axis=0), [-1, kernel_size])    # [B*C,k]
        taps = tf.transpose(taps)                                        # [k,B*C]
        kv = taps[:, None, :, None]
        kh = taps[None, :, :, None]
        shape = tf.shape(x)
        folded = tf.reshape(tf.transpose(x, [1, 2, 0, 3]), [1, shape[1], shape[2], -1])
        y = tf.nn.depthwise_conv2d(folded, kv, [1, 1, 1, 1], "VALID")
        y = tf.nn.depthwise_conv2d(y, kh, [1, 1, 1, 1], "VALID")
        out = tf.shape(y)
        y = tf.transpose(tf.reshape(y, [out[1], out[2], shape[0], c]), [2, 0, 1, 3])
    y = y[0] if single else y
    return _restore(y, image.dtype)


def sample_blur_sigma(seed, lower: float, upper: float, batch_shape: Sequence[int] = ()) -> tf.Tensor:
    _check_range("gaussian_blur.sigma", lower, upper)
    return seeds.uniform(seed, batch_shape, lower, upper)


def random_gaussian_blur(image, seed, sigma: Sequence[float] = (0.1, 2.0), kernel_size: int = 5,
                         p: float = 1.0) -> tf.Tensor:
    lo, hi = sigma
    return random_op(image, seed, p, lambda s: sample_blur_sigma(s, lo, hi),
                     lambda im, sg: gaussian_blur(im, sg, kernel_size))


# --------------------------------------------------------------------------- sharpen
_SMOOTH = [[1.0, 1.0, 1.0], [1.0, 5.0, 1.0], [1.0, 1.0, 1.0]]  # PIL ImageFilter.SMOOTH, /13


def sharpen(image, factor: Number) -> tf.Tensor:
    """PIL `ImageEnhance.Sharpness`: blend with the SMOOTH-filtered image.

    factor 0 = smoothed, 1 = original, > 1 sharper. The 1-pixel border keeps the
    original values (PIL does not filter it). uint8: smoothed image rounded first.
    """
    x, scale = _as_float(image)
    x, single = _batched(x)
    c = x.shape[-1]
    k = tf.constant(_SMOOTH, tf.float32) / 13.0
    k = tf.tile(k[:, :, None, None], [1, 1, c, 1])
    smooth = tf.nn.depthwise_conv2d(x, k, [1, 1, 1, 1], "VALID")
    if scale != 1.0:
        smooth = tf.round(smooth)
    shape = tf.shape(x)
    inner = tf.pad(tf.ones([1, shape[1] - 2, shape[2] - 2, 1], tf.bool), [[0, 0], [1, 1], [1, 1], [0, 0]])
    degenerate = tf.where(inner, tf.pad(smooth, [[0, 0], [1, 1], [1, 1], [0, 0]]), x)
    y = degenerate + _param(factor, x) * (x - degenerate)
    y = y[0] if single else y
    return _restore(y, image.dtype)


def sample_sharpen(seed, lower: float, upper: float, batch_shape: Sequence[int] = ()) -> tf.Tensor:
    _check_range("sharpen", lower, upper, strict=False)
    return seeds.uniform(seed, batch_shape, lower, upper)


def random_sharpen(image, seed, lower: float, upper: float, p: float = 1.0) -> tf.Tensor:
    return random_op(image, seed, p, lambda s: sample_sharpen(s, lower, upper), sharpen)


# --------------------------------------------------------------------------- erasing
def box_masks(boxes, height, width) -> tf.Tensor:
    """Bool mask inside half-open integer boxes (y0, x0, y1, x1): [H,W,1] for a box [4],
    [B,H,W,1] for boxes [B,4]. Built by broadcasting two iotas (no loop)."""
    boxes = tf.convert_to_tensor(boxes, tf.int32)
    ys = tf.range(height)[:, None, None]
    xs = tf.range(width)[None, :, None]
    if boxes.shape.rank == 2:
        ys, xs = ys[None], xs[None]
        y0, x0, y1, x1 = (boxes[:, i][:, None, None, None] for i in range(4))
    else:
        y0, x0, y1, x1 = tf.unstack(boxes)
    return (ys >= y0) & (ys < y1) & (xs >= x0) & (xs < x1)


def erase(image, boxes, value: Union[float, tf.Tensor] = 0.0) -> tf.Tensor:
    """Fill integer boxes (y0, x0, y1, x1) with `value` on the [0,1] scale: a float
    or a tensor broadcastable to the image (e.g. U[0,1) noise for "random")."""
    image = _check_image(image)
    shape = tf.shape(image)
    mask = box_masks(boxes, shape[-3], shape[-2])
    value = tf.convert_to_tensor(value, tf.float32)
    if image.dtype == tf.uint8:
        fill = tf.cast(tf.clip_by_value(tf.round(value * 255.0), 0.0, 255.0), tf.uint8)
    else:
        fill = tf.clip_by_value(value, 0.0, 1.0)
    return tf.where(mask, tf.broadcast_to(fill, shape), image)


def sample_erasing(seed, height, width, scale: Sequence[float] = (0.02, 0.33),
                   ratio: Sequence[float] = (0.3, 3.3)) -> tf.Tensor:
    """Integer box [4] (or [B,4]) of area fraction ~ U[scale], aspect (h/w) log-uniform
    in ratio, uniformly placed inside the image (clipped to it, no retries)."""
    _check_range("random_erasing.scale", scale[0], scale[1])
    _check_range("random_erasing.ratio", ratio[0], ratio[1])
    if scale[1] > 1.0:
        raise ValueError(f"random_erasing.scale must lie in (0, 1], got {list(scale)}")
    h = tf.cast(height, tf.float32)
    w = tf.cast(width, tf.float32)
    log_lo = tf.math.log(tf.constant(ratio[0], tf.float32))
    log_hi = tf.math.log(tf.constant(ratio[1], tf.float32))

    def one(s):
        u = tf.random.stateless_uniform([4], s, alg=ALG)
        area = (scale[0] + (scale[1] - scale[0]) * u[0]) * h * w
        r = tf.exp(log_lo + (log_hi - log_lo) * u[1])
        eh = tf.clip_by_value(tf.round(tf.sqrt(area * r)), 1.0, h)
        ew = tf.clip_by_value(tf.round(tf.sqrt(area / r)), 1.0, w)
        y0 = tf.minimum(tf.floor(u[2] * (h - eh + 1.0)), h - eh)
        x0 = tf.minimum(tf.floor(u[3] * (w - ew + 1.0)), w - ew)
        return tf.cast(tf.stack([y0, x0, y0 + eh, x0 + ew]), tf.int32)

    return seeds.per_seed(seed, one, tf.int32)


def random_erasing(image, seed, scale: Sequence[float] = (0.02, 0.33),
                   ratio: Sequence[float] = (0.3, 3.3), value: Union[float, str] = 0.0,
                   p: float = 1.0) -> tf.Tensor:
    """Random erasing / cutout (Zhong et al.); value a float on [0,1] or "random"
    (per-pixel U[0,1) noise from the seed). Cutout = ratio (1, 1), fixed scale."""
    image = _check_image(image)
    if isinstance(value, str):
        if value != "random":
            raise ValueError(f"random_erasing.value must be a float in [0, 1] or 'random', got {value!r}")
    elif not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"random_erasing.value must be a float in [0, 1] or 'random', got {value}")
    shape = tf.shape(image)

    def sample(s):
        if value == "random":
            s_box, s_val = seeds.split_pair(seeds.as_seed(s))
            return (sample_erasing(s_box, shape[-3], shape[-2], scale, ratio),
                    sample_noise(s_val, shape[-3:], "uniform"))
        return sample_erasing(s, shape[-3], shape[-2], scale, ratio), float(value)

    return random_op(image, seed, p, sample, lambda im, bv: erase(im, bv[0], bv[1]))


# --------------------------------------------------------------------------- posterize / solarize
def _to_uint8(image) -> tf.Tensor:
    image = _check_image(image)
    if image.dtype == tf.uint8:
        return image
    return tf.cast(tf.round(tf.clip_by_value(image, 0.0, 1.0) * 255.0), tf.uint8)


def _like(u8: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    return u8 if dtype == tf.uint8 else tf.cast(u8, tf.float32) / 255.0


def posterize(image, bits: Union[int, tf.Tensor]) -> tf.Tensor:
    """Keep the top `bits` bits of each 8-bit value (PIL `ImageOps.posterize`).
    float32 input is quantized to 8 bits first."""
    u8 = _to_uint8(image)
    b = tf.convert_to_tensor(bits)
    b = tf.clip_by_value(tf.cast(b, tf.int32), 0, 8)
    mask = tf.cast(tf.bitwise.left_shift(255, 8 - b) & 255, tf.uint8)
    if mask.shape.rank == 1:
        mask = tf.reshape(mask, [-1, 1, 1, 1])
    return _like(tf.bitwise.bitwise_and(u8, mask), image.dtype)


def random_posterize(image, seed, bits: int, p: float = 1.0) -> tf.Tensor:
    if not 1 <= int(bits) <= 8:
        raise ValueError(f"posterize.bits must be in [1, 8], got {bits}")
    return random_op(image, seed, p, lambda s: None, lambda im, _: posterize(im, bits))


def solarize(image, threshold: Number) -> tf.Tensor:
    """Invert values >= threshold (on the [0,1] scale), PIL `ImageOps.solarize`."""
    x, scale = _as_float(image)
    thr = _param(threshold, x) * scale
    if image.dtype == tf.uint8:
        inv = 255 - image
        return tf.where(x >= thr, inv, image)
    return tf.where(x >= thr, 1.0 - x, x)


def random_solarize(image, seed, threshold: float, p: float = 1.0) -> tf.Tensor:
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"solarize.threshold must be in [0, 1], got {threshold}")
    return random_op(image, seed, p, lambda s: None, lambda im, _: solarize(im, threshold))


# --------------------------------------------------------------------------- equalize / autocontrast
def _histograms(u8: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Per (sample, channel) 256-bin histograms of a [B,H,W,C] uint8 batch, in ONE
    bincount: value + 256 * (b * C + c) indexes a [B*C*256] table. Returns
    (hist [B,C,256] int32, flat index [B,H,W,C] for the LUT gather)."""
    shape = tf.shape(u8)
    bsz, c = shape[0], shape[3]
    offsets = (tf.range(bsz)[:, None, None, None] * c + tf.range(c)[None, None, None, :]) * 256
    index = tf.cast(u8, tf.int32) + offsets
    n = bsz * c * 256
    hist = tf.math.bincount(tf.reshape(index, [-1]), minlength=n, maxlength=n, dtype=tf.int32)
    return tf.reshape(hist, [bsz, c, 256]), index


def _apply_lut(lut: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    return tf.gather(tf.reshape(tf.cast(lut, tf.uint8), [-1]), index)


def equalize(image) -> tf.Tensor:
    """Per-channel histogram equalization with PIL `ImageOps.equalize`'s LUT:
    step = (N - count of the last used level) // 255; lut[i] = (step // 2 + cdf[i-1]) // step.
    float32 input is quantized to 8 bits first."""
    u8, single = _batched(_to_uint8(image))
    hist, index = _histograms(u8)
    levels = tf.range(256)
    used = hist > 0
    last = tf.reduce_max(tf.where(used, levels, -1), axis=-1, keepdims=True)
    h_last = tf.gather(hist, tf.maximum(last, 0), batch_dims=2)
    total = tf.reduce_sum(hist, axis=-1, keepdims=True)
    step = (total - h_last) // 255
    cdf_excl = tf.cumsum(hist, axis=-1, exclusive=True)
    lut = tf.minimum((step // 2 + cdf_excl) // tf.maximum(step, 1), 255)
    keep = (tf.reduce_sum(tf.cast(used, tf.int32), axis=-1, keepdims=True) <= 1) | (step == 0)
    lut = tf.where(keep, levels, lut)
    out = _apply_lut(lut, index)
    out = out[0] if single else out
    return _like(out, image.dtype)


def random_equalize(image, seed, p: float = 1.0) -> tf.Tensor:
    return random_op(image, seed, p, lambda s: None, lambda im, _: equalize(im))


def autocontrast(image) -> tf.Tensor:
    """Stretch each channel's [min, max] to the full range (PIL `ImageOps.autocontrast`,
    cutoff 0). uint8: PIL's LUT `int(i * 255/(hi-lo) - lo * 255/(hi-lo))` computed in
    float64 (bit-exact); float32: `(x - lo) / (hi - lo)`. Flat channels unchanged."""
    image = _check_image(image)
    if image.dtype == tf.float32:
        lo = tf.reduce_min(image, axis=[-3, -2], keepdims=True)
        hi = tf.reduce_max(image, axis=[-3, -2], keepdims=True)
        return tf.where(hi > lo, (image - lo) / tf.where(hi > lo, hi - lo, 1.0), image)
    u8, single = _batched(image)
    _, index = _histograms(u8)
    lo = tf.cast(tf.reduce_min(u8, axis=[1, 2]), tf.float64)[..., None]   # [B,C,1]
    hi = tf.cast(tf.reduce_max(u8, axis=[1, 2]), tf.float64)[..., None]
    levels = tf.range(256, dtype=tf.float64)
    scale = 255.0 / tf.where(hi > lo, hi - lo, 1.0)
    lut = tf.clip_by_value(tf.floor(levels * scale + (-lo * scale)), 0.0, 255.0)
    lut = tf.where(hi > lo, lut, levels)
    out = _apply_lut(lut, index)
    return out[0] if single else out


def random_autocontrast(image, seed, p: float = 1.0) -> tf.Tensor:
    return random_op(image, seed, p, lambda s: None, lambda im, _: autocontrast(im))


# --------------------------------------------------------------------------- JPEG quality
def adjust_jpeg_quality(image, quality: Union[int, tf.Tensor]) -> tf.Tensor:
    """JPEG encode + decode at `quality` (tf.image.adjust_jpeg_quality).

    The encoder takes one image and one scalar quality, so a batch goes through
    `tf.map_fn` -- the only per-sample loop among the pixel ops: there is no
    batched JPEG codec in TF.
    """
    image = _check_image(image)
    if image.shape[-1] not in (1, 3):
        raise ValueError(f"jpeg_quality needs 1 or 3 channels, got {image.shape[-1]}")
    q = tf.cast(tf.convert_to_tensor(quality), tf.int32)
    if image.shape.rank == 3:
        return tf.image.adjust_jpeg_quality(image, q)
    q = tf.broadcast_to(q, tf.shape(image)[:1])
    return tf.map_fn(lambda a: tf.ensure_shape(tf.image.adjust_jpeg_quality(a[0], a[1]), image.shape[1:]),
                     (image, q), fn_output_signature=image.dtype)


def sample_jpeg_quality(seed, lower: int, upper: int, batch_shape: Sequence[int] = ()) -> tf.Tensor:
    """quality ~ uniform integer in [lower, upper] (both inclusive)."""
    if not 0 <= lower <= upper <= 100:
        raise ValueError(f"jpeg_quality: need 0 <= lower <= upper <= 100, got lower={lower}, upper={upper}")
    shape = list(batch_shape)
    return seeds.per_seed(seed, lambda s: tf.random.stateless_uniform(
        shape, s, minval=int(lower), maxval=int(upper) + 1, dtype=tf.int32, alg=ALG), tf.int32)


def random_jpeg_quality(image, seed, lower: int, upper: int, p: float = 1.0) -> tf.Tensor:
    return random_op(image, seed, p, lambda s: sample_jpeg_quality(s, lower, upper),
                     adjust_jpeg_quality)


# --------------------------------------------------------------------------- channel shuffle
def permute_channels(image, perm) -> tf.Tensor:
    """Reorder channels: out[..., i] = image[..., perm[i]]; perm [C] or per-sample [B,C]."""
    image = _check_image(image)
    perm = tf.cast(tf.convert_to_tensor(perm), tf.int32)
    if perm.shape.rank == 2:
        return tf.gather(image, perm, axis=3, batch_dims=1)
    return tf.gather(image, perm, axis=-1)


def sample_channel_permutation(seed, channels: int = 3) -> tf.Tensor:
    """A uniform permutation of range(channels): argsort of stateless uniforms."""
    return seeds.per_seed(seed, lambda s: tf.argsort(
        tf.random.stateless_uniform([channels], s, alg=ALG), stable=True), tf.int32)


def random_channel_shuffle(image, seed, p: float = 1.0) -> tf.Tensor:
    image = _check_image(image)
    return random_op(image, seed, p, lambda s: sample_channel_permutation(s, image.shape[-1]),
                     permute_channels)
