"""RandAugment and TrivialAugment (wide), stateless and graph-only.

Op space and magnitude bins follow torchvision (31 bins, magnitude in [0, 30]):
identity, shear_x, shear_y, translate_x, translate_y, rotate, brightness,
color, contrast, sharpness, posterize, solarize, autocontrast, equalize.
Colour ops use PIL ImageEnhance/ImageOps semantics (`enhance_*`, `sharpen`,
`posterize`, `solarize`, `autocontrast`, `equalize`); geometric ops warp with
`tfpipe.augment.geometry.affine` (nearest, fill 0) about the image centre.
Translations are fractions of the image size (RandAugment: up to 150/331,
TrivialAugment: up to 32/224, torchvision's 32 px at 224 px).

Op choice, sign and magnitude come from the seed only (`[2]` per image, `[B,2]`
per sample). Vectorized selection: the batch (a single image is a batch of
one) is split per chosen op with `tf.dynamic_partition`, each op runs ONCE on
its sub-batch with per-sample levels (inside a `tf.cond` that skips empty
sub-batches), and `tf.dynamic_stitch` puts the results back: the work is one
op per image, not every op on every image.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import tensorflow as tf

from tfpipe.augment import color, pixel
from tfpipe import seeds
from tfpipe.augment.color import ALG, _check_image
from tfpipe.augment.geometry import affine

__all__ = ["POLICY_OPS", "sample_policy", "apply_policy", "randaugment", "trivialaugment",
           "policy_levels", "PixelOp", "PIXEL_OPS", "pixel_op"]

POLICY_OPS = ("identity", "shear_x", "shear_y", "translate_x", "translate_y", "rotate",
              "brightness", "color", "contrast", "sharpness", "posterize", "solarize",
              "autocontrast", "equalize")
_SIGNED = np.array([n in ("shear_x", "shear_y", "translate_x", "translate_y", "rotate", "brightness",
                          "color", "contrast", "sharpness") for n in POLICY_OPS])
_BINS = 31


def policy_levels(policy: str) -> np.ndarray:
    """[len(POLICY_OPS), 31] magnitude table (unsigned) for "randaugment" or "trivialaugment"."""
    wide = {"randaugment": False, "trivialaugment": True}.get(policy)
    if wide is None:
        raise ValueError(f"policy must be 'randaugment' or 'trivialaugment', got {policy!r}")
    lin = lambda hi: np.linspace(0.0, hi, _BINS)  # noqa: E731
    rows = {
        "identity": np.zeros(_BINS),
        "shear_x": lin(0.99 if wide else 0.3),
        "shear_y": lin(0.99 if wide else 0.3),
        "translate_x": lin(32.0 / 224.0 if wide else 150.0 / 331.0),
        "translate_y": lin(32.0 / 224.0 if wide else 150.0 / 331.0),
        "rotate": lin(135.0 if wide else 30.0),
        "brightness": lin(0.99 if wide else 0.9),
        "color": lin(0.99 if wide else 0.9),
        "contrast": lin(0.99 if wide else 0.9),
        "sharpness": lin(0.99 if wide else 0.9),
        "posterize": 8 - np.round(np.arange(_BINS) / ((_BINS - 1) / (6 if wide else 4))),
        "solarize": np.linspace(1.0, 0.0, _BINS),
        "autocontrast": np.zeros(_BINS),
        "equalize": np.zeros(_BINS),
    }
    return np.stack([rows[n] for n in POLICY_OPS]).astype(np.float32)


def sample_policy(seed, policy: str, num_ops: int = 2, magnitude: int | None = 9) -> tf.Tensor:
    """Per image: [num_ops, 2] float32 rows (op index, signed level); [B, num_ops, 2] for seeds [B,2].

    magnitude: the bin for RandAugment (0..30); None draws it uniformly per op
    (TrivialAugment)."""
    table = tf.constant(policy_levels(policy))
    signed = tf.constant(_SIGNED)
    n = len(POLICY_OPS)
    if magnitude is not None and not 0 <= int(magnitude) <= _BINS - 1:
        raise ValueError(f"{policy}.magnitude must be in [0, {_BINS - 1}], got {magnitude}")
    if num_ops < 1:
        raise ValueError(f"{policy}.num_ops must be >= 1, got {num_ops}")

    def one(s):
        u = tf.random.stateless_uniform([num_ops, 3], s, alg=ALG)
        op = tf.minimum(tf.cast(u[:, 0] * n, tf.int32), n - 1)
        if magnitude is None:
            bins = tf.minimum(tf.cast(u[:, 1] * _BINS, tf.int32), _BINS - 1)
        else:
            bins = tf.fill([num_ops], int(magnitude))
        level = tf.gather_nd(table, tf.stack([op, bins], axis=1))
        negate = tf.gather(signed, op) & (u[:, 2] < 0.5)
        level = tf.where(negate, -level, level)
        return tf.stack([tf.cast(op, tf.float32), level], axis=1)

    return seeds.per_seed(seed, one)


# --------------------------------------------------------------------------- op kernels on [b,H,W,C], level [b]
def _warp(images, a, b, c, d):
    """x' = a x + b y + tx, y' = c x + d y + ty about the image centre; nearest, fill 0."""
    shape = tf.shape(images)
    cy = (tf.cast(shape[1], tf.float32) - 1.0) / 2.0
    cx = (tf.cast(shape[2], tf.float32) - 1.0) / 2.0
    tx = cx - a * cx - b * cy
    ty = cy - c * cx - d * cy
    zero, one = tf.zeros_like(a), tf.ones_like(a)
    m = tf.stack([tf.stack([a, b, tx], -1), tf.stack([c, d, ty], -1),
                  tf.stack([zero, zero, one], -1)], axis=1)
    return affine(images, m, interpolation="nearest", fill_mode="constant", fill_value=0.0)


def _shear_x(im, lv):
    o, z = tf.ones_like(lv), tf.zeros_like(lv)
    return _warp(im, o, lv, z, o)


def _shear_y(im, lv):
    o, z = tf.ones_like(lv), tf.zeros_like(lv)
    return _warp(im, o, z, lv, o)


def _translate(im, lv, axis):
    shape = tf.shape(im)
    o, z = tf.ones_like(lv), tf.zeros_like(lv)
    size = tf.cast(shape[2] if axis == "x" else shape[1], tf.float32)
    t = tf.round(lv * size)
    # _warp adds the centre terms, which vanish for the identity linear part
    m_tx, m_ty = (t, z) if axis == "x" else (z, t)
    m = tf.stack([tf.stack([o, z, m_tx], -1), tf.stack([z, o, m_ty], -1),
                  tf.stack([z, z, o], -1)], axis=1)
    return affine(im, m, interpolation="nearest", fill_mode="constant", fill_value=0.0)


def _rotate(im, lv):
    rad = lv * (math.pi / 180.0)
    c, s = tf.cos(rad), tf.sin(rad)
    return _warp(im, c, s, -s, c)


_KERNELS = (
    lambda im, lv: im,
    _shear_x,
    _shear_y,
    lambda im, lv: _translate(im, lv, "x"),
    lambda im, lv: _translate(im, lv, "y"),
    _rotate,
    lambda im, lv: color.enhance_brightness(im, 1.0 + lv),
    lambda im, lv: color.enhance_color(im, 1.0 + lv),
    lambda im, lv: color.enhance_contrast(im, 1.0 + lv),
    lambda im, lv: pixel.sharpen(im, 1.0 + lv),
    lambda im, lv: pixel.posterize(im, tf.cast(lv, tf.int32)),
    lambda im, lv: pixel.solarize(im, lv),
    lambda im, lv: pixel.autocontrast(im),
    lambda im, lv: pixel.equalize(im),
)
assert len(_KERNELS) == len(POLICY_OPS)


def _apply_one(image, op, level):
    """One op per image. image [H,W,C] with scalar op/level, or [B,H,W,C] with [B].

    Partition by op, run each op once on its sub-batch (skipped when empty),
    stitch back. A single image goes through the same path as a batch of one:
    one code path, so single-image and batch results cannot diverge (tested).
    """
    if image.shape.rank == 3:
        return _apply_one(image[None], op[None], level[None])[0]
    n = len(POLICY_OPS)
    parts = tf.dynamic_partition(image, op, n)
    levels = tf.dynamic_partition(level, op, n)
    where = tf.dynamic_partition(tf.range(tf.shape(image)[0]), op, n)
    # empty sub-batches skip the op: some kernels (depthwise conv) mis-shape a 0-batch
    outs = [tf.cond(tf.shape(parts[k])[0] > 0,
                    lambda k=k: tf.ensure_shape(_KERNELS[k](parts[k], levels[k]), parts[k].shape),
                    lambda k=k: parts[k]) for k in range(n)]
    out = tf.dynamic_stitch(where, outs)
    return tf.ensure_shape(out, image.shape)


def apply_policy(image, ops) -> tf.Tensor:
    """Kernel: apply the sampled rows (op, level) in order. ops [num_ops,2] for an
    [H,W,C] image, [B,num_ops,2] for a batch."""
    image = _check_image(image)
    ops = tf.convert_to_tensor(ops, tf.float32)
    if ops.shape.rank != image.shape.rank - 1:
        raise ValueError(f"ops must be [num_ops,2] for an image or [B,num_ops,2] for a batch; "
                         f"got ops {ops.shape}, image {image.shape}")
    for j in range(ops.shape[-2]):
        image = _apply_one(image, tf.cast(ops[..., j, 0], tf.int32), ops[..., j, 1])
    return image


def _policy(image, seed, policy, num_ops, magnitude, p):
    image = _check_image(image)
    seed = seeds.as_seed(seed)
    return color.random_op(image, seed, p, lambda s: sample_policy(s, policy, num_ops, magnitude),
                           apply_policy)


def randaugment(image, seed, num_ops: int = 2, magnitude: int = 9, p: float = 1.0) -> tf.Tensor:
    """RandAugment (Cubuk et al. 2020): `num_ops` ops uniformly chosen, fixed magnitude bin."""
    return _policy(image, seed, "randaugment", num_ops, magnitude, p)


def trivialaugment(image, seed, p: float = 1.0) -> tf.Tensor:
    """TrivialAugment wide (Müller & Hutter 2021): one op, magnitude bin uniform in 0..30."""
    return _policy(image, seed, "trivialaugment", 1, None, p)


# --------------------------------------------------------------------------- config op table
@dataclass(frozen=True)
class PixelOp:
    """One L3 op of the config table (docs/architecture.md), split for batch mode.

    `sample(seed, image_shape, **params)` draws the per-sample parameters
    (seed [2] -> one sample's, seeds [B,2] -> stacked), `kernel(image, drawn,
    **params)` applies them to an image or a whole batch. The pipeline draws in
    the per-sample map, batches the drawn values with the (uint8) images, and
    calls `kernel` once per batch. `random(image, seed, p=1.0, **params)` does
    both at once (same result as the matching `random_*` function).
    """

    name: str
    sample: Callable
    kernel: Callable

    def random(self, image, seed, p: float = 1.0, **params) -> tf.Tensor:
        image = _check_image(image)
        shape = image.shape[-3:] if image.shape[-3:].is_fully_defined() else tf.shape(image)[-3:]
        return color.random_op(image, seed, p, lambda s: self.sample(s, shape, **params),
                               lambda im, drawn: self.kernel(im, drawn, **params))


def _channels(shape) -> int:
    """Static channel count from an image shape (list, TensorShape or constant tensor)."""
    value = shape[-1] if not isinstance(shape, tf.Tensor) else tf.get_static_value(shape)
    value = value[-1] if isinstance(shape, tf.Tensor) and value is not None else value
    if value is None:
        raise ValueError("channel_shuffle needs a static channel count; pass image.shape")
    return int(value)


def _nothing(seed, shape, **_):
    # parameter-free ops still emit one (ignored) value per sample, so a drawn
    # batch has the same structure for every op
    return seeds.per_seed(seed, lambda s: tf.zeros([], tf.float32))


def _erasing_sample(seed, shape, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0.0):
    if value == "random":
        seed = seeds.as_seed(seed)
        box_seed, value_seed = seeds.split_pair(seed)
        return (pixel.sample_erasing(box_seed, shape[0], shape[1], scale, ratio),
                pixel.sample_noise(value_seed, shape, "uniform"))
    return pixel.sample_erasing(seed, shape[0], shape[1], scale, ratio)


def _erasing_kernel(image, drawn, scale=None, ratio=None, value=0.0):
    if value == "random":
        return pixel.erase(image, drawn[0], drawn[1])
    return pixel.erase(image, drawn, float(value))


PIXEL_OPS: dict[str, PixelOp] = {op.name: op for op in [
    PixelOp("brightness", lambda s, _, max_delta: color.sample_brightness(s, max_delta),
            lambda im, d, **_: color.adjust_brightness(im, d)),
    PixelOp("contrast", lambda s, _, lower, upper: color.sample_contrast(s, lower, upper),
            lambda im, d, **_: color.adjust_contrast(im, d)),
    PixelOp("saturation", lambda s, _, lower, upper: color.sample_saturation(s, lower, upper),
            lambda im, d, **_: color.adjust_saturation(im, d)),
    PixelOp("hue", lambda s, _, max_delta: color.sample_hue(s, max_delta),
            lambda im, d, **_: color.adjust_hue(im, d)),
    PixelOp("grayscale", _nothing, lambda im, d: color.to_grayscale(im)),
    PixelOp("gamma", lambda s, _, lower, upper: color.sample_gamma(s, lower, upper),
            lambda im, d, **_: color.adjust_gamma(im, d)),
    PixelOp("gaussian_noise", lambda s, shape, stddev: pixel.sample_noise(s, shape),
            lambda im, n, stddev: pixel.gaussian_noise(im, n, stddev)),
    PixelOp("speckle_noise", lambda s, shape, stddev: pixel.sample_noise(s, shape),
            lambda im, n, stddev: pixel.speckle_noise(im, n, stddev)),
    PixelOp("gaussian_blur",
            lambda s, _, sigma=(0.1, 2.0), kernel_size=5: pixel.sample_blur_sigma(s, *sigma),
            lambda im, d, sigma=None, kernel_size=5: pixel.gaussian_blur(im, d, kernel_size)),
    PixelOp("sharpen", lambda s, _, lower, upper: pixel.sample_sharpen(s, lower, upper),
            lambda im, d, **_: pixel.sharpen(im, d)),
    PixelOp("random_erasing", _erasing_sample, _erasing_kernel),
    PixelOp("posterize", _nothing, lambda im, d, bits: pixel.posterize(im, bits)),
    PixelOp("solarize", _nothing, lambda im, d, threshold: pixel.solarize(im, threshold)),
    PixelOp("equalize", _nothing, lambda im, d: pixel.equalize(im)),
    PixelOp("autocontrast", _nothing, lambda im, d: pixel.autocontrast(im)),
    PixelOp("jpeg_quality", lambda s, _, lower, upper: pixel.sample_jpeg_quality(s, lower, upper),
            lambda im, q, **_: pixel.adjust_jpeg_quality(im, q)),
    PixelOp("channel_shuffle", lambda s, shape: pixel.sample_channel_permutation(s, _channels(shape)),
            lambda im, perm: pixel.permute_channels(im, perm)),
    PixelOp("randaugment",
            lambda s, _, num_ops=2, magnitude=9: sample_policy(s, "randaugment", num_ops, magnitude),
            lambda im, ops, **_: apply_policy(im, ops)),
    PixelOp("trivialaugment", lambda s, _: sample_policy(s, "trivialaugment", 1, None),
            lambda im, ops: apply_policy(im, ops)),
]}


def pixel_op(name: str) -> PixelOp:
    """The `PixelOp` for a config name under `augment.pixel` (error lists the allowed names)."""
    try:
        return PIXEL_OPS[name]
    except KeyError:
        raise ValueError(f"augment.pixel: unknown op {name!r}; allowed: {', '.join(PIXEL_OPS)}") from None
