"""Batch ops (L4) for classification: mixup and cutmix on a whole batch.

Both take `images` [B,H,W,C] (uint8 or float32; same dtype out), one-hot (or
already soft) `labels` [B,K] and ONE batch seed [2]. Everything is drawn from
that seed with stateless ops, and applied with broadcasting (no per-sample
loop, no map_fn over images):

- partner of sample i: `perm[i]`, a seeded permutation of the batch,
- mixing weight lambda_i ~ Beta(alpha, alpha) per sample, from two stateless
  gamma draws (X/(X+Y) with X, Y ~ Gamma(alpha)),
- p: each sample is mixed with probability p (else lambda_i = 1, unchanged).

mixup:  x_i <- lam_i x_i + (1-lam_i) x_perm[i],  y_i <- lam_i y_i + (1-lam_i) y_perm[i]
cutmix: a box of area ~ (1-lam_i) H W is cut from x_perm[i] into x_i; the box is
        an integer pixel box and the label weight of the partner is EXACTLY the
        pasted fraction `area / (H W)` measured on that integer box.
"""

from __future__ import annotations

import tensorflow as tf

from tfpipe import seeds
from tfpipe.augment.color import ALG
from tfpipe.augment.pixel import box_masks

__all__ = ["to_one_hot", "sample_beta", "sample_partners", "mixup", "cutmix",
           "mixup_or_cutmix", "sample_cutmix_boxes", "paste_boxes", "sample_mixup",
           "apply_mixup", "sample_cutmix", "apply_cutmix"]


def to_one_hot(labels, num_classes: int, dtype=tf.float32) -> tf.Tensor:
    """Integer labels [B] (or [B,1]) -> one-hot [B, num_classes]."""
    labels = tf.convert_to_tensor(labels)
    if labels.shape.rank == 2 and labels.shape[-1] == 1:
        labels = labels[:, 0]
    if not labels.dtype.is_integer:
        raise TypeError(f"labels must be integer class indices, got {labels.dtype.name}")
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    return tf.one_hot(labels, num_classes, dtype=dtype)


def _substreams(seed, n: int) -> list[tf.Tensor]:
    seed = seeds.as_seed(seed)
    if seed.shape.rank != 1:
        raise ValueError(f"batch ops take ONE batch seed of shape [2], got {seed.shape}")
    return tf.unstack(seeds.split(seed, n))


def sample_beta(seed, alpha: float, shape) -> tf.Tensor:
    """Beta(alpha, alpha) via two stateless gamma draws; 0.5 if both underflow."""
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    s1, s2 = _substreams(seed, 2)
    x = tf.random.stateless_gamma(shape, s1, alpha=tf.constant(alpha, tf.float32))
    y = tf.random.stateless_gamma(shape, s2, alpha=tf.constant(alpha, tf.float32))
    total = x + y
    return tf.where(total > 0, tf.math.divide_no_nan(x, total), 0.5 * tf.ones_like(total))


def sample_partners(seed, batch_size) -> tf.Tensor:
    """A seeded permutation of range(batch_size): argsort of stateless uniforms."""
    u = tf.random.stateless_uniform([batch_size], seeds.as_seed(seed), alg=ALG)
    return tf.argsort(u, stable=True)


def _labels(labels, images) -> tf.Tensor:
    labels = tf.convert_to_tensor(labels)
    if labels.shape.rank != 2:
        raise ValueError(f"labels must be one-hot [B, num_classes] (see to_one_hot), got shape {labels.shape}")
    if not labels.dtype.is_floating:
        labels = tf.cast(labels, tf.float32)
    return labels


def _images(images) -> tf.Tensor:
    images = tf.convert_to_tensor(images)
    if images.shape.rank != 4:
        raise ValueError(f"images must be a batch [B,H,W,C], got shape {images.shape}")
    if images.dtype not in (tf.uint8, tf.float32):
        raise TypeError(f"images must be uint8 or float32, got {images.dtype.name}")
    return images


def _check_p(p: float) -> None:
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")


def _mix_labels(labels, perm, w_partner) -> tf.Tensor:
    """(1-w) y + w y[perm], w the partner weight [B]."""
    w = tf.cast(w_partner, labels.dtype)[:, None]
    return labels + w * (tf.gather(labels, perm) - labels)


def sample_mixup(seed, batch_size, alpha: float = 0.2, p: float = 1.0
                 ) -> tuple[tf.Tensor, tf.Tensor]:
    """What `mixup` draws from its batch seed: (partners perm [B] int32, lambda [B]
    f32, 1 where a sample is not mixed). Split out so the draws can be made on the
    host and applied elsewhere (`tfpipe.augment.on_device`)."""
    _check_p(p)
    s_perm, s_lam, s_p = _substreams(seed, 3)
    perm = sample_partners(s_perm, batch_size)
    lam = sample_beta(s_lam, alpha, [batch_size])
    if float(p) < 1.0:
        u = tf.random.stateless_uniform([batch_size], s_p, alg=ALG)
        lam = tf.where(u < p, lam, tf.ones_like(lam))
    return perm, lam


