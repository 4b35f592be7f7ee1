"""Sample detection and table datasets for tests, demos and benchmarks.

`make_coco` pastes rectangular patches cut from *other* photos onto a
background crop, so every object box is known exactly. `make_table` writes the
same kind of images with a CSV and a Parquet file that reference them by path.
Photos come from `tfpipe.sample_data.source_photos()` (bundled in scikit-image /
scikit-learn); nothing is downloaded.

Usage: ``python -m tfpipe.convert.samples coco OUT`` or ``... table OUT``.
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
    table = sub.add_parser("table", help="CSV + Parquet with an image-path column")
    table.add_argument("out")
    table.add_argument("--rows", type=int, default=30)
    table.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.kind == "coco":
        path = make_coco(args.out, num_images=args.num_images, seed=args.seed)
        print(f"wrote {args.num_images} images and {path}")
    else:
        csv_path, parquet_path = make_table(args.out, num_rows=args.rows, seed=args.seed)
        print(f"wrote {args.rows} rows: {csv_path}, {parquet_path}")


if __name__ == "__main__":
    main()
