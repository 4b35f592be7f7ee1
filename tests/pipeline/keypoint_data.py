"""Keypoint datasets for the tests: records written with `tfpipe.records`
(`detection_schema(keypoints=True)`) and a manifest carrying `source["keypoints"]`."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

NAMES = ["nose", "left_eye", "right_eye", "tail"]
SKELETON = [[0, 1], [0, 2], [0, 3]]


def write_dataset(out: Path, samples: Sequence[dict], names: Sequence[str] = NAMES,
                  skeleton: Sequence[Sequence[int]] = SKELETON, keypoints: bool = True,
                  splits: Sequence[str] = ("train", "validation")) -> str:
    """`samples`: dicts of image (uint8 HxWx3), boxes [N,4] normalized yxyx, classes
    [N], points [N,K,3] (y, x normalized, visibility). Every split gets the same
    records. Returns the dataset directory."""
    from tfpipe import sample_data
    from tfpipe.records import (Manifest, ShardedWriter, ShardEntry, SplitInfo,
                                detection_schema, encode_example)

    out.mkdir(parents=True, exist_ok=True)
    schema = detection_schema(keypoints=keypoints)
    source = {"kind": "test"}
    if keypoints:
        source["keypoints"] = {"names": list(names), "skeleton": [list(p) for p in skeleton]}
    m = Manifest(schema=schema, class_names=[], compression=None, source=source, settings={})
    for split in splits:
        with ShardedWriter(out, split, 1 << 30, None) as w:
            for s in samples:
                img = s["image"]
                boxes = np.asarray(s["boxes"], np.float32).reshape(-1, 4)
                rec = {"image/encoded": sample_data.encode(img, "png"), "image/format": "png",
                       "image/height": img.shape[0], "image/width": img.shape[1],
                       "image/object/bbox/ymin": boxes[:, 0].tolist(),
                       "image/object/bbox/xmin": boxes[:, 1].tolist(),
                       "image/object/bbox/ymax": boxes[:, 2].tolist(),
                       "image/object/bbox/xmax": boxes[:, 3].tolist(),
                       "image/object/class/label": [int(c) for c in s["classes"]],
                       "image/object/class/text": [b"x"] * len(boxes)}
                if keypoints:
                    p = np.asarray(s["points"], np.float32).reshape(-1, 3)
                    rec["image/object/keypoint/y"] = p[:, 0].tolist()
                    rec["image/object/keypoint/x"] = p[:, 1].tolist()
                    rec["image/object/keypoint/visibility"] = p[:, 2].astype(int).tolist()
                w.write(encode_example(rec, schema))
        m.splits[split] = SplitInfo([ShardEntry.from_info(i, out) for i in w.infos], [])
    m.save(out)
    return str(out)


def coordinate_image(h: int, w: int) -> np.ndarray:
    """R = column + 1, G = row + 1, B = 255: every output pixel of a resample says
    which source position it came from (0 / B < 255: the fill)."""
    img = np.zeros((h, w, 3), np.uint8)
    img[..., 0] = np.arange(1, w + 1)[None, :]
    img[..., 1] = np.arange(1, h + 1)[:, None]
    img[..., 2] = 255
    return img


def random_objects(rng: np.random.Generator, n: int, k: int, h: int, w: int,
                   record: int) -> dict:
    """n boxes (whole pixels), each with k points inside it (some absent: 0, 0, 0);
    class = 100 * (record + 1) + object (tells the object's source after mosaic)."""
    boxes, points = [], []
    for _ in range(n):
        y0, x0 = int(rng.integers(0, h - 12)), int(rng.integers(0, w - 12))
        y1 = y0 + int(rng.integers(8, min(h - y0, 30) + 1))
        x1 = x0 + int(rng.integers(8, min(w - x0, 30) + 1))
        boxes.append([y0 / h, x0 / w, y1 / h, x1 / w])
        ys = rng.uniform(y0 + 0.5, y1 - 0.5, k) / h
        xs = rng.uniform(x0 + 0.5, x1 - 0.5, k) / w
        vs = rng.choice([0, 1, 2, 2], k).astype(np.float32)
        pts = np.stack([ys, xs, vs], -1).astype(np.float32)
        pts[vs == 0] = 0.0
        points.append(pts)
    return {"boxes": np.array(boxes, np.float32),
            "classes": [100 * (record + 1) + j for j in range(n)],
            "points": np.stack(points)}