def apply_mixup(images, labels, perm, lam):
    """The mixup kernel for drawn (perm, lam); returns (images, labels)."""
    images, labels = _images(images), _labels(labels, images)
    x = tf.cast(images, tf.float32)
    l4 = tf.reshape(lam, [-1, 1, 1, 1])
    mixed = x * l4 + tf.gather(x, perm) * (1.0 - l4)
    if images.dtype == tf.uint8:
        mixed = tf.cast(tf.clip_by_value(tf.round(mixed), 0.0, 255.0), tf.uint8)
    return mixed, _mix_labels(labels, perm, 1.0 - lam)


def mixup(images, labels, seed, alpha: float = 0.2, p: float = 1.0):
    """Mixup over the batch; returns (images, labels). See the module docstring."""
    images, labels = _images(images), _labels(labels, images)
    perm, lam = sample_mixup(seed, tf.shape(images)[0], alpha, p)
    return apply_mixup(images, labels, perm, lam)


def sample_cutmix_boxes(seed, lam, height, width) -> tf.Tensor:
    """Integer boxes [B,4] = (y0, x0, y1, x1), half-open, area ~ (1-lam) H W.

    Cut size `H sqrt(1-lam)`, `W sqrt(1-lam)` (truncated), centre uniform over
    the image, box clipped to the image (as in the CutMix paper / timm).
    """
    lam = tf.convert_to_tensor(lam, tf.float32)
    b = tf.shape(lam)[0]
    h = tf.cast(height, tf.float32)
    w = tf.cast(width, tf.float32)
    ratio = tf.sqrt(1.0 - lam)
    cut_h = tf.floor(h * ratio)
    cut_w = tf.floor(w * ratio)
    u = tf.random.stateless_uniform([b, 2], seeds.as_seed(seed), alg=ALG)
    cy = tf.floor(u[:, 0] * h)
    cx = tf.floor(u[:, 1] * w)
    y0 = tf.clip_by_value(cy - tf.floor(cut_h / 2), 0.0, h)
    y1 = tf.clip_by_value(cy + tf.floor(cut_h / 2), 0.0, h)
    x0 = tf.clip_by_value(cx - tf.floor(cut_w / 2), 0.0, w)
    x1 = tf.clip_by_value(cx + tf.floor(cut_w / 2), 0.0, w)
    return tf.cast(tf.stack([y0, x0, y1, x1], axis=1), tf.int32)


def paste_boxes(images, partner_images, boxes) -> tf.Tensor:
    """images with `partner_images` inside each sample's box (same dtype, no arithmetic)."""
    shape = tf.shape(images)
    return tf.where(box_masks(boxes, shape[1], shape[2]), partner_images, images)


def sample_cutmix(seed, batch_size, height, width, alpha: float = 1.0, p: float = 1.0
                  ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """What `cutmix` draws from its batch seed for [B, height, width] images:
    (partners perm [B] int32, boxes [B, 4] int32, partner label weight [B] f32 =
    the pasted area fraction of each integer box)."""
    _check_p(p)
    s_perm, s_lam, s_box, s_p = _substreams(seed, 4)
    perm = sample_partners(s_perm, batch_size)
    lam = sample_beta(s_lam, alpha, [batch_size])
    if float(p) < 1.0:
        u = tf.random.stateless_uniform([batch_size], s_p, alg=ALG)
        lam = tf.where(u < p, lam, tf.ones_like(lam))
    boxes = sample_cutmix_boxes(s_box, lam, height, width)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    # float64 for the division so the weight is the exact area fraction to 1 ulp of float32
    hw = tf.cast(height, tf.float64) * tf.cast(width, tf.float64)
    frac = tf.cast(tf.cast(area, tf.float64) / hw, tf.float32)
    return perm, boxes, frac


def apply_cutmix(images, labels, perm, boxes, weight):
    """The cutmix kernel for drawn (perm, boxes, weight); returns (images, labels)."""
    images, labels = _images(images), _labels(labels, images)
    out = paste_boxes(images, tf.gather(images, perm), boxes)
    return out, _mix_labels(labels, perm, weight)


def cutmix(images, labels, seed, alpha: float = 1.0, p: float = 1.0):
    """CutMix over the batch; returns (images, labels). See the module docstring."""
    images, labels = _images(images), _labels(labels, images)
    shape = tf.shape(images)
    perm, boxes, frac = sample_cutmix(seed, shape[0], shape[1], shape[2], alpha, p)
    return apply_cutmix(images, labels, perm, boxes, frac)


def mixup_or_cutmix(images, labels, seed, *, mixup_alpha: float = 0.2, cutmix_alpha: float = 1.0,
                    switch_prob: float = 0.5, p: float = 1.0, mixup_p: float | None = None,
                    cutmix_p: float | None = None):
    """Per batch: cutmix with probability `switch_prob`, else mixup (timm's switch).

    `p` is the per-sample probability of either op; `mixup_p` / `cutmix_p`
    override it per op (the config's `augment.batch.{mixup,cutmix}.p` when both
    are enabled).
    """
    _check_p(switch_prob)
    mixup_p = p if mixup_p is None else mixup_p
    cutmix_p = p if cutmix_p is None else cutmix_p
    s_switch, s_op = _substreams(seed, 2)
    use_cutmix = tf.random.stateless_uniform([], s_switch, alg=ALG) < switch_prob
    images, labels = _images(images), _labels(labels, images)
    return tf.cond(use_cutmix,
                   lambda: cutmix(images, labels, s_op, cutmix_alpha, cutmix_p),
                   lambda: mixup(images, labels, s_op, mixup_alpha, mixup_p))
