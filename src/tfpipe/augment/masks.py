"""Class masks (semantic segmentation): the image's geometry on a class map.

A mask is an integer ``[H, W, 1]`` (or ``[B, H, W, 1]``) map, one class index per
pixel; ``ignore_label`` (255 by default) marks pixels without a class. Masks
follow the image through the SAME 3x3 matrix (geometry.py's convention: source
pixel centres -> output pixel centres) but are resampled nearest, so no pixel
ever gets a class its neighbours do not have, and what falls outside the source
gets ``ignore_label``:

- `warp_mask`: one nearest resample through a matrix (`affine`'s kernel);
- `letterbox_window` / `letterbox_matrix` / `letterbox_image`: the eval rendering
  (the whole image scaled to fit, centred, padded), its matrix (serving inverts
  it) and the image side of it;
- `mosaic_masks`: the masks of `mosaic` (same seed, same draws, nearest taps);
- `cutmix_with_masks`: cutmix's box pasted into the image and the mask alike.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from tfpipe.augment.batch import paste_boxes, sample_cutmix
from tfpipe.augment.detection import mosaic_draws, mosaic_taps
from tfpipe.augment.geometry import Size, affine, compose, resize_matrix, translate_matrix

__all__ = ["IGNORE_LABEL", "warp_mask", "letterbox_window", "letterbox_matrix",
           "letterbox_image", "mosaic_masks", "cutmix_with_masks"]

IGNORE_LABEL = 255


def warp_mask(mask: tf.Tensor, matrix: tf.Tensor, output_size: Size | None = None,
              ignore_label: int = IGNORE_LABEL, fill_mode: str = "constant") -> tf.Tensor:
    """`mask` through `matrix`, nearest: output pixel centre p takes the source pixel
    at round(M^-1 p) (half away from zero, as `affine`'s nearest kernel), or
    `ignore_label` where that lies outside the source (fill_mode "constant"; the
    other fill modes mirror / replicate the mask as they do the image)."""
    return affine(mask, matrix, output_size, "nearest", fill_mode, float(ignore_label))


def letterbox_window(size: Size, output_size: Sequence[int]) -> tf.Tensor:
    """(top, left, height, width), int32 [4]: where an image of `size` (h, w) lands in
    `output_size` (H, W) when scaled to FIT keeping its aspect (scale = min(H/h, W/w),
    each side rounded to whole pixels, at least 1) and centred (padding split evenly,
    the odd pixel at the bottom / right)."""
    hw = tf.cast(tf.convert_to_tensor(size), tf.float64)
    out = tf.constant([float(output_size[0]), float(output_size[1])], tf.float64)
    scale = tf.reduce_min(out / hw)
    nhw = tf.clip_by_value(tf.round(hw * scale), 1.0, out)
    top_left = tf.math.floordiv(out - nhw, 2.0)
    return tf.cast(tf.concat([top_left, nhw], 0), tf.int32)


def letterbox_matrix(size: Size, output_size: Sequence[int]) -> tf.Tensor:
    """The 3x3 matrix of the letterbox: the whole image resized (`resize_matrix`'s
    half-pixel convention) onto `letterbox_window`. Invert it to map the output (or
    a model's per-pixel answer) back to the source image."""
    win = letterbox_window(size, output_size)
    return compose(resize_matrix(size, win[2:]), translate_matrix(win[1], win[0]))


def letterbox_image(image: tf.Tensor, output_size: Sequence[int],
                    fill_value: float = 0.0) -> tf.Tensor:
    """An [h, w, C] image letterboxed into `output_size`: resized bilinear (half-pixel
    centres, `tf.image.resize`; integer images rounded and saturated back) onto
    `letterbox_window`, the rest `fill_value`. The same pixels as warping with
    `letterbox_matrix` inside the window, without blending the border with the fill."""
    image = tf.convert_to_tensor(image)
    shape = tf.shape(image)
    win = letterbox_window(shape[:2], output_size)
    out = tf.image.resize(image, win[2:], method="bilinear")
    if image.dtype.is_integer:
        out = tf.saturate_cast(tf.round(out), image.dtype)
    else:
        out = tf.cast(out, image.dtype)
    h, w = int(output_size[0]), int(output_size[1])
    pad = [[win[0], h - win[0] - win[2]], [win[1], w - win[1] - win[3]], [0, 0]]
    out = tf.pad(out, pad, constant_values=tf.cast(fill_value, image.dtype))
    return tf.ensure_shape(out, [h, w, image.shape[-1]])


def mosaic_masks(masks: tf.Tensor, seed: tf.Tensor, p: float = 1.0, scale: float = 0.5,
                 center_range: tuple[float, float] = (0.25, 0.75),
                 ignore_label: int = IGNORE_LABEL) -> tf.Tensor:
    """The masks of `mosaic(images, ..., seed, p, scale, center_range)` for the same
    batch: the same partners, centre and apply draws, each output pixel from its own
    tile's nearest source pixel (the bilinear taps of `mosaic_taps` rounded half up:
    t0 + (w1 >= 128)), `ignore_label` where that is outside the tile's image (the
    canvas the image fills with `fill_value`)."""
    masks = tf.convert_to_tensor(masks)
    shape = tf.shape(masks)
    b, h, w = shape[0], shape[1], shape[2]
    partners, cx, cy, apply = mosaic_draws(seed, b, h, w, p, center_range)
    cxi, cyi = tf.cast(cx, tf.int32), tf.cast(cy, tf.int32)
    x0, wx = mosaic_taps(cxi, w, scale)
    y0, wy = mosaic_taps(cyi, h, scale)
    xs = x0 + tf.cast(wx >= 128, tf.int32)  # [B, W]
    ys = y0 + tf.cast(wy >= 128, tf.int32)  # [B, H]
    top = tf.range(h)[None, :] < cyi[:, None]
    left = tf.range(w)[None, :] < cxi[:, None]
    # tiles: 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right (as `mosaic`)
    tile = tf.where(top, 0, 2)[:, :, None] + tf.where(left, 0, 1)[:, None, :]  # [B, H, W]
    src = tf.gather(tf.transpose(tf.cast(tf.stack(partners), tf.int32)), tile, batch_dims=1)
    inside = (((ys >= 0) & (ys < h))[:, :, None]) & (((xs >= 0) & (xs < w))[:, None, :])
    yy = tf.broadcast_to(tf.clip_by_value(ys, 0, h - 1)[:, :, None], tf.shape(tile))
    xx = tf.broadcast_to(tf.clip_by_value(xs, 0, w - 1)[:, None, :], tf.shape(tile))
    picked = tf.gather_nd(masks, tf.stack([src, yy, xx], axis=-1))
    out = tf.where(inside[..., None], picked, tf.cast(ignore_label, masks.dtype))
    out = tf.where(apply[:, None, None, None], out, masks)
    return tf.ensure_shape(out, masks.shape)


def cutmix_with_masks(images: tf.Tensor, masks: tf.Tensor, seed: tf.Tensor,
                      alpha: float = 1.0, p: float = 1.0) -> tuple[tf.Tensor, tf.Tensor]:
    """CutMix for segmentation: `cutmix`'s draws (`sample_cutmix`, the same seed gives
    the same partners and boxes), the partner's box pasted into the image AND the
    mask (the labels are the pasted pixels' own: no label weights)."""
    shape = tf.shape(images)
    perm, boxes, _ = sample_cutmix(seed, shape[0], shape[1], shape[2], alpha, p)
    return (paste_boxes(images, tf.gather(images, perm), boxes),
            paste_boxes(masks, tf.gather(masks, perm), boxes))
