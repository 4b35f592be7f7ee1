"""COCO `segmentation` fields -> binary masks, pixel-exact with pycocotools.

A NumPy port of the COCO API's C rasterizer (cocoapi common/maskApi.c:
`rleFrPoly`, `rleFrString`, `rleDecode`), so converting needs no pycocotools:
the tests use pycocotools (`frPyObjects` + `merge` + `decode`) as the oracle.

- Polygon (`rleFrPoly`): vertices are scaled by 5 and rounded, every edge is
  walked densely on that grid, and each crossing of a pixel column centre marks a
  toggle at the first pixel row whose centre lies below the edge; the mask is the
  parity of the toggles in column-major order (what the C code's run-length
  counts encode). An annotation's polygons are united (`merge`).
- Uncompressed RLE: `counts` alternate background / foreground runs over the
  column-major pixels, starting with background.
- Compressed RLE (`counts` a string): COCO's 6-bit LEB128-like code, each count
  after the second stored as the difference to the count two before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_SCALE = 5.0


class BadSegmentation(ValueError):
    """A `segmentation` value that cannot be rasterized; the message says why."""


def _trunc_int(values: np.ndarray) -> np.ndarray:
    """C's (int) cast of a double: truncation toward zero."""
    return np.trunc(values).astype(np.int64)


def polygon_mask(xy: Any, height: int, width: int) -> np.ndarray:
    """[height, width] bool mask of one polygon [x0, y0, x1, y1, ...] (rleFrPoly)."""
    pts = np.asarray(xy, dtype=np.float64)
    k = len(pts) // 2
    x = _trunc_int(_SCALE * pts[0:2 * k:2] + 0.5)
    y = _trunc_int(_SCALE * pts[1:2 * k:2] + 0.5)
    xs, ys = x, y
    xe, ye = np.roll(x, -1), np.roll(y, -1)
    dx, dy = np.abs(xe - xs), np.abs(ys - ye)
    major_x = dx >= dy
    flip = (major_x & (xs > xe)) | (~major_x & (ys > ye))
    xs2, xe2 = np.where(flip, xe, xs), np.where(flip, xs, xe)
    ys2, ye2 = np.where(flip, ye, ys), np.where(flip, ys, ye)
    steps = np.where(major_x, dx, dy)  # points per edge: steps + 1
    with np.errstate(divide="ignore", invalid="ignore"):
        # A zero-length edge divides 0/0 in C too; its one point equals its
        # neighbours' (same vertex), so its v/u value is never read.
        s = np.where(major_x, (ye2 - ys2) / np.where(dx == 0, 1, dx),
                     (xe2 - xs2) / np.where(dy == 0, 1, dy))
    counts = steps + 1
    edge = np.repeat(np.arange(k), counts)
    d = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    t = np.where(flip[edge], steps[edge] - d, d)
    mx = major_x[edge]
    frac_v = _trunc_int(ys2[edge] + s[edge] * t + 0.5)
    frac_u = _trunc_int(xs2[edge] + s[edge] * t + 0.5)
    u = np.where(mx, t + xs2[edge], frac_u)
    v = np.where(mx, frac_v, t + ys2[edge])
    # Points where the walk crosses into another upsampled column.
    cur_u, prev_u, cur_v, prev_v = u[1:], u[:-1], v[1:], v[:-1]
    moved = cur_u != prev_u
    xd = np.where(cur_u < prev_u, cur_u, cur_u - 1)[moved].astype(np.float64)
    xd = (xd + 0.5) / _SCALE - 0.5
    keep = (np.floor(xd) == xd) & (xd >= 0) & (xd <= width - 1)
    yd = np.minimum(cur_v, prev_v)[moved].astype(np.float64)
    yd = (yd + 0.5) / _SCALE - 0.5
    yd = np.ceil(np.clip(yd, 0, height))
    toggles = xd[keep].astype(np.int64) * height + yd[keep].astype(np.int64)
    return _parity_mask(toggles, height, width)


def _parity_mask(toggles: np.ndarray, height: int, width: int) -> np.ndarray:
    """A column-major pixel is set when an odd number of toggles lie at or before it."""
    n = height * width
    hist = np.bincount(toggles, minlength=n + 1)[:n]
    flat = (np.cumsum(hist) & 1).astype(bool)
    return flat.reshape(width, height).T


def counts_mask(counts: Any, height: int, width: int) -> np.ndarray:
    """[height, width] bool mask of run-length `counts` (rleDecode)."""
    runs = np.asarray(counts, dtype=np.int64)
    if runs.ndim != 1 or (runs < 0).any():
        raise BadSegmentation("RLE counts must be a list of non-negative integers")
    total = int(runs.sum())
    if total != height * width:
        raise BadSegmentation(f"RLE counts sum to {total} pixels, the size "
                              f"{height}x{width} holds {height * width}")
    values = (np.arange(len(runs)) & 1).astype(bool)
    return np.repeat(values, runs).reshape(width, height).T


def string_counts(text: str) -> list[int]:
    """The run-length counts of a compressed COCO RLE string (rleFrString)."""
    cnts: list[int] = []
    p, n = 0, len(text)
    while p < n:
        x, k, more = 0, 0, True
        while more:
            if p >= n:
                raise BadSegmentation("compressed RLE string ends inside a count")
            c = ord(text[p]) - 48
            if not 0 <= c < 64:
                raise BadSegmentation(f"compressed RLE string has character {text[p]!r} "
                                      "outside '0'..'o'")
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(cnts) > 2:  # maskApi.c: deltas from the third count on (`m>2`)
            x += cnts[-2]
        cnts.append(x & 0xFFFFFFFF)
    return cnts


def annotation_mask(segmentation: Any, height: int, width: int) -> np.ndarray:
    """The [height, width] bool mask of one annotation's `segmentation` value, as
    pycocotools' COCO.annToMask builds it; raises BadSegmentation."""
    if isinstance(segmentation, list):
        mask = np.zeros((height, width), dtype=bool)
        for poly in segmentation:
            mask |= polygon_mask(poly, height, width)
        return mask
    if isinstance(segmentation, dict):
        size = segmentation.get("size")
        if list(size or []) != [height, width]:
            raise BadSegmentation(f"RLE size {size} differs from the image's "
                                  f"[height, width] [{height}, {width}]")
        counts = segmentation.get("counts")
        if isinstance(counts, str):
            counts = string_counts(counts)
        return counts_mask(counts, height, width)
    raise BadSegmentation("segmentation must be a list of polygons or an RLE "
                          "{'size': [h, w], 'counts': ...}")
