"""Detection batch composition (L4): padded boxes, mosaic, detection mixup.

Padded layout (what the pipeline's detection elements carry): ``boxes`` [B, N, 4]
normalized yxyx, ``classes`` [B, N] int, ``num_boxes`` [B] int32; rows at index >=
num_boxes are padding: box 0, class -1. Ops keep N (= max_boxes) and keep valid
boxes first, in order. Everything is vectorized over the batch (batched kernels,
gathers and masks; no per-sample Python loop) and drawn from ONE batch seed.
"""

from __future__ import annotations

import tensorflow as tf

from tfpipe.augment.boxes import transform_boxes
from tfpipe.augment.geometry import affine, compose, scale_matrix, split_seeds, translate_matrix
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
    at the centre lines; uncovered canvas gets `fill_value`. Boxes follow their tile's
    matrix, are clipped to the canvas, filtered (min_visibility, min_area in output
    pixels) and re-padded to N. Shapes and dtypes are unchanged.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    if not 0.0 < center_range[0] <= center_range[1] < 1.0:
        raise ValueError(f"center_range must satisfy 0 < low <= high < 1, got {center_range}")
    images = tf.convert_to_tensor(images)
    boxes = tf.convert_to_tensor(boxes, tf.float32)
    classes = tf.convert_to_tensor(classes)
    shape = tf.shape(images)
    b, h, w = shape[0], shape[1], shape[2]
    max_boxes = boxes.shape[1] if boxes.shape[1] is not None else tf.shape(boxes)[1]
    hf, wf = tf.cast(h, tf.float32), tf.cast(w, tf.float32)
    seeds = split_seeds(seed, 6)
    partners = [tf.range(b)] + [_permutation(seeds[i], b) for i in range(1, 4)]
    cxy = tf.random.stateless_uniform(tf.stack([b, 2]), seeds[4], center_range[0],
                                      center_range[1], alg=ALG)
    cx = tf.round(cxy[:, 0] * wf)  # edge coordinates (pixel boundaries)
    cy = tf.round(cxy[:, 1] * hf)
    apply = tf.random.stateless_uniform(tf.reshape(b, [1]), seeds[5], alg=ALG) < p
    # pixel centre x maps to the edge coordinate x + 0.5; left half of the canvas: x + 0.5 < cx
    xs = tf.range(w, dtype=tf.float32)[None, None, :] + 0.5
    ys = tf.range(h, dtype=tf.float32)[None, :, None] + 0.5
    left = xs < cx[:, None, None]
    top = ys < cy[:, None, None]
    quadrant_masks = [top & left, top & ~left, ~top & left, ~top & ~left]
    # tile offsets in edge coordinates: X_out = scale * X_src + t
    sw, sh = scale * wf, scale * hf
    offsets = [(cx - sw, cy - sh), (cx, cy - sh), (cx - sw, cy), (cx, cy)]
    canvas = tf.fill(tf.shape(images), tf.cast(fill_value, images.dtype))
    all_boxes, all_classes, all_keep = [], [], []
    valid = valid_mask(num_boxes, max_boxes)
    for q in range(4):
        idx = partners[q]
        tx, ty = offsets[q]
        # edge -> centre conversion: x_c = X - 0.5, so x_o = scale*(x + 0.5) + t - 0.5
        m = compose(translate_matrix(tf.fill([b], 0.5), tf.fill([b], 0.5)),
                    scale_matrix(tf.fill([b], scale)),
                    translate_matrix(tx - 0.5, ty - 0.5))
        tile = affine(tf.gather(images, idx), m, (h, w), "bilinear", "constant", fill_value)
        canvas = tf.where(quadrant_masks[q][..., None], tile, canvas)
        tb, keep = transform_boxes(tf.gather(boxes, idx), m, (h, w), (h, w),
                                   min_visibility, min_area)
        all_boxes.append(tb)
        all_classes.append(tf.gather(classes, idx))
        all_keep.append(keep & tf.gather(valid, idx))
    new_boxes, new_classes, new_num = compact(tf.concat(all_boxes, 1), tf.concat(all_classes, 1),
                                              tf.concat(all_keep, 1), max_boxes)
    new_boxes = tf.ensure_shape(new_boxes, boxes.shape)
    out_images = tf.where(apply[:, None, None, None], canvas, images)
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
    seeds = split_seeds(seed, 3)
    perm = _permutation(seeds[0], b)
    lam = _sample_beta(seeds[1], alpha, b)
    apply = tf.random.stateless_uniform(tf.reshape(b, [1]), seeds[2], alg=ALG) < p
    lam = tf.where(apply, lam, 1.0)
    out_images = _blend(images, tf.gather(images, perm), lam)
    valid = valid_mask(num_boxes, max_boxes)
    partner_valid = tf.gather(valid, perm) & apply[:, None]
    cat_boxes = tf.concat([boxes, tf.gather(boxes, perm)], 1)
    cat_classes = tf.concat([classes, tf.gather(classes, perm)], 1)
    cat_keep = tf.concat([valid, partner_valid], 1)
    weights = tf.concat([tf.broadcast_to(lam[:, None], tf.shape(valid)),
                         tf.broadcast_to(1.0 - lam[:, None], tf.shape(valid))], 1)
    out_boxes, out_classes, out_num, out_w = compact(cat_boxes, cat_classes, cat_keep,
                                                     max_boxes, weights)
    return (out_images, tf.ensure_shape(out_boxes, boxes.shape), out_classes, out_num, out_w)
