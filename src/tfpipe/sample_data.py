"""Sample datasets built from the photos that ship inside PyPI packages.

Nothing is downloaded: the source photos come from scikit-image (`skimage.data`,
bundled files only) and scikit-learn (`load_sample_images`). Crops of random
position, size and aspect are saved as JPEG (q90) or PNG so that tests, the demo
and the benchmarks see real photographic content at realistic sizes.

`make_segmentation_folder` paints solid shapes (class = shape kind) on darkened
photo crops and writes their class masks beside them.

Usage: ``python -m tfpipe.sample_data folder OUT --per-class 50`` or
``python -m tfpipe.sample_data segmentation OUT --images 20``.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np

# Photos bundled inside scikit-image's wheel (no pooch download needed).
_SKIMAGE_COLOR = ["astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry",
                  "hubble_deep_field", "retina", "colorwheel"]
_SKIMAGE_GRAY = ["camera", "coins", "moon", "brick", "grass", "gravel"]


def source_photos() -> dict[str, np.ndarray]:
    """Name -> HxWx3 uint8 photo, from scikit-image and scikit-learn."""
    import skimage.data
    from sklearn.datasets import load_sample_images

    photos: dict[str, np.ndarray] = {}
    sk = load_sample_images()
    for name, image in zip(("china", "flower"), sk.images):
        photos[name] = np.ascontiguousarray(image)
    for name in _SKIMAGE_COLOR:
        photos[name] = np.ascontiguousarray(getattr(skimage.data, name)()[..., :3])
    for name in _SKIMAGE_GRAY:
        gray = getattr(skimage.data, name)()
        photos[name] = np.repeat(gray[..., None], 3, axis=2)
    return photos


def random_crop(photo: np.ndarray, rng: np.random.Generator,
                size_range: tuple[int, int] = (300, 520)) -> np.ndarray:
    """A crop of random size/aspect, resized so its longer side lies in size_range."""
    from PIL import Image

    h, w = photo.shape[:2]
    ch = int(rng.integers(max(32, h // 3), h + 1))
    cw = int(rng.integers(max(32, w // 3), w + 1))
    y = int(rng.integers(0, h - ch + 1))
    x = int(rng.integers(0, w - cw + 1))
    crop = Image.fromarray(photo[y:y + ch, x:x + cw])
    longer = int(rng.integers(size_range[0], size_range[1] + 1))
    scale = longer / max(ch, cw)
    new = (max(16, round(cw * scale)), max(16, round(ch * scale)))
    return np.asarray(crop.resize(new, Image.BILINEAR))


def encode(image: np.ndarray, fmt: str = "jpeg", quality: int = 90) -> bytes:
    """Encode an HxWx3 (or HxW) uint8 array as JPEG or PNG bytes."""
    from PIL import Image

    buf = io.BytesIO()
    pil = Image.fromarray(image)
    if fmt == "jpeg":
        pil.save(buf, format="JPEG", quality=quality)
    elif fmt == "png":
        pil.save(buf, format="PNG")
    else:
        raise ValueError(f"format must be 'jpeg' or 'png', got {fmt!r}")
    return buf.getvalue()


def make_image_folder(out: str | Path, *, num_classes: int = 4, per_class: int = 25,
                      seed: int = 0, png_fraction: float = 0.1,
                      gray_fraction: float = 0.05,
                      size_range: tuple[int, int] = (300, 520)) -> Path:
    """Write `out/<class>/<n>.jpg|png`; class k draws its crops from photo k.

    Mostly RGB JPEG q90, with a fraction of PNGs and single-channel JPEGs so that
    converters and decoders meet mixed formats and channel counts.
    """
    out = Path(out)
    rng = np.random.default_rng(seed)
    photos = list(source_photos().items())
    if num_classes > len(photos):
        raise ValueError(f"num_classes must be <= {len(photos)}, got {num_classes}")
    for name, photo in photos[:num_classes]:
        class_dir = out / name
        class_dir.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            crop = random_crop(photo, rng, size_range)
            r = rng.random()
            if r < png_fraction:
                (class_dir / f"{i:05d}.png").write_bytes(encode(crop, "png"))
            elif r < png_fraction + gray_fraction:
                gray = crop.mean(axis=2).astype(np.uint8)
                (class_dir / f"{i:05d}.jpg").write_bytes(encode(gray, "jpeg"))
            else:
                (class_dir / f"{i:05d}.jpg").write_bytes(encode(crop, "jpeg"))
    return out


def make_jpeg_bytes(n: int, *, seed: int = 0,
                    size_range: tuple[int, int] = (300, 520)) -> list[bytes]:
    """n JPEG (q90) crops of the bundled photos, in memory (benchmarks, tests)."""
    rng = np.random.default_rng(seed)
    photos = list(source_photos().values())
    return [encode(random_crop(photos[i % len(photos)], rng, size_range))
            for i in range(n)]


SEGMENTATION_CLASSES = ("background", "circle", "square", "triangle")
# One solid colour per shape class, bright against the darkened photo.
SHAPE_COLORS = {1: (235, 64, 52), 2: (64, 220, 72), 3: (72, 110, 250)}
BACKGROUND_SCALE = 0.45  # photo pixels are multiplied by this: never as bright as a shape


def _shape(kind: int, h: int, w: int, cy: float, cx: float, r: float) -> np.ndarray:
    """[h, w] bool: pixel centres inside a circle (1), square (2) or triangle (3)."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64) + 0.5
    dy, dx = yy - cy, xx - cx
    if kind == 1:
        return dx * dx + dy * dy <= r * r
    if kind == 2:
        return (np.abs(dx) <= r) & (np.abs(dy) <= r)
    # Upward triangle: apex (cx, cy - r), base y = cy + r with half-width r.
    return (dy <= r) & (np.abs(dx) <= (dy + r) / 2)


