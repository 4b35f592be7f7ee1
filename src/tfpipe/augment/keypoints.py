"""Keypoints through geometry: the image's matrix, visibility, the left/right swap.

Layout: ``[..., N, K, 3]`` float32 rows ``(y, x, visibility)`` per object and point,
y / x normalized like the boxes (``x = x_pixels / W``: COCO's continuous pixel
coordinates, 0 at the image's left EDGE), visibility COCO's 0 absent / 1 occluded /
2 visible. An absent point, and every padding row, is ``(0, 0, 0)``.

In the matrix system (pixel centres at integers, `tfpipe.augment.boxes`) a point
is ``x_c = x * W - 0.5``; after the matrix ``x_out = (x_c' + 0.5) / W_out``, the
rule `transform_boxes` applies to box edges, so a point on a box corner stays on
it. A point whose output lies outside ``[0, 1]`` (either axis) becomes absent.

A mirror (the matrix's 2x2 part has a negative determinant: a horizontal OR a
vertical flip, alone or composed; rot90 and rotations never mirror) applies the
left/right permutation (`keypoint_flip_permutation`), so ``left_eye`` stays the
subject's left eye (the OD API's ``keypoint_flip_permutation``).
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from tfpipe.augment.boxes import Size
from tfpipe.augment.detection import compact, mixup_partners, mosaic_draws, mosaic_tiles

__all__ = ["LEFT", "RIGHT", "keypoint_flip_permutation", "transform_keypoints",
           "pad_keypoints", "mosaic_keypoints", "mixup_keypoints"]

#: The name prefixes `keypoint_flip_permutation` pairs (COCO's names use these).
LEFT, RIGHT = "left_", "right_"


def keypoint_flip_permutation(names: Sequence[str],
                              pairs: Sequence[Sequence[int]] | None = None) -> list[int]:
    """perm[i] = the point that takes point i's place after a mirror.

    `pairs` None: ``left_X`` <-> ``right_X`` by name (only these two prefixes; a
    name without its partner maps to itself); else the given index pairs (each index
    in range, none twice: ValueError naming the pair)."""
    k = len(names)
    perm = list(range(k))
    if pairs is None:
        index = {n: i for i, n in enumerate(names)}
        for i, n in enumerate(names):
            if n.startswith(LEFT) and RIGHT + n[len(LEFT):] in index:
                j = index[RIGHT + n[len(LEFT):]]
                perm[i], perm[j] = j, i
        return perm
    seen: set[int] = set()
    for pair in pairs:
        if len(pair) != 2:
            raise ValueError(f"pair {list(pair)}: needs two point indices")
        i, j = int(pair[0]), int(pair[1])
        for v in (i, j):
            if not 0 <= v < k:
                raise ValueError(f"pair {[i, j]}: index {v} is out of range; allowed: "
                                 f"0..{k - 1} ({k} keypoints)")
        if i == j or i in seen or j in seen:
            raise ValueError(f"pair {[i, j]}: a point may appear in one pair only, once")
        seen.update((i, j))
        perm[i], perm[j] = j, i
    return perm


def _mirrors(m: tf.Tensor) -> tf.Tensor:
    """The matrix (or [B] matrices) mirrors: det of the 2x2 linear part < 0."""
    return (m[..., 0, 0] * m[..., 1, 1] - m[..., 0, 1] * m[..., 1, 0]) < 0.0


def transform_keypoints(keypoints: tf.Tensor, matrix: tf.Tensor, image_size: Size,
                        output_size: Size | None = None,
                        flip_permutation: Sequence[int] | None = None) -> tf.Tensor:
    """Map ``[N, K, 3]`` (with a [3, 3] matrix) or ``[B, N, K, 3]`` (with [3, 3] or
    [B, 3, 3]) keypoints through `matrix`; absent points and points that leave the
    output become ``(0, 0, 0)``; a mirroring matrix applies `flip_permutation`."""
    kp = tf.convert_to_tensor(keypoints, tf.float32)
    m = tf.convert_to_tensor(matrix, tf.float32)
    in_size = tf.cast(tf.convert_to_tensor(image_size), tf.float32)
    out_size = in_size if output_size is None else tf.cast(
        tf.convert_to_tensor(output_size), tf.float32)
    h, w, oh, ow = in_size[0], in_size[1], out_size[0], out_size[1]
    y, x, v = kp[..., 0], kp[..., 1], kp[..., 2]
    xc, yc = x * w - 0.5, y * h - 0.5
    if m.shape.rank == 3:  # per-sample matrices: [B,1,1] entries
        def e(i: int, j: int) -> tf.Tensor:
            return m[:, i, j][:, None, None]
    else:
        def e(i: int, j: int) -> tf.Tensor:
            return m[i, j]
    den = e(2, 0) * xc + e(2, 1) * yc + e(2, 2)
    nx = ((e(0, 0) * xc + e(0, 1) * yc + e(0, 2)) / den + 0.5) / ow
    ny = ((e(1, 0) * xc + e(1, 1) * yc + e(1, 2)) / den + 0.5) / oh
    inside = (v > 0) & (nx >= 0.0) & (nx <= 1.0) & (ny >= 0.0) & (ny <= 1.0)
    out = tf.where(inside[..., None], tf.stack([ny, nx, v], axis=-1), 0.0)
    perm = None if flip_permutation is None else [int(i) for i in flip_permutation]
    if perm is not None and perm != list(range(len(perm))):
        swapped = tf.gather(out, tf.constant(perm, tf.int32), axis=-2)
        mirror = _mirrors(m)
        mirror = mirror[:, None, None, None] if m.shape.rank == 3 else mirror
        out = tf.where(mirror, swapped, out)
    return out


def pad_keypoints(keypoints: tf.Tensor, max_boxes: int) -> tf.Tensor:
    """``[N, K, 3]`` -> ``[max_boxes, K, 3]``: the first `max_boxes` objects (as
    `pad_boxes` keeps them), zero padding rows."""
    kp = tf.convert_to_tensor(keypoints, tf.float32)[:max_boxes]
    out = tf.pad(kp, [[0, max_boxes - tf.shape(kp)[0]], [0, 0], [0, 0]])
    return tf.ensure_shape(out, [max_boxes, keypoints.shape[1], 3])


def _compact(kp: tf.Tensor, keep: tf.Tensor, max_boxes: int) -> tf.Tensor:
    """Kept rows first (stable), cut, zero padding: `detection.compact`'s order."""
    b, n, k = tf.shape(kp)[0], tf.shape(kp)[1], kp.shape[2]
    flat = tf.reshape(kp, tf.stack([b, n, k * 3]))
    rows, _, _ = compact(flat, tf.zeros(tf.stack([b, n]), tf.int32), keep, max_boxes)
    return tf.reshape(rows, tf.stack([b, -1, k, 3]))


