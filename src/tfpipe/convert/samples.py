"""Sample detection, pose and table datasets for tests, demos and benchmarks.

`make_coco` pastes rectangular patches cut from *other* photos onto a
background crop, so every object box is known exactly. `make_table` writes the
same kind of images with a CSV and a Parquet file that reference them by path.
Photos come from `tfpipe.sample_data.source_photos()` (bundled in scikit-image /
scikit-learn); nothing is downloaded. `make_pose_coco` paints people-like figures
with instance masks and keypoints on painted marks (see its docstring).

Usage: ``python -m tfpipe.convert.samples coco OUT``, ``... pose OUT`` or ``... table OUT``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from tfpipe.sample_data import encode, random_crop, source_photos

# Category ids are deliberately sparse and unordered in the file: converters must
# map them to contiguous labels in sorted id order.
_OBJECT_PHOTOS = ["coffee", "chelsea", "rocket", "coins"]
_CATEGORY_IDS = [17, 3, 42, 8]


def make_coco(out_dir: str | Path, *, num_images: int = 20, seed: int = 0,
              size_range: tuple[int, int] = (160, 320), max_objects: int = 4,
              png_fraction: float = 0.0) -> Path:
    """Write `out_dir/images/*.jpg` and `out_dir/annotations.json`; return the JSON path.

    Each image is a crop of a background photo with 0..max_objects patches of the
    object photos pasted at random places (later patches may cover earlier ones;
    boxes are the pasted rectangles, in COCO [x, y, width, height] pixels, and
    each annotation's `segmentation` is its rectangle as a polygon).
    """
    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    photos = source_photos()
    backgrounds = [name for name in photos if name not in _OBJECT_PHOTOS]
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    for i in range(num_images):
        bg = photos[backgrounds[int(rng.integers(len(backgrounds)))]]
        canvas = random_crop(bg, rng, size_range).copy()
        h, w = canvas.shape[:2]
        for _ in range(int(rng.integers(0, max_objects + 1))):
            k = int(rng.integers(len(_OBJECT_PHOTOS)))
            src = photos[_OBJECT_PHOTOS[k]]
            ph = int(rng.integers(max(8, h // 8), max(9, h // 2)))
            pw = int(rng.integers(max(8, w // 8), max(9, w // 2)))
            sy = int(rng.integers(0, src.shape[0] - ph + 1))
            sx = int(rng.integers(0, src.shape[1] - pw + 1))
            y = int(rng.integers(0, h - ph + 1))
            x = int(rng.integers(0, w - pw + 1))
            canvas[y:y + ph, x:x + pw] = src[sy:sy + ph, sx:sx + pw]
            # The patch as a polygon too (--task segmentation): painted in file order,
            # later over earlier, the class masks match what the image shows.
            polygon = [x, y, x + pw, y, x + pw, y + ph, x, y + ph]
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1,
                                "category_id": _CATEGORY_IDS[k], "segmentation": [polygon],
                                "bbox": [x, y, pw, ph], "area": pw * ph, "iscrowd": 0})
        fmt = "png" if rng.random() < png_fraction else "jpeg"
        name = f"images/{i:05d}.{'png' if fmt == 'png' else 'jpg'}"
        (out / name).write_bytes(encode(canvas, fmt))
        images.append({"id": i + 1, "file_name": name, "width": w, "height": h})
    categories = [{"id": cid, "name": name} for cid, name in zip(_CATEGORY_IDS, _OBJECT_PHOTOS)]
    path = out / "annotations.json"
    path.write_text(json.dumps({"images": images, "annotations": annotations,
                                "categories": categories}, indent=1))
    return path


# The pose sample's keypoints (COCO-person style, left/right = the subject's own:
# a figure faces the camera, so its left_* points lie right of its right_* ones in
# the image), the 1-based COCO skeleton, and the colour of each point's painted mark.
POSE_KEYPOINTS = ("nose", "left_eye", "right_eye", "left_hand", "right_hand",
                  "left_foot", "right_foot")
POSE_SKELETON = ((1, 2), (1, 3), (2, 3), (1, 4), (1, 5), (4, 6), (5, 7))
KEYPOINT_COLORS = {"nose": (0, 255, 0), "left_eye": (255, 0, 0), "right_eye": (0, 0, 255),
                   "left_hand": (255, 0, 160), "right_hand": (0, 160, 255),
                   "left_foot": (255, 160, 0), "right_foot": (160, 0, 255)}
# Where each point lies in its figure's box (fractions of width, height).
_POSE_LAYOUT = {"nose": (0.5, 0.2), "left_eye": (0.62, 0.14), "right_eye": (0.38, 0.14),
                "left_hand": (0.8, 0.5), "right_hand": (0.2, 0.5),
                "left_foot": (0.62, 0.85), "right_foot": (0.38, 0.85)}
MARK_RADIUS = 1  # a mark is (2r+1)^2 pixels centred on its keypoint's pixel
_PERSON_ID, _BALL_ID = 1, 37


def coco_rle_string(mask: np.ndarray) -> str:
    """COCO's compressed RLE string of a [H, W] bool mask (maskApi.c rleToString)."""
    counts = coco_rle_counts(mask)
    out = []
    for i, count in enumerate(counts):
        x = count - (counts[i - 2] if i > 2 else 0)
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = x != -1 if c & 0x10 else x != 0
            out.append(chr((c | (0x20 if more else 0)) + 48))
    return "".join(out)


def coco_rle_counts(mask: np.ndarray) -> list[int]:
    """COCO's uncompressed RLE counts of a [H, W] bool mask (column-major runs, 0s first)."""
    flat = mask.T.ravel().astype(np.int8)
    edges = np.flatnonzero(np.diff(flat)) + 1
    runs = np.diff(np.r_[0, edges, flat.size]).tolist()
    return ([0] if flat.size and flat[0] else []) + [int(c) for c in runs]


def _tight_box(mask: np.ndarray) -> list[int]:
    ys, xs = np.nonzero(mask)
    return [int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1),
            int(ys.max() - ys.min() + 1)]


