"""Regenerate docs/img/augment-preview.png: geometry ops on real photos, boxes drawn.

    .venv/bin/python benchmarks/augment_preview.py [--out docs/img/augment-preview.png]

Each tile is the op's output with the boxes pushed through the op's matrix
(`transform_boxes`), field (`elastic_boxes`) or composition (`mosaic`).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402

from tfpipe import augment as A  # noqa: E402
from tfpipe.sample_data import source_photos  # noqa: E402

T = 176  # tile size
# hand-placed boxes (normalized yxyx) around objects in the 512x512 crops below
PHOTOS = {
    "astronaut": [[0.05, 0.33, 0.42, 0.62], [0.50, 0.62, 0.92, 0.82]],   # head, helmet
    "coffee": [[0.06, 0.12, 0.75, 0.86]],                                  # cup
    "chelsea": [[0.06, 0.25, 0.62, 0.75]],                                 # cat's head
    "rocket": [[0.02, 0.33, 0.95, 0.62]],                                  # rocket
}
COLORS = [(255, 60, 60), (60, 220, 60), (60, 140, 255), (255, 200, 0)]


def load(name: str) -> np.ndarray:
    img = source_photos()[name]
    h, w = img.shape[:2]
    s = min(h, w)
    img = img[(h - s) // 2:(h - s) // 2 + s, (w - s) // 2:(w - s) // 2 + s]
    return cv2.resize(img, (256, 256), interpolation=cv2.INTER_AREA)


def tile(image: np.ndarray, boxes: np.ndarray, classes: list[int], title: str) -> Image.Image:
    pil = Image.fromarray(np.asarray(image, np.uint8)).resize((T, T), Image.BILINEAR)
    draw = ImageDraw.Draw(pil)
    for box, cls in zip(boxes, classes):
        y0, x0, y1, x1 = (float(v) * T for v in box)
        draw.rectangle([x0, y0, x1 - 1, y1 - 1], outline=COLORS[cls % len(COLORS)], width=2)
    draw.rectangle([0, 0, T, 14], fill=(0, 0, 0))
    draw.text((3, 1), title, fill=(255, 255, 255))
    return pil


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/img/augment-preview.png")
    args = parser.parse_args(argv)
    names = list(PHOTOS)
    images = np.stack([load(n) for n in names])
    size = images.shape[1:3]
    img, boxes = images[0], np.array(PHOTOS[names[0]], np.float32)
    classes = [0, 1]
    tiles = [tile(img, boxes, classes, "original")]
    seed = tf.constant([0, 4], tf.int64)

    out, m = A.random_affine(img, seed, rotation=30.0, scale=(0.8, 1.1), shear=12.0,
                             translate=(0.1, 0.1))
    b, k = A.transform_boxes(boxes, m, size)
    tiles.append(tile(out, b.numpy()[k.numpy()], classes, "random_affine"))

    # crop window + flip + rotation composed into ONE resample
    window = A.sample_crop_window(tf.constant([0, 2], tf.int64), 256, 256, (0.3, 1.0))
    mats = [A.crop_matrix(window[:2], window[2:], size), A.flip_matrix(size, True),
            A.rotation_matrix(15.0, (127.5, 127.5))]
    out, m = A.apply_geometry(img, mats, size)
    b, k = A.transform_boxes(boxes, m, size)
    tiles.append(tile(out, b.numpy()[k.numpy()], classes, "crop+flip+rot, 1 resample"))

    out, field = A.elastic(img, seed, 60.0, 8.0)
    b, k = A.elastic_boxes(boxes, field)
    tiles.append(tile(out, b.numpy()[k.numpy()], classes, "elastic a=60 s=8"))

    out, m = A.random_rot90(img, tf.constant([0, 1], tf.int64))
    b, k = A.transform_boxes(boxes, m, size, out.shape[:2])
    tiles.append(tile(out, b.numpy()[k.numpy()], classes, "random_rot90"))

    max_boxes = 4
    padded = [A.pad_boxes(np.array(PHOTOS[n], np.float32),
                          tf.constant([i] * len(PHOTOS[n])), max_boxes) for i, n in enumerate(names)]
    pb = tf.stack([p[0] for p in padded])
    pc = tf.stack([p[1] for p in padded])
    pn = tf.stack([p[2] for p in padded])
    mi, mb, mc, mn = A.mosaic(images, pb, pc, pn, tf.constant([0, 9], tf.int64), p=1.0)
    for i in range(2):
        n = int(mn[i])
        tiles.append(tile(mi[i].numpy(), mb[i, :n].numpy(), list(mc[i, :n].numpy()),
                          f"mosaic #{i}"))
    xi, xb, xc, xn, xw = A.detection_mixup(images, pb, pc, pn, tf.constant([0, 3], tf.int64),
                                           alpha=1.0)
    n = int(xn[0])
    tiles.append(tile(xi[0].numpy(), xb[0, :n].numpy(), list(xc[0, :n].numpy()),
                      f"det. mixup lam={float(xw[0, 0]):.2f}"))

    cols = 4
    rows = (len(tiles) + cols - 1) // cols
    sheet = Image.new("RGB", (cols * T, rows * T), (255, 255, 255))
    for i, t in enumerate(tiles):
        sheet.paste(t, ((i % cols) * T, (i // cols) * T))
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    sheet.quantize(256, dither=Image.Dither.NONE).save(out_path, optimize=True)
    print(f"wrote {out_path} ({out_path.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