def _edge(region: np.ndarray) -> np.ndarray:
    """Pixels of `region` with a 4-neighbour outside it (its one-pixel boundary ring)."""
    inner = region.copy()
    inner[1:, :] &= region[:-1, :]
    inner[:-1, :] &= region[1:, :]
    inner[:, 1:] &= region[:, :-1]
    inner[:, :-1] &= region[:, 1:]
    return region & ~inner


def make_segmentation_folder(out: str | Path, *, num_images: int = 20, seed: int = 0,
                             size_range: tuple[int, int] = (64, 128),
                             max_shapes: int = 4, png_fraction: float = 0.25) -> Path:
    """Write `out/images/**`, `out/masks/**` (same relative path and stem, .png) and
    `out/classes.txt`; return `out`.

    Each image is a darkened photo crop with 1..max_shapes solid shapes painted on
    it (later over earlier); the mask holds the shape's class (SEGMENTATION_CLASSES:
    1 circle, 2 square, 3 triangle; 0 background) with its one-pixel boundary ring
    set to 255 (ignore, as PASCAL VOC marks object borders). Every 4th image lies
    in a sub-folder `images/extra/`; the images are JPEG q90, or PNG (png_fraction).
    """
    out = Path(out)
    rng = np.random.default_rng(seed)
    photos = list(source_photos().values())
    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "masks").mkdir(parents=True, exist_ok=True)
    for i in range(num_images):
        photo = photos[int(rng.integers(len(photos)))]
        canvas = (random_crop(photo, rng, size_range) * BACKGROUND_SCALE).astype(np.uint8)
        h, w = canvas.shape[:2]
        mask = np.zeros((h, w), dtype=np.uint8)
        for _ in range(int(rng.integers(1, max_shapes + 1))):
            kind = int(rng.integers(1, len(SEGMENTATION_CLASSES)))
            r = float(rng.uniform(min(h, w) * 0.08, min(h, w) * 0.3))
            region = _shape(kind, h, w, float(rng.uniform(0, h)), float(rng.uniform(0, w)), r)
            canvas[region] = SHAPE_COLORS[kind]
            mask[region] = kind
            mask[_edge(region)] = 255
        sub = "extra/" if i % 4 == 3 else ""
        fmt = "png" if rng.random() < png_fraction else "jpeg"
        name = f"{sub}{i:05d}"
        (out / "images" / sub).mkdir(parents=True, exist_ok=True)
        (out / "masks" / sub).mkdir(parents=True, exist_ok=True)
        suffix = ".png" if fmt == "png" else ".jpg"
        (out / "images" / f"{name}{suffix}").write_bytes(encode(canvas, fmt))
        (out / "masks" / f"{name}.png").write_bytes(encode(mask, "png"))
    (out / "classes.txt").write_text("\n".join(SEGMENTATION_CLASSES) + "\n")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="kind", required=True)
    folder = sub.add_parser("folder", help="image folder root/<class>/*.jpg|png")
    folder.add_argument("out")
    folder.add_argument("--classes", type=int, default=4)
    folder.add_argument("--per-class", type=int, default=25)
    folder.add_argument("--seed", type=int, default=0)
    seg = sub.add_parser("segmentation", help="images/ + masks/ (shapes painted on photos)")
    seg.add_argument("out")
    seg.add_argument("--images", type=int, default=20)
    seg.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.kind == "segmentation":
        make_segmentation_folder(args.out, num_images=args.images, seed=args.seed)
        print(f"wrote {args.images} images with masks under {args.out}")
    if args.kind == "folder":
        path = make_image_folder(args.out, num_classes=args.classes,
                                 per_class=args.per_class, seed=args.seed)
        print(f"wrote {args.classes * args.per_class} images under {path}")


if __name__ == "__main__":
    main()