def make_pose_coco(out_dir: str | Path, *, num_images: int = 12, seed: int = 0,
                   size_range: tuple[int, int] = (128, 192)) -> Path:
    """Write `out_dir/images/*.png` and `out_dir/annotations.json` (COCO instances with
    person keypoints); return the JSON path.

    Each image is a background photo crop cut into 2-3 vertical slots, each holding a
    "person" (category 1: a 16-vertex polygon filled with a darkened object photo,
    with the 7 `POSE_KEYPOINTS` on marks painted in `KEYPOINT_COLORS`), or a "ball"
    (category 37, no keypoints: a disk stored as a compressed RLE string). Image 0's
    last slot is a crowd region (iscrowd 1, uncompressed RLE counts). Masks are what
    the image shows; a keypoint is the centre of its mark's middle pixel (x + 0.5);
    visibility is 2 or 1 (painted) or 0 (absent: [0, 0, 0], not painted). PNG, so the
    marks keep their exact colours.
    """
    from PIL import Image

    from tfpipe.convert._rasterize import polygon_mask

    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    photos = source_photos()
    backgrounds = [name for name in photos if name not in _OBJECT_PHOTOS]
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []

    def add(image_id: int, mask: np.ndarray, category: int, segm: Any, **extra: Any) -> None:
        annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                            "category_id": category, "segmentation": segm,
                            "bbox": _tight_box(mask), "area": int(mask.sum()), **extra})

    for i in range(num_images):
        w = int(rng.integers(size_range[0], size_range[1] + 1))
        h = int(rng.integers(size_range[0], size_range[1] + 1))
        bg = random_crop(photos[backgrounds[int(rng.integers(len(backgrounds)))]], rng,
                         (max(h, w), max(h, w)))
        canvas = np.asarray(Image.fromarray(bg).resize((w, h), Image.BILINEAR)).copy()
        slots = min(int(rng.integers(2, 4)), w // 48)  # a figure needs 40+ px
        for s in range(slots):
            x0, x1 = s * w // slots, (s + 1) * w // slots
            fill = photos[_OBJECT_PHOTOS[int(rng.integers(len(_OBJECT_PHOTOS)))]]
            patch = np.asarray(Image.fromarray(fill).resize((w, h), Image.BILINEAR))
            patch = (patch.astype(np.float32) * 0.45).astype(np.uint8)
            if i == 0 and s == slots - 1:  # a crowd: a band at the slot's bottom
                mask = np.zeros((h, w), bool)
                mask[h - h // 5:h - 2, x0 + 2:x1 - 2] = True
                canvas[mask] = patch[mask]
                add(i + 1, mask, _PERSON_ID, {"size": [h, w], "counts": coco_rle_counts(mask)},
                    iscrowd=1, keypoints=[0] * (3 * len(POSE_KEYPOINTS)), num_keypoints=0)
                continue
            if rng.random() < 0.3:  # a ball
                r = int(rng.integers(6, max(7, min(x1 - x0, h) // 4)))
                cx = int(rng.integers(x0 + r + 1, x1 - r - 1))
                cy = int(rng.integers(r + 1, h - r - 1))
                yy, xx = np.mgrid[:h, :w]
                mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
                canvas[mask] = patch[mask]
                add(i + 1, mask, _BALL_ID, {"size": [h, w], "counts": coco_rle_string(mask)},
                    iscrowd=0)
                continue
            bw = int(rng.integers(max(40, (x1 - x0) * 3 // 5), x1 - x0 - 3))
            bh = int(rng.integers(max(48, h // 2), h - 3))
            bx, by = int(rng.integers(x0 + 1, x1 - bw - 1)), int(rng.integers(1, h - bh - 1))
            t = np.linspace(0, 2 * np.pi, 16, endpoint=False)
            poly = np.stack([bx + bw / 2 + bw / 2 * np.cos(t),
                             by + bh / 2 + bh / 2 * np.sin(t)], 1).round(2).ravel().tolist()
            mask = polygon_mask(poly, h, w)
            canvas[mask] = patch[mask]
            kps: list[float] = []
            for name in POSE_KEYPOINTS:
                fx, fy = _POSE_LAYOUT[name]
                px, py = int(bx + fx * bw), int(by + fy * bh)
                v = int(rng.choice([2, 1, 0], p=[0.85, 0.1, 0.05]))
                if v == 0:
                    kps += [0, 0, 0]
                    continue
                r = MARK_RADIUS
                canvas[py - r:py + r + 1, px - r:px + r + 1] = KEYPOINT_COLORS[name]
                kps += [px + 0.5, py + 0.5, v]
            add(i + 1, mask, _PERSON_ID, [poly], iscrowd=0, keypoints=kps,
                num_keypoints=sum(1 for v in kps[2::3] if v))
        name = f"images/{i:05d}.png"
        (out / name).write_bytes(encode(canvas, "png"))
        images.append({"id": i + 1, "file_name": name, "width": w, "height": h})
    categories = [{"id": _PERSON_ID, "name": "person", "supercategory": "person",
                   "keypoints": list(POSE_KEYPOINTS),
                   "skeleton": [list(b) for b in POSE_SKELETON]},
                  {"id": _BALL_ID, "name": "ball", "supercategory": "sports"}]
    path = out / "annotations.json"
    path.write_text(json.dumps({"images": images, "annotations": annotations,
                                "categories": categories}, indent=1))
    return path


def make_table(out_dir: str | Path, *, num_rows: int = 30, seed: int = 0,
               size_range: tuple[int, int] = (96, 192)) -> tuple[Path, Path]:
    """Write `images/*.jpg`, `table.csv` and `table.parquet`; return (csv, parquet).

    Columns: image (path relative to the table), label (class name), label_id
    (int), weight (float), flag (bool), note (string with some nulls); the
    Parquet file adds `tags` (list<int64>).
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    photos = list(source_photos().items())[:4]
    rows: dict[str, list[Any]] = {k: [] for k in
                                   ("image", "label", "label_id", "weight", "flag", "note")}
    tags: list[list[int]] = []
    for i in range(num_rows):
        k = i % len(photos)
        name = f"images/{i:05d}.jpg"
        (out / name).write_bytes(encode(random_crop(photos[k][1], rng, size_range)))
        rows["image"].append(name)
        rows["label"].append(photos[k][0])
        rows["label_id"].append(k)
        rows["weight"].append(round(float(rng.random()), 3))
        rows["flag"].append(bool(i % 3 == 0))
        rows["note"].append(None if i % 4 == 1 else f"note {i}")
        tags.append(list(range(i % 3)))
    table = pa.table(rows)
    csv_path, parquet_path = out / "table.csv", out / "table.parquet"
    pacsv.write_csv(table, csv_path)
    pq.write_table(table.append_column("tags", pa.array(tags, pa.list_(pa.int64()))),
                   parquet_path)
    return csv_path, parquet_path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="kind", required=True)
    coco = sub.add_parser("coco", help="COCO-style detection set with exact pasted boxes")
    coco.add_argument("out")
    coco.add_argument("--num-images", type=int, default=20)
    coco.add_argument("--seed", type=int, default=0)
    pose = sub.add_parser("pose", help="COCO-style instances with masks and keypoints")
    pose.add_argument("out")
    pose.add_argument("--num-images", type=int, default=12)
    pose.add_argument("--seed", type=int, default=0)
    table = sub.add_parser("table", help="CSV + Parquet with an image-path column")
    table.add_argument("out")
    table.add_argument("--rows", type=int, default=30)
    table.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.kind in ("coco", "pose"):
        make = make_coco if args.kind == "coco" else make_pose_coco
        path = make(args.out, num_images=args.num_images, seed=args.seed)
        print(f"wrote {args.num_images} images and {path}")
    else:
        csv_path, parquet_path = make_table(args.out, num_rows=args.rows, seed=args.seed)
        print(f"wrote {args.rows} rows: {csv_path}, {parquet_path}")


if __name__ == "__main__":
    main()