def mosaic_keypoints(keypoints: tf.Tensor, boxes: tf.Tensor, num_boxes: tf.Tensor,
                     seed: tf.Tensor, image_size: tuple[tf.Tensor, tf.Tensor] | Size,
                     p: float = 1.0, scale: float = 0.5,
                     center_range: tuple[float, float] = (0.25, 0.75),
                     min_visibility: float = 0.1, min_area: float = 4.0) -> tf.Tensor:
    """The keypoints ``[B, N, K, 3]`` of `tfpipe.augment.mosaic` called with the same
    batch (`boxes`, `num_boxes`, image_size = the batch's (H, W)), seed and params:
    the same draws (`mosaic_draws`), each tile's scale + translate, points outside
    their tile's cell become absent, and the objects mosaic keeps (the same box
    filter) in its order (`compact`). Samples mosaic leaves alone keep theirs."""
    kp = tf.convert_to_tensor(keypoints, tf.float32)
    boxes = tf.convert_to_tensor(boxes, tf.float32)
    h, w = image_size[0], image_size[1]
    b = tf.shape(kp)[0]
    max_boxes = kp.shape[1] if kp.shape[1] is not None else tf.shape(kp)[1]
    hf, wf = tf.cast(h, tf.float32), tf.cast(w, tf.float32)
    partners, cx, cy, apply = mosaic_draws(seed, b, h, w, p, center_range)
    # each tile's cell in normalized output coordinates (edges: the centre lines)
    ncx, ncy = cx / wf, cy / hf
    zero, one = tf.zeros_like(ncx), tf.ones_like(ncx)
    cells = [(zero, ncx, zero, ncy), (ncx, one, zero, ncy), (zero, ncx, ncy, one),
             (ncx, one, ncy, one)]
    all_kp, all_keep = [], []
    for tile, cell in zip(mosaic_tiles(boxes, num_boxes, (h, w), partners, cx, cy, scale,
                                       min_visibility, min_area), cells):
        t = transform_keypoints(tf.gather(kp, tile.partners), tile.matrix, (h, w), (h, w))
        x0, x1, y0, y1 = (c[:, None, None] for c in cell)
        ky, kx = t[..., 0], t[..., 1]
        in_cell = (kx >= x0) & (kx <= x1) & (ky >= y0) & (ky <= y1)
        all_kp.append(tf.where(in_cell[..., None], t, 0.0))  # (a tile never mirrors)
        all_keep.append(tile.keep)
    new = _compact(tf.concat(all_kp, 1), tf.concat(all_keep, 1), max_boxes)
    new = tf.ensure_shape(new, kp.shape)
    return tf.where(apply[:, None, None, None], new, kp)


def mixup_keypoints(keypoints: tf.Tensor, num_boxes: tf.Tensor, seed: tf.Tensor,
                    p: float = 1.0) -> tf.Tensor:
    """The keypoints of `tfpipe.augment.detection_mixup` with the same seed and p:
    own objects then the partner's (the same permutation), cut to N."""
    kp = tf.convert_to_tensor(keypoints, tf.float32)
    max_boxes = kp.shape[1] if kp.shape[1] is not None else tf.shape(kp)[1]
    perm, _, keep = mixup_partners(seed, num_boxes, max_boxes, p)
    out = _compact(tf.concat([kp, tf.gather(kp, perm)], 1), keep, max_boxes)
    return tf.ensure_shape(out, kp.shape)
