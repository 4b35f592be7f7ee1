"""Instance masks cropped to their boxes at a fixed size (Mask R-CNN's target form).

Layout: one mask per object, ``[N, Sh, Sw]`` per sample or ``[B, N, Sh, Sw]`` per batch,
uint8 (the source PNG's values: 1 = object, 0 = not), row k aligned with box k of the
padded box layout (`detection.pad_boxes`); padding rows are all 0. The mask of an
object covers exactly its (output, clipped) box: crop pixel (i, j) is centred at the
box point ``((i + 0.5) / Sh, (j + 0.5) / Sw)`` of the box, i.e. the crop is the image
through the box-crop matrix ``crop_matrix((y0 H, x0 W), ((y1 - y0) H, (x1 - x0) W),
(Sh, Sw))`` (boxes.py: normalized box edges on pixel edges).

Nearest, exactly: a crop pixel takes the source pixel at ``floor(v + 0.5 + TIE)`` per
axis, where v is its source coordinate (geometry.py's convention: pixel centres at
integers) through the inverse of (box-crop matrix o the chain's matrix), computed in
float64 from the float32 matrix and boxes; a coordinate within TIE (1e-6 px) of a
half-pixel goes to the higher index, so float error never flips a tie (a box that is
twice its crop size puts EVERY sample on a tie). Outside the source: 0.

- `box_crop_coords` / `crop_instance_masks`: one resample from the full-size source
  masks (the pipeline decodes and samples one object at a time: `crop_coords` +
  `sample_mask`);
- `mosaic_instance_masks`: the masks of `detection.mosaic` (same seed, same draws):
  each kept object's new crop is the sub-window of its old crop that its new clipped
  box covers, resampled nearest to the same size (one gather per batch);
- `mixup_instance_masks`: the masks of `detection.detection_mixup` (own, then the
  partner's, cut to N as the boxes are);
- `compact_masks`: `detection.compact`'s reordering applied to masks.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from tfpipe.augment.detection import mixup_partners, mosaic_draws, mosaic_tiles
from tfpipe.augment.geometry import Size

__all__ = ["TIE", "box_crop_coords", "crop_instance_masks", "sample_mask", "compact_masks",
           "mosaic_instance_masks", "mixup_instance_masks"]

#: Half-pixel ties within this many pixels go to the higher index (module docstring).
TIE = 1e-6


def _nearest(v: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.floor(v + (0.5 + TIE)), tf.int32)


def _inverse(m: tf.Tensor) -> tf.Tensor:
    """Inverse of [..., 3, 3] float64 matrices by the adjugate (elementwise ops only:
    no host-dependent LU pivoting or reduction order)."""
    a = [[m[..., i, j] for j in range(3)] for i in range(3)]

    def cof(i: int, j: int) -> tf.Tensor:
        r = [k for k in range(3) if k != i]
        c = [k for k in range(3) if k != j]
        return a[r[0]][c[0]] * a[r[1]][c[1]] - a[r[0]][c[1]] * a[r[1]][c[0]]

    det = a[0][0] * cof(0, 0) - a[0][1] * cof(0, 1) + a[0][2] * cof(0, 2)
    # inverse[i][j] = cofactor(j, i) * (-1)^(i+j) / det
    rows = [tf.stack([cof(j, i) * (1.0 if (i + j) % 2 == 0 else -1.0) / det
                      for j in range(3)], -1) for i in range(3)]
    return tf.stack(rows, -2)


def box_crop_coords(matrix: tf.Tensor, boxes: tf.Tensor, output_size: Size,
                    mask_size: Sequence[int]) -> tuple[tf.Tensor, tf.Tensor]:
    """Source pixel indices (iy, ix), int32 [N, Sh, Sw] each, of every crop pixel of
    every box: `boxes` [N, 4] normalized yxyx in the OUTPUT image of `output_size`
    (H, W) that `matrix` (source -> output, [3, 3]) renders. Indices may lie outside
    the source (then the crop pixel is 0)."""
    sh, sw = int(mask_size[0]), int(mask_size[1])
    m = tf.cast(tf.convert_to_tensor(matrix), tf.float64)
    inv = _inverse(m)
    size = tf.cast(tf.convert_to_tensor(output_size), tf.float64)
    boxes = tf.cast(tf.reshape(tf.convert_to_tensor(boxes), [-1, 4]), tf.float64)
    y0, x0, y1, x1 = (boxes[:, k] for k in range(4))
    fy = (tf.range(sh, dtype=tf.float64) + 0.5) / sh
    fx = (tf.range(sw, dtype=tf.float64) + 0.5) / sw
    # crop pixel centres in the output image's centre coordinates
    oy = (y0[:, None] + fy[None, :] * (y1 - y0)[:, None]) * size[0] - 0.5   # [N, Sh]
    ox = (x0[:, None] + fx[None, :] * (x1 - x0)[:, None]) * size[1] - 0.5   # [N, Sw]
    oy, ox = oy[:, :, None], ox[:, None, :]
    den = inv[2, 0] * ox + inv[2, 1] * oy + inv[2, 2]
    sx = (inv[0, 0] * ox + inv[0, 1] * oy + inv[0, 2]) / den
    sy = (inv[1, 0] * ox + inv[1, 1] * oy + inv[1, 2]) / den
    return _nearest(sy), _nearest(sx)


def sample_mask(mask: tf.Tensor, iy: tf.Tensor, ix: tf.Tensor) -> tf.Tensor:
    """One source mask [h, w] (or [h, w, 1]) at the indices of one box
    (`box_crop_coords`'s [Sh, Sw] rows): uint8 [Sh, Sw], 0 outside the source."""
    mask = tf.convert_to_tensor(mask)
    if mask.shape.rank == 3:
        mask = mask[..., 0]
    shape = tf.shape(mask)
    h, w = shape[0], shape[1]
    inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    flat = tf.reshape(mask, [-1])
    idx = tf.clip_by_value(iy, 0, h - 1) * w + tf.clip_by_value(ix, 0, w - 1)
    return tf.where(inside, tf.gather(flat, idx), tf.zeros([], mask.dtype))


def crop_instance_masks(masks: tf.Tensor, matrix: tf.Tensor, boxes: tf.Tensor,
                        output_size: Size, mask_size: Sequence[int] = (28, 28)) -> tf.Tensor:
    """Full-size source masks [N, h, w] (or [N, h, w, 1]) of the objects whose OUTPUT
    boxes are `boxes` [N, 4] (normalized yxyx, in the `output_size` image `matrix`
    renders) -> their box crops [N, Sh, Sw], one nearest resample from the source."""
    masks = tf.convert_to_tensor(masks)
    if masks.shape.rank == 4:
        masks = masks[..., 0]
    iy, ix = box_crop_coords(matrix, boxes, output_size, mask_size)
    return tf.map_fn(lambda a: sample_mask(*a), (masks, iy, ix),
                     fn_output_signature=tf.TensorSpec([int(mask_size[0]), int(mask_size[1])],
                                                       masks.dtype))


def compact_masks(masks: tf.Tensor, keep: tf.Tensor, max_boxes: int) -> tf.Tensor:
    """`detection.compact` on masks [B, M, Sh, Sw]: kept rows first (stable, the same
    order as the boxes), cut to max_boxes, the rest 0."""
    order = tf.argsort(tf.cast(~keep, tf.int32), axis=1, stable=True)[:, :max_boxes]
    k = tf.gather(keep, order, batch_dims=1)
    picked = tf.gather(masks, order, batch_dims=1)
    return tf.where(k[:, :, None, None], picked, tf.zeros([], masks.dtype))


def _max_boxes(boxes: tf.Tensor) -> int | tf.Tensor:
    return boxes.shape[1] if boxes.shape[1] is not None else tf.shape(boxes)[1]


def mosaic_instance_masks(masks: tf.Tensor, boxes: tf.Tensor, num_boxes: tf.Tensor,
                          image_hw: Size, seed: tf.Tensor, p: float = 1.0, scale: float = 0.5,
                          center_range: tuple[float, float] = (0.25, 0.75),
                          min_visibility: float = 0.1, min_area: float = 4.0,
                          **_: object) -> tf.Tensor:
    """The instance masks of `mosaic(images, boxes, classes, num_boxes, seed, p, scale,
    center_range, min_visibility=..., min_area=...)` for the same batch (`boxes`,
    `num_boxes`: the INPUT boxes; `image_hw`: the batch's image (H, W)): the same
    partners, centre and apply draws, the same tile matrices, keep and order. Each kept
    object's crop is its old crop's sub-window under its new clipped box, nearest
    (`TIE` rule, float64): `compact`'s order on the candidates, then ONE gather of the
    kept crops' pixels for the whole batch. Other keyword arguments of `mosaic`
    (fill_value) are accepted and do not matter."""
    masks = tf.convert_to_tensor(masks)
    boxes = tf.convert_to_tensor(boxes, tf.float32)
    mshape = tf.shape(masks)
    sh, sw = mshape[2], mshape[3]
    b = tf.shape(masks)[0]
    h, w = (tf.cast(v, tf.int32) for v in (image_hw[0], image_hw[1]))
    hf, wf = tf.cast(h, tf.float32), tf.cast(w, tf.float32)
    max_boxes = _max_boxes(boxes)
    partners, cx, cy, apply = mosaic_draws(seed, b, h, w, p, center_range)
    objs, rows, cols, keeps = [], [], [], []
    fy = (tf.range(sh, dtype=tf.float64) + 0.5) / tf.cast(sh, tf.float64)
    fx = (tf.range(sw, dtype=tf.float64) + 0.5) / tf.cast(sw, tf.float64)
    s64 = tf.cast(tf.constant(scale, tf.float32), tf.float64)  # the tiles' float32 scale
    for tile in mosaic_tiles(boxes, num_boxes, (h, w), partners, cx, cy, scale,
                             min_visibility, min_area):
        idx, (tx, ty) = tile.partners, tile.offset
        keeps.append(tile.keep)
        objs.append(tf.cast(idx, tf.int32)[:, None] * max_boxes + tf.range(max_boxes)[None, :])
        o64, n64 = tf.cast(tf.gather(boxes, idx), tf.float64), tf.cast(tile.boxes, tf.float64)
        # edge coordinates: X_canvas = scale * X_old + t (pixels), normalized here
        t64 = [tf.cast(v, tf.float64)[:, None, None] for v in (ty, tx)]
        for a, (f, n_out, size, axis) in enumerate(((fy, sh, hf, rows), (fx, sw, wf, cols))):
            size64 = tf.cast(size, tf.float64)
            lo, hi = n64[..., a][..., None], n64[..., a + 2][..., None]       # [B, N, 1]
            canvas = (lo + f[None, None, :] * (hi - lo)) * size64            # [B, N, S]
            old_norm = (canvas - t64[a]) / (s64 * size64)
            olo, ohi = o64[..., a][..., None], o64[..., a + 2][..., None]
            u = tf.math.divide_no_nan(old_norm - olo, ohi - olo) * tf.cast(n_out, tf.float64) - 0.5
            axis.append(tf.clip_by_value(_nearest(u), 0, n_out - 1))
    # `compact`'s order on the 4N candidates first, then ONE gather of the N crops kept
    keep = tf.concat(keeps, 1)
    order = tf.argsort(tf.cast(~keep, tf.int32), axis=1, stable=True)[:, :max_boxes]
    k = tf.gather(keep, order, batch_dims=1)
    obj = tf.gather(tf.concat(objs, 1), order, batch_dims=1)                 # [B, N]
    iy = tf.gather(tf.concat(rows, 1), order, batch_dims=1)                  # [B, N, Sh]
    ix = tf.gather(tf.concat(cols, 1), order, batch_dims=1)                  # [B, N, Sw]
    flat = (obj[:, :, None, None] * sh + iy[:, :, :, None]) * sw + ix[:, :, None, :]
    picked = tf.gather(tf.reshape(masks, [-1]), flat)
    new_masks = tf.where(k[:, :, None, None], picked, tf.zeros([], masks.dtype))
    out = tf.where(apply[:, None, None, None], new_masks, masks)
    return tf.ensure_shape(out, masks.shape)


def mixup_instance_masks(masks: tf.Tensor, num_boxes: tf.Tensor, seed: tf.Tensor,
                         p: float = 1.0, **_: object) -> tf.Tensor:
    """The instance masks of `detection_mixup(images, boxes, classes, num_boxes, seed,
    alpha, p)`: own masks, then the partner's (when applied), compacted as the boxes
    (alpha does not matter to them)."""
    masks = tf.convert_to_tensor(masks)
    max_boxes = masks.shape[1] if masks.shape[1] is not None else tf.shape(masks)[1]
    perm, _, keep = mixup_partners(seed, num_boxes, max_boxes, p)
    out = compact_masks(tf.concat([masks, tf.gather(masks, perm)], 1), keep, max_boxes)
    return tf.ensure_shape(out, masks.shape)
