"""Boxes through geometry: canonical format, converters, transform + clip + filter.

Canonical format: normalized ``[ymin, xmin, ymax, xmax]`` in [0, 1] (TF Object
Detection API). Normalized box edges live on pixel EDGES: ``xmin * W`` is the left
edge of the first covered column. In the matrix system (pixel centres at integers)
that edge is the continuous coordinate ``x = xmin * W - 0.5``; after the matrix,
``x_norm_out = (x_out + 0.5) / W_out``. With this rule a crop-and-resize matrix
maps box edges exactly onto the resized pixel edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import tensorflow as tf

Size = Union[Sequence[int], tf.Tensor]

FORMATS = ("yxyx", "xyxy", "xywh", "yxyx_abs", "xyxy_abs", "xywh_abs")
_ALIASES = {"coco": "xywh_abs", "pascal_voc": "xyxy_abs", "tf": "yxyx"}


def _fmt(name: str, value: str) -> str:
    value = _ALIASES.get(value, value)
    if value not in FORMATS:
        raise ValueError(f"{name} must be one of {list(FORMATS) + list(_ALIASES)}, "
                         f"got {value!r}")
    return value


def convert(boxes: tf.Tensor, from_fmt: str, to_fmt: str,
            image_size: Size | None = None) -> tf.Tensor:
    """Convert boxes [..., 4] between formats.

    ``yxyx`` / ``xyxy`` / ``xywh`` are normalized to [0, 1]; the ``*_abs`` variants
    are in pixels (``coco`` = ``xywh_abs``, ``pascal_voc`` = ``xyxy_abs``), which need
    `image_size` (height, width) to convert to or from a normalized format.
    """
    src, dst = _fmt("from_fmt", from_fmt), _fmt("to_fmt", to_fmt)
    boxes = tf.convert_to_tensor(boxes, tf.float32)
    a, b, c, d = tf.unstack(boxes, axis=-1)
    layout = src.replace("_abs", "")
    if layout == "yxyx":
        y0, x0, y1, x1 = a, b, c, d
    elif layout == "xyxy":
        x0, y0, x1, y1 = a, b, c, d
    else:
        x0, y0, x1, y1 = a, b, a + c, b + d
    src_abs, dst_abs = src.endswith("_abs"), dst.endswith("_abs")
    if src_abs != dst_abs:
        if image_size is None:
            raise ValueError(f"converting {src!r} to {dst!r} needs image_size=(height, width)")
        size = tf.cast(tf.convert_to_tensor(image_size), tf.float32)
        h, w = size[..., 0], size[..., 1]
        if len(size.shape) and size.shape.rank > 1:
            h, w = h[..., None], w[..., None]
        if src_abs:
            x0, x1, y0, y1 = x0 / w, x1 / w, y0 / h, y1 / h
        else:
            x0, x1, y0, y1 = x0 * w, x1 * w, y0 * h, y1 * h
    layout = dst.replace("_abs", "")
    if layout == "yxyx":
        out = [y0, x0, y1, x1]
    elif layout == "xyxy":
        out = [x0, y0, x1, y1]
    else:
        out = [x0, y0, x1 - x0, y1 - y0]
    return tf.stack(out, axis=-1)


def area(boxes: tf.Tensor) -> tf.Tensor:
    """Area of yxyx boxes (0 for empty or inverted boxes)."""
    y0, x0, y1, x1 = tf.unstack(tf.convert_to_tensor(boxes, tf.float32), axis=-1)
    return tf.maximum(y1 - y0, 0.0) * tf.maximum(x1 - x0, 0.0)


def transform_boxes(boxes: tf.Tensor, matrix: tf.Tensor, image_size: Size,
                    output_size: Size | None = None, min_visibility: float = 0.0,
                    min_area: float = 0.0) -> tuple[tf.Tensor, tf.Tensor]:
    """Map normalized yxyx boxes through `matrix`; clip to the output; flag survivors.

    boxes [N,4] with matrix [3,3], or [B,N,4] with [3,3] or [B,3,3]. Each box's four
    corners are mapped and the axis-aligned box around them is taken (so a rotated
    box grows to its bounding box), then clipped to [0, 1].
    keep = non-empty after clipping, visibility >= `min_visibility` (visibility =
    clipped area / unclipped transformed area), and clipped area in OUTPUT pixels
    >= `min_area`. Filter classes with the same `keep`. Returns (boxes, keep).
    """
    boxes = tf.convert_to_tensor(boxes, tf.float32)
    m = tf.convert_to_tensor(matrix, tf.float32)
    in_size = tf.cast(tf.convert_to_tensor(image_size), tf.float32)
    out_size = in_size if output_size is None else tf.cast(
        tf.convert_to_tensor(output_size), tf.float32)
    h, w = in_size[0], in_size[1]
    oh, ow = out_size[0], out_size[1]
    y0, x0, y1, x1 = tf.unstack(boxes, axis=-1)
    # edges -> continuous pixel-centre coordinates
    x0, x1 = x0 * w - 0.5, x1 * w - 0.5
    y0, y1 = y0 * h - 0.5, y1 * h - 0.5
    xs = tf.stack([x0, x1, x1, x0], axis=-1)   # [..., N, 4 corners]
    ys = tf.stack([y0, y0, y1, y1], axis=-1)
    if m.shape.rank == 3:  # per-sample matrices: [B,1,1] entries
        def e(i: int, j: int) -> tf.Tensor:
            return m[:, i, j][:, None, None]
    else:
        def e(i: int, j: int) -> tf.Tensor:
            return m[i, j]
    den = e(2, 0) * xs + e(2, 1) * ys + e(2, 2)
    tx = (e(0, 0) * xs + e(0, 1) * ys + e(0, 2)) / den
    ty = (e(1, 0) * xs + e(1, 1) * ys + e(1, 2)) / den
    nx0 = (tf.reduce_min(tx, -1) + 0.5) / ow
    nx1 = (tf.reduce_max(tx, -1) + 0.5) / ow
    ny0 = (tf.reduce_min(ty, -1) + 0.5) / oh
    ny1 = (tf.reduce_max(ty, -1) + 0.5) / oh
    full = tf.stack([ny0, nx0, ny1, nx1], axis=-1)
    clipped = tf.clip_by_value(full, 0.0, 1.0)
    full_area = area(full)
    clip_area = area(clipped)
    visibility = tf.math.divide_no_nan(clip_area, full_area)
    keep = (clip_area > 0.0) & (visibility >= min_visibility) & (clip_area * oh * ow >= min_area)
    return clipped, keep


def filter_boxes(boxes: tf.Tensor, classes: tf.Tensor, keep: tf.Tensor
                 ) -> tuple[tf.Tensor, tf.Tensor]:
    """Drop boxes (and their classes, aligned) where keep is False ([N] inputs)."""
    return tf.boolean_mask(boxes, keep), tf.boolean_mask(classes, keep)
