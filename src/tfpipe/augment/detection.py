"""Detection batch composition (L4): padded boxes, mosaic, detection mixup.

Padded layout (what the pipeline's detection elements carry): ``boxes`` [B, N, 4]
normalized yxyx, ``classes`` [B, N] int, ``num_boxes`` [B] int32; rows at index >=
num_boxes are padding: box 0, class -1. Ops keep N (= max_boxes) and keep valid
boxes first, in order. Everything is vectorized over the batch (batched kernels,
gathers and masks; no per-sample Python loop) and drawn from ONE batch seed.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf

from tfpipe.augment.boxes import transform_boxes
from tfpipe.augment.geometry import compose, scale_matrix, split_seeds, translate_matrix
from tfpipe.native import mosaic as native_mosaic
from tfpipe.seeds import ALG

PAD_CLASS = -1


def pad_boxes(boxes: tf.Tensor, classes: tf.Tensor, max_boxes: int
              ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """[N,4] boxes and [N] classes -> ([max_boxes,4], [max_boxes], num_boxes).

    Padding rows are box 0 and class -1. Images with more than `max_boxes` boxes keep
    the first `max_boxes` (num_boxes says how many are real).
    """
    if max_boxes < 1:
        raise ValueError(f"max_boxes must be >= 1, got {max_boxes}")
    boxes = tf.reshape(tf.cast(boxes, tf.float32), [-1, 4])[:max_boxes]
    classes = tf.reshape(classes, [-1])[:max_boxes]
    n = tf.shape(boxes)[0]
    pad = max_boxes - n
    boxes = tf.pad(boxes, [[0, pad], [0, 0]])
    classes = tf.pad(classes, [[0, pad]], constant_values=tf.cast(PAD_CLASS, classes.dtype))
    return (tf.ensure_shape(boxes, [max_boxes, 4]), tf.ensure_shape(classes, [max_boxes]),
            tf.cast(n, tf.int32))


def valid_mask(num_boxes: tf.Tensor, max_boxes: int | tf.Tensor) -> tf.Tensor:
    """[B, max_boxes] True for real rows."""
    return tf.range(max_boxes)[None, :] < tf.cast(num_boxes, tf.int32)[:, None]


def compact(boxes: tf.Tensor, classes: tf.Tensor, keep: tf.Tensor, max_boxes: int,
            weights: tf.Tensor | None = None) -> tuple[tf.Tensor, ...]:
    """Move kept rows first (stable), cut to max_boxes, re-pad. Returns
    (boxes, classes, num_boxes[, weights])."""
    order = tf.argsort(tf.cast(~keep, tf.int32), axis=1, stable=True)[:, :max_boxes]
    k = tf.gather(keep, order, batch_dims=1)
    out_boxes = tf.where(k[..., None], tf.gather(boxes, order, batch_dims=1), 0.0)
    out_classes = tf.where(k, tf.gather(classes, order, batch_dims=1),
                           tf.cast(PAD_CLASS, classes.dtype))
    num = tf.reduce_sum(tf.cast(k, tf.int32), axis=1)
    out = (out_boxes, out_classes, num)
    if weights is not None:
        out += (tf.where(k, tf.gather(weights, order, batch_dims=1), 0.0),)
    return out


def _permutation(seed: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    return tf.argsort(tf.random.stateless_uniform(tf.reshape(b, [1]), seed, alg=ALG))


def _blend(a: tf.Tensor, b: tf.Tensor, lam: tf.Tensor) -> tf.Tensor:
    dtype = a.dtype
    lam = tf.reshape(lam, [-1, 1, 1, 1])
    out = lam * tf.cast(a, tf.float32) + (1.0 - lam) * tf.cast(b, tf.float32)
    return tf.saturate_cast(tf.round(out), dtype) if dtype.is_integer else tf.cast(out, dtype)


# Fixed-point mosaic taps: positions in units of 2^-17 pixel, weights in 1/256.
_POS_BITS = 17
_WEIGHT_BITS = 8


def mosaic_taps(cut: tf.Tensor, size: tf.Tensor | int, scale: float
                ) -> tuple[tf.Tensor, tf.Tensor]:
    """Separable bilinear taps of one mosaic axis: (t0, w1), int32 [B, size] each.

    Output index i < cut[b] lies in the first tile (left / top), the rest in the
    second. The source centre coordinate (pixel centres at integers) is
    u = (i + 0.5 - cut) / scale + size - 0.5 in the first tile (its far edge lands
    on the cut) and u = (i + 0.5 - cut) / scale - 0.5 in the second, evaluated in
    exact integers with 1/scale ~ r / 2^16, r = round(2^16 / scale):
    u17 = (2 (i - cut) + 1) r + (2 size - 1) 2^16 (first) or - 2^16 (second) is u
    in units of 2^-17. t0 = floor(u), the second tap t0 + 1 gets the weight
    w1 = round_half_up(frac(u) * 256) in [0, 256], the first 256 - w1. t0 is
    clamped to [-2, size] (still every tap outside the image where it was).
    """
    r = int(round(2.0 ** 16 / float(scale)))
    if r < 1:
        raise ValueError(f"scale must be <= 65536, got {scale}")
    n = tf.cast(size, tf.int64)
    pos = tf.range(n, dtype=tf.int64)[None, :]
    c = tf.cast(cut, tf.int64)[:, None]
    one = 1 << (_POS_BITS - 1)
    u = (2 * (pos - c) + 1) * r + tf.where(pos < c, (2 * n - 1) * one, -one)
    t0 = tf.math.floordiv(u, 1 << _POS_BITS)
    frac = u - t0 * (1 << _POS_BITS)
    shift = _POS_BITS - _WEIGHT_BITS
    w1 = tf.bitwise.right_shift(frac + (1 << (shift - 1)), shift)
    return tf.cast(tf.clip_by_value(t0, -2, n), tf.int32), tf.cast(w1, tf.int32)


def _mosaic_tf(images: tf.Tensor, partners: tf.Tensor, centers: tf.Tensor, x0: tf.Tensor,
               wx: tf.Tensor, y0: tf.Tensor, wy: tf.Tensor, apply: tf.Tensor,
               fill_value: float) -> tf.Tensor:
    """The pure-TF twin of `TfpipeMosaic` (mosaic.cc): the same taps, the same
    arithmetic (uint8: exact int32; float32: the same IEEE ops in the same order).

    Separable gathers of whole lines, never of single pixels (a per-pixel gather of
    3-byte slices costs ~10x more): the two source rows of every output row, from
    the left and the right partner, side by side; transposed, so that the two source
    columns of every output column are again whole lines; the arithmetic in that
    [B, W, H, C] layout and one transpose back. A 1-pixel fill border makes every
    out-of-image tap read the fill value."""
    dtype = images.dtype
    shape = tf.shape(images)
    h, w, c = shape[1], shape[2], shape[3]
    if dtype == tf.uint8:
        fill = tf.saturate_cast(tf.round(tf.cast(fill_value, tf.float32)), tf.uint8)
    else:
        fill = tf.cast(fill_value, dtype)
    padded = tf.pad(images, [[0, 0], [1, 1], [1, 1], [0, 0]], constant_values=fill)
    lines = tf.reshape(padded, tf.stack([-1, w + 2, c]))  # [B * (H + 2), W + 2, C]
    cx, cy = centers[:, 0], centers[:, 1]
    top = tf.range(h)[None, :] < cy[:, None]                     # [B, H]
    left = tf.range(w)[None, :] < cx[:, None]                    # [B, W]
    src = [tf.where(top, partners[0][:, None], partners[2][:, None]),   # left tiles
           tf.where(top, partners[1][:, None], partners[3][:, None])]   # right tiles
    # left partner's columns at [0, W + 2), the right partner's at [W + 2, 2W + 4)
    cols = [tf.where(left, 0, w + 2) + tf.clip_by_value(x0 + k, -1, w) + 1 for k in (0, 1)]
    acc_t = tf.int32 if dtype == tf.uint8 else tf.float32
    wx1 = tf.cast(wx, acc_t)[:, :, None, None]                   # [B, W, 1, 1]
    wy1 = tf.cast(wy, acc_t)[:, None, :, None]                   # [B, 1, H, 1]
    wx0, wy0 = 256 - wx1, 256 - wy1
    rows_h = []
    for k in (0, 1):  # source rows y0 and y0 + 1 of every output row
        ry = tf.clip_by_value(y0 + k, -1, h) + 1
        both = tf.concat([tf.gather(lines, s * (h + 2) + ry) for s in src], axis=2)
        t = tf.transpose(both, [0, 2, 1, 3])                     # [B, 2W + 4, H, C]
        p0, p1 = (tf.cast(tf.gather(t, cols[j], axis=1, batch_dims=1), acc_t) for j in (0, 1))
        rows_h.append(tf.add(tf.multiply(wx0, p0), tf.multiply(wx1, p1)))
    acc = tf.add(tf.multiply(wy0, rows_h[0]), tf.multiply(wy1, rows_h[1]))
    if dtype == tf.uint8:
        out = tf.cast(tf.bitwise.right_shift(acc + 32768, 16), tf.uint8)
    else:
        out = tf.cast(acc * (1.0 / 65536.0), dtype)
    out = tf.transpose(out, [0, 2, 1, 3])
    return tf.where(apply[:, None, None, None], out, images)


def mosaic_draws(seed: tf.Tensor, b: tf.Tensor, h: tf.Tensor, w: tf.Tensor, p: float,
                 center_range: tuple[float, float]
                 ) -> tuple[list[tf.Tensor], tf.Tensor, tf.Tensor, tf.Tensor]:
    """What `mosaic` draws from its seed for a [b, h, w] batch: (the 4 tiles' partner
    indices [b] each, tile 0 the sample itself; the centre cx, cy [b] as whole-pixel
    edge coordinates, float32; apply [b] bool). Masks follow with the same draws
    (`tfpipe.augment.masks.mosaic_masks`)."""
    hf, wf = tf.cast(h, tf.float32), tf.cast(w, tf.float32)
    seeds = split_seeds(seed, 6)
    partners = [tf.range(b)] + [_permutation(seeds[i], b) for i in range(1, 4)]
    cxy = tf.random.stateless_uniform(tf.stack([b, 2]), seeds[4], center_range[0],
                                      center_range[1], alg=ALG)
    cx = tf.round(cxy[:, 0] * wf)  # edge coordinates (pixel boundaries)
    cy = tf.round(cxy[:, 1] * hf)
    apply = tf.random.stateless_uniform(tf.reshape(b, [1]), seeds[5], alg=ALG) < p
    return partners, cx, cy, apply


class MosaicTile(NamedTuple):
    """What `mosaic` does to the objects of one tile (per sample of the batch):
    `partners` [B] (whose objects), `offset` (tx, ty) [B] each (the tile's top-left
    on the canvas, edge coordinates: X_out = scale * X_src + t), `matrix` [B, 3, 3]
    (pixel centres), the objects' `boxes` [B, N, 4] through it, clipped, and `keep`
    [B, N] (a real object whose box survives mosaic's filter)."""

    partners: tf.Tensor
    offset: tuple[tf.Tensor, tf.Tensor]
    matrix: tf.Tensor
    boxes: tf.Tensor
    keep: tf.Tensor


def mosaic_tiles(boxes: tf.Tensor, num_boxes: tf.Tensor, size: tuple[Any, Any],
                 partners: list[tf.Tensor], cx: tf.Tensor, cy: tf.Tensor, scale: float,
                 min_visibility: float, min_area: float) -> list[MosaicTile]:
    """The 4 tiles of a mosaic with `mosaic_draws`' partners and centre, for the batch's
    INPUT boxes and images of `size` (h, w): the one definition of the tiles' geometry
    that the boxes, keypoints and instance masks all follow."""
    h, w = size
    b = tf.shape(partners[0])[0]
    max_boxes = boxes.shape[1] if boxes.shape[1] is not None else tf.shape(boxes)[1]
    sw, sh = scale * tf.cast(w, tf.float32), scale * tf.cast(h, tf.float32)
    offsets = [(cx - sw, cy - sh), (cx, cy - sh), (cx - sw, cy), (cx, cy)]
    valid = valid_mask(num_boxes, max_boxes)
    tiles = []
    for q in range(4):
        idx = partners[q]
        tx, ty = offsets[q]
        # edge -> centre conversion: x_c = X - 0.5, so x_o = scale*(x + 0.5) + t - 0.5
        m = compose(translate_matrix(tf.fill([b], 0.5), tf.fill([b], 0.5)),
                    scale_matrix(tf.fill([b], scale)),
                    translate_matrix(tx - 0.5, ty - 0.5))
        tb, keep = transform_boxes(tf.gather(boxes, idx), m, (h, w), (h, w),
                                   min_visibility, min_area)
        tiles.append(MosaicTile(idx, (tx, ty), m, tb, keep & tf.gather(valid, idx)))
    return tiles


def mixup_partners(seed: tf.Tensor, num_boxes: tf.Tensor, max_boxes: Any, p: float
                   ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """What `detection_mixup` draws for the objects: (perm [B]: each sample's partner,
    apply [B], keep [B, 2N]: own real objects, then the partner's when applied) --
    the rows every per-object target concatenates and compacts in the same order."""
    b = tf.shape(num_boxes)[0]
    seeds = split_seeds(seed, 3)
    perm = _permutation(seeds[0], b)
    apply = tf.random.stateless_uniform(tf.reshape(b, [1]), seeds[2], alg=ALG) < p
    valid = valid_mask(num_boxes, max_boxes)
    return perm, apply, tf.concat([valid, tf.gather(valid, perm) & apply[:, None]], 1)


def mosaic(images: tf.Tensor, boxes: tf.Tensor, classes: tf.Tensor, num_boxes: tf.Tensor,
           seed: tf.Tensor, p: float = 1.0, scale: float = 0.5,
           center_range: tuple[float, float] = (0.25, 0.75), fill_value: float = 0.0,
           min_visibility: float = 0.1, min_area: float = 4.0
           ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """4 images -> 1: each output sample (with probability p) becomes a 2x2 mosaic.

    Tile 0 is the sample itself, tiles 1-3 come from seeded permutations of the batch.
    A centre point (cx, cy) is drawn in `center_range` (fractions of W, H, rounded to
    whole pixels); each tile is its image resized by `scale` with the corner that
    faces the centre placed at the centre (top-left tile: bottom-right corner), and cut
    at the centre lines; uncovered canvas gets `fill_value`. Each output pixel is
    resampled once, from its own tile only: separable bilinear taps in fixed point
    (`mosaic_taps`), uint8 in exact integers, rounded half up (docs/augment.md).
    Boxes follow their tile's matrix, are clipped to the canvas, filtered
    (min_visibility, min_area in output pixels) and re-padded to N. Shapes and dtypes
    are unchanged; uint8 / float32 run the native `TfpipeMosaic` when built, else
    its pure-TF twin (bit-identical); other dtypes go through float32.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    if not 0.0 < center_range[0] <= center_range[1] < 1.0:
        raise ValueError(f"center_range must satisfy 0 < low <= high < 1, got {center_range}")
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    images = tf.convert_to_tensor(images)
    boxes = tf.convert_to_tensor(boxes, tf.float32)
    classes = tf.convert_to_tensor(classes)
    shape = tf.shape(images)
    b, h, w = shape[0], shape[1], shape[2]
    max_boxes = boxes.shape[1] if boxes.shape[1] is not None else tf.shape(boxes)[1]
    hf, wf = tf.cast(h, tf.float32), tf.cast(w, tf.float32)
    partners, cx, cy, apply = mosaic_draws(seed, b, h, w, p, center_range)
    # pixels: pixel centre x + 0.5 < cx (x < cx for whole-pixel cx) is the left half
    centers = tf.cast(tf.stack([cx, cy], axis=1), tf.int32)
    x0, wx = mosaic_taps(centers[:, 0], w, scale)
    y0, wy = mosaic_taps(centers[:, 1], h, scale)
    pidx = tf.cast(tf.stack(partners), tf.int32)
    if native_mosaic.usable(images.dtype):
        out_images = native_mosaic.mosaic_taps(images, pidx, centers, x0, wx, y0, wy, apply,
                                               fill_value)
    elif images.dtype in (tf.uint8, tf.float32):
        out_images = _mosaic_tf(images, pidx, centers, x0, wx, y0, wy, apply, fill_value)
    else:
        out = _mosaic_tf(tf.cast(images, tf.float32), pidx, centers, x0, wx, y0, wy, apply,
                         fill_value)
        out_images = (tf.saturate_cast(tf.round(out), images.dtype) if images.dtype.is_integer
                      else tf.cast(out, images.dtype))
    out_images = tf.ensure_shape(out_images, images.shape)
    tiles = mosaic_tiles(boxes, num_boxes, (h, w), partners, cx, cy, scale, min_visibility,
                         min_area)
    all_boxes = [t.boxes for t in tiles]
    all_classes = [tf.gather(classes, t.partners) for t in tiles]
    all_keep = [t.keep for t in tiles]
    new_boxes, new_classes, new_num = compact(tf.concat(all_boxes, 1), tf.concat(all_classes, 1),
                                              tf.concat(all_keep, 1), max_boxes)
    new_boxes = tf.ensure_shape(new_boxes, boxes.shape)
    out_boxes = tf.where(apply[:, None, None], new_boxes, boxes)
    out_classes = tf.where(apply[:, None], new_classes, classes)
    out_num = tf.where(apply, new_num, tf.cast(num_boxes, tf.int32))
    return out_images, out_boxes, out_classes, out_num


def _sample_beta(seed: tf.Tensor, alpha: float, n: tf.Tensor) -> tf.Tensor:
    s = split_seeds(seed, 2)
    shape = tf.reshape(n, [1])
    # stateless_gamma takes no alg: its kernel (StatelessRandomGammaV2) is Philox-only
    x = tf.random.stateless_gamma(shape, s[0], alpha=alpha)
    y = tf.random.stateless_gamma(shape, s[1], alpha=alpha)
    total = x + y  # both can underflow to 0 for tiny alpha: then lambda = 0.5
    return tf.where(total > 0, tf.math.divide_no_nan(x, total), 0.5)


def detection_mixup(images: tf.Tensor, boxes: tf.Tensor, classes: tf.Tensor,
                    num_boxes: tf.Tensor, seed: tf.Tensor, alpha: float = 1.5, p: float = 1.0
                    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """Blend each sample with a seeded partner; keep both sets of boxes.

    lambda ~ Beta(alpha, alpha) per sample (lambda = 1, no change, with probability
    1 - p). image = lambda * own + (1 - lambda) * partner; boxes = own boxes then the
    partner's, cut to N. Returns (images, boxes, classes, num_boxes, box_weights) where
    box_weights [B, N] is lambda for own boxes, 1 - lambda for the partner's, 0 for
    padding (use it to weight each box's loss).
    """
    if alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    images = tf.convert_to_tensor(images)
    boxes = tf.convert_to_tensor(boxes, tf.float32)
    classes = tf.convert_to_tensor(classes)
    b = tf.shape(images)[0]
    max_boxes = boxes.shape[1] if boxes.shape[1] is not None else tf.shape(boxes)[1]
    perm, apply, cat_keep = mixup_partners(seed, num_boxes, max_boxes, p)
    lam = tf.where(apply, _sample_beta(split_seeds(seed, 3)[1], alpha, b), 1.0)
    out_images = _blend(images, tf.gather(images, perm), lam)
    cat_boxes = tf.concat([boxes, tf.gather(boxes, perm)], 1)
    cat_classes = tf.concat([classes, tf.gather(classes, perm)], 1)
    own = tf.shape(boxes)[:2]
    weights = tf.concat([tf.broadcast_to(lam[:, None], own),
                         tf.broadcast_to(1.0 - lam[:, None], own)], 1)
    out_boxes, out_classes, out_num, out_w = compact(cat_boxes, cat_classes, cat_keep,
                                                     max_boxes, weights)
    return (out_images, tf.ensure_shape(out_boxes, boxes.shape), out_classes, out_num, out_w)
