"""COCO objects beyond their boxes: instance masks and keypoints (detection records).

- Instance masks (`masks=True`): each kept box's `segmentation` (polygons, RLE counts
  list or compressed string) rasterized at the image's size exactly as pycocotools'
  `annToMask` (`tfpipe.convert._rasterize`), stored as a 0/1 single-channel PNG under
  `image/object/mask`, with COCO's `area` (the mask's pixel count when absent) and
  `iscrowd` (`image/object/is_crowd`).
- Keypoints: whenever a category names `keypoints`. All categories that name them
  must name the same list (and skeleton); objects of other categories get K points
  (0, 0, 0). y / x are normalized like the boxes; an absent point (v = 0), and a
  point outside the image (clip / drop policies; `raise` stops), is stored as
  (0, 0, 0), the pipeline's "not there".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tfpipe.convert._mask import encode_mask
from tfpipe.convert._rasterize import BadSegmentation, annotation_mask
from tfpipe.convert._source import BadInput
from tfpipe.errors import InputError


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def carries_mask(ann: dict[str, Any]) -> bool:
    """Whether an annotation holds a non-empty `segmentation` (polygons or RLE)."""
    segm = ann.get("segmentation")
    return bool(segm) and isinstance(segm, (list, dict))


def segmentation_problem(segm: Any, ann_id: str, why: str) -> str | None:
    """Why one annotation's `segmentation` cannot be rasterized (None: it can)."""
    if isinstance(segm, list):
        for poly in segm:
            if not isinstance(poly, list) or not all(
                    _is_number(v) and math.isfinite(v) for v in poly):
                return (f"annotation {ann_id}: a polygon must be a list of finite "
                        "numbers [x0, y0, x1, y1, ...]")
            if len(poly) % 2:
                return (f"annotation {ann_id}: a polygon has an odd number "
                        f"({len(poly)}) of coordinates")
        return None
    if isinstance(segm, dict):
        counts = segm.get("counts")
        if not isinstance(segm.get("size"), list) or not (
                isinstance(counts, str) or (isinstance(counts, list) and all(
                    isinstance(c, int) and not isinstance(c, bool) for c in counts))):
            return (f"annotation {ann_id}: an RLE segmentation needs 'size' [h, w] and "
                    "'counts' (a list of ints, or a compressed string)")
        return None
    return f"annotation {ann_id}: needs a 'segmentation' (polygons or RLE) for {why}"


def instance_mask(segm: Any, height: int, width: int, ann_id: str,
                  stats: dict[str, int]) -> np.ndarray:
    """One annotation's [height, width] bool mask (polygons under 3 points dropped and
    counted, as for class masks); raises BadInput."""
    if isinstance(segm, list):
        kept = [p for p in segm if len(p) >= 6]
        stats["polygons_dropped"] = stats.get("polygons_dropped", 0) + len(segm) - len(kept)
        segm = kept
    try:
        return annotation_mask(segm, height, width)
    except BadSegmentation as exc:
        raise BadInput(f"annotation {ann_id}: {exc}") from None


def mask_values(masks: list[np.ndarray]) -> list[bytes]:
    """The `image/object/mask` values: one 0/1 8-bit PNG per object."""
    return [encode_mask(m.astype(np.uint8)) for m in masks]


# ----------------------------------------------------------------------------- keypoints
def keypoint_spec(categories: list[dict[str, Any]], path: str
                  ) -> tuple[list[str], list[list[int]], set[int]]:
    """(names, 0-based skeleton, ids of the categories that name them) from COCO's
    `categories`; ([], [], set()) when none names keypoints; raises InputError when two
    categories name different lists or skeletons, or a skeleton is not index pairs."""
    names: list[str] = []
    skeleton: list[list[int]] = []
    first: dict[str, Any] | None = None
    with_points: set[int] = set()
    for cat in categories:
        kps = cat.get("keypoints")
        if kps is None or kps == []:
            continue
        what = f"category {cat.get('name', cat['id'])!r} (id {cat['id']})"
        if not isinstance(kps, list) or not all(isinstance(n, str) and n for n in kps):
            raise InputError(f"{path}: {what}: 'keypoints' must be a list of names")
        if len(set(kps)) != len(kps):
            raise InputError(f"{path}: {what}: 'keypoints' names a point twice")
        bones = cat.get("skeleton") or []
        if not isinstance(bones, list) or not all(
                isinstance(b, list) and len(b) == 2 and all(
                    isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= len(kps)
                    for i in b) for b in bones):
            raise InputError(f"{path}: {what}: 'skeleton' must be a list of [i, j] pairs of "
                             f"1-based keypoint indices (1..{len(kps)})")
        bones0 = [[i - 1, j - 1] for i, j in bones]
        if first is None:
            first, names, skeleton = cat, list(kps), bones0
        elif kps != names or bones0 != skeleton:
            other = f"category {first.get('name', first['id'])!r} (id {first['id']})"
            if kps != names:
                raise InputError(f"{path}: {what} names keypoints {kps}, {other} names "
                                 f"{names}; records hold one keypoint list (K points per "
                                 "object): convert these categories separately")
            raise InputError(f"{path}: {what} and {other} name the same keypoints with "
                             f"different skeletons ({bones} vs {first.get('skeleton')}); "
                             "records hold one skeleton")
        with_points.add(cat["id"])
    return names, skeleton, with_points


def keypoint_entry(ann: dict[str, Any], ann_id: str, k: int, named: bool
                   ) -> tuple[list[Any], str | None]:
    """An annotation's [x1, y1, v1, ...] for the plan (non-finite values as text, as the
    boxes; [] = all absent), or a reason it is bad."""
    kps = ann.get("keypoints")
    if not named or kps is None:
        return [], None
    if not isinstance(kps, list) or len(kps) != 3 * k or not all(_is_number(v) for v in kps):
        got = f"{len(kps)} values" if isinstance(kps, list) else type(kps).__name__
        return [], (f"annotation {ann_id}: 'keypoints' must be {3 * k} numbers "
                    f"[x1, y1, v1, ...] ({k} named points), got {got}")
    if any(v not in (0, 1, 2) for v in kps[2::3]):
        return [], (f"annotation {ann_id}: keypoint visibility must be 0 (absent), 1 "
                    f"(occluded) or 2 (visible), got {sorted(set(kps[2::3]))}")
    return [v if math.isfinite(v) else repr(v) for v in kps], None


def keypoint_values(kps: list[Any], k: int, width: float, height: float, policy: str,
                    where: str, stats: dict[str, int]
                    ) -> tuple[list[float], list[float], list[int]]:
    """(y, x, visibility) of one object's K points, normalized; a point outside the image
    becomes (0, 0, 0) (counted) unless `policy` is "raise" (InputError naming `where`)."""
    ys, xs, vs = [0.0] * k, [0.0] * k, [0] * k
    for i in range(k if kps else 0):
        x, y, v = float(kps[3 * i]), float(kps[3 * i + 1]), int(kps[3 * i + 2])
        if v == 0:
            continue
        if not (math.isfinite(x) and math.isfinite(y) and 0 <= x <= width
                and 0 <= y <= height):
            if policy == "raise":
                raise InputError(f"{where}: keypoint {i} (x={x}, y={y}) is outside the "
                                 f"{int(width)}x{int(height)} image; use invalid_boxes='clip' "
                                 "or 'drop' to store it as absent (0, 0, 0)")
            stats["keypoints_outside"] = stats.get("keypoints_outside", 0) + 1
            continue
        ys[i], xs[i], vs[i] = y / height, x / width, v
        stats["keypoints"] = stats.get("keypoints", 0) + 1
    return ys, xs, vs
