"""Detection records with instance masks for the instance-mask tests: written with
`tfpipe.records` (`detection_schema(masks=True)`), PNGs by PIL, plus NumPy oracles."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from tfpipe.records import (Manifest, ShardedWriter, ShardEntry, SplitInfo, detection_schema,
                            encode_example)

TIE = 1e-6  # the documented tie rule: within 1e-6 px of a half pixel -> the higher index


def png(a: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG")
    return buf.getvalue()


def painted_sample(rng: np.random.Generator, h: int, w: int, n: int
                   ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """(image, boxes [n, 4] normalized yxyx, masks): n disjoint random blobs (ellipses
    with ~15% holes, so any misplaced pixel shows), each painted in its own colour on a
    black image; each box is its mask's tight box (pixel edges)."""
    img = np.zeros((h, w, 3), np.uint8)
    owner = np.full((h, w), -1)
    ys, xs = np.mgrid[0:h, 0:w]
    for k in range(n):
        cy, cx = rng.uniform(0.15, 0.85) * h, rng.uniform(0.15, 0.85) * w
        ry, rx = rng.uniform(0.12, 0.3) * h, rng.uniform(0.12, 0.3) * w
        blob = ((ys - cy) / ry) ** 2 + ((xs - cx) / rx) ** 2 <= 1.0
        blob &= rng.random((h, w)) > 0.15
        owner[blob] = k  # later objects cover earlier ones
    masks, boxes = [], []
    for k in range(n):
        m = (owner == k).astype(np.uint8)
        if not m.any():
            m[int(h / 2), int(w / 2)] = 1
            owner[int(h / 2), int(w / 2)] = k
        masks.append(m)
        yy, xx = np.nonzero(m)
        boxes.append([yy.min() / h, xx.min() / w, (yy.max() + 1) / h, (xx.max() + 1) / w])
    for k in range(n):
        img[owner == k] = colour(k)
    return img, np.array(boxes, np.float32), masks


def colour(k: int) -> tuple[int, int, int]:
    return [(255, 40, 40), (40, 255, 40), (40, 40, 255), (255, 255, 40), (255, 40, 255)][k % 5]


def write_dataset(out: Path, samples: list[tuple[np.ndarray, np.ndarray, list[bytes]]],
                  splits: tuple[str, ...] = ("train", "validation")) -> str:
    """One shard per split (the same records): (image, boxes, encoded masks) each."""
    schema = detection_schema(masks=True)
    manifest = Manifest(schema=schema, class_names=[f"c{k}" for k in range(5)])
    for split in splits:
        with ShardedWriter(out, split) as w:
            for img, boxes, masks in samples:
                b = np.asarray(boxes, np.float32).reshape(-1, 4)
                w.write(encode_example({
                    "image/encoded": png(img), "image/format": b"png",
                    "image/height": img.shape[0], "image/width": img.shape[1],
                    "image/object/bbox/ymin": b[:, 0].tolist(),
                    "image/object/bbox/xmin": b[:, 1].tolist(),
                    "image/object/bbox/ymax": b[:, 2].tolist(),
                    "image/object/bbox/xmax": b[:, 3].tolist(),
                    "image/object/class/label": [k % 5 for k in range(len(b))],
                    "image/object/mask": list(masks)}, schema))
        manifest.splits[split] = SplitInfo([ShardEntry.from_info(i, out) for i in w.infos])
    manifest.save(out)
    return str(out)


def nearest(v: np.ndarray) -> np.ndarray:
    return np.floor(v + 0.5 + TIE).astype(np.int64)


def crop_matrix(box: np.ndarray, hw: tuple[int, int], size: tuple[int, int]) -> np.ndarray:
    """The box-crop matrix (float64): the box (normalized yxyx, pixel edges) of an
    (H, W) image onto an (Sh, Sw) crop, edges to edges (as `tf.image.resize`)."""
    y0, x0, y1, x1 = (float(v) for v in box)
    sy, sx = size[0] / ((y1 - y0) * hw[0]), size[1] / ((x1 - x0) * hw[1])
    return np.array([[sx, 0.0, (0.5 - x0 * hw[1]) * sx - 0.5],
                     [0.0, sy, (0.5 - y0 * hw[0]) * sy - 0.5], [0.0, 0.0, 1.0]])


def warp_nearest(src: np.ndarray, m: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """NumPy nearest warp of `src` [h, w] through `m` (source -> output, pixel centres
    at integers) onto `size`: the source pixel at floor(M^-1 p + 0.5 + TIE), 0 outside."""
    inv = np.linalg.inv(m.astype(np.float64))
    ys, xs = np.mgrid[0:size[0], 0:size[1]].astype(np.float64)
    den = inv[2, 0] * xs + inv[2, 1] * ys + inv[2, 2]
    ix = nearest((inv[0, 0] * xs + inv[0, 1] * ys + inv[0, 2]) / den)
    iy = nearest((inv[1, 0] * xs + inv[1, 1] * ys + inv[1, 2]) / den)
    h, w = src.shape
    inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
    return np.where(inside, src[np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)], 0).astype(src.dtype)


def boxes_through(boxes: np.ndarray, m: np.ndarray, src_hw: tuple[int, int],
                  out_hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Normalized yxyx boxes through `m` (corners, float64): (clipped boxes, keep)."""
    h, w = src_hw
    out, keep = [], []
    for y0, x0, y1, x1 in np.asarray(boxes, np.float64):
        xs = np.array([x0, x1, x1, x0]) * w - 0.5
        ys = np.array([y0, y0, y1, y1]) * h - 0.5
        p = m @ np.stack([xs, ys, np.ones(4)])
        tx, ty = p[0] / p[2], p[1] / p[2]
        b = np.array([(ty.min() + 0.5) / out_hw[0], (tx.min() + 0.5) / out_hw[1],
                      (ty.max() + 0.5) / out_hw[0], (tx.max() + 0.5) / out_hw[1]])
        c = np.clip(b, 0.0, 1.0)
        out.append(c)
        keep.append((c[2] - c[0]) * (c[3] - c[1]) > 0)
    return np.array(out).reshape(-1, 4), np.array(keep, bool)
