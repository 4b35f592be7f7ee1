"""Side by side: the tfpipe detection recipe with instance masks (`data.instance_masks:
{size: [28, 28]}`), the same recipe boxes-only, and the same recipe in albumentations +
OpenCV with masks.

    .venv/bin/python benchmarks/instance_masks_bench.py --images 200 --rounds 3 --seconds 3

Recipe: the `detection` preset (flip, affine scale 0.5-1.5 / translate 0.1 fill 114,
brightness/contrast, 512x512 float32, batch 16, max_boxes 100) with mosaic OFF in every
row (`--mosaic` turns it on for the tfpipe rows only: the peer has no mosaic with
masks), so the rows do the same work per sample.

Data: `--images` JPEGs (q90, longer side 300-500 px) cut from the photos bundled with
scikit-image / scikit-learn (`tfpipe.sample_data`), 1-8 objects each: a random ellipse
mask per object (one PNG each, at the image's size, `image/object/mask`) and its tight
box, written with `tfpipe.records` (`detection_schema(masks=True)`) into 4 shards.
Reuse with --data DIR.

Rows, in alternating rounds (images/s; ratios within a round):
- tfpipe, instance masks: the kept objects' PNGs decoded, each sampled once, nearest,
  through the image's matrix and its box-crop matrix onto 28x28;
- tfpipe, boxes only: the same config without `data.instance_masks`;
- peer: a thread pool of `--threads` (default: the CPUs) in this process runs, per
  sample, `cv2.imdecode` of the image (RGB) and of every mask -> `cv2.resize` to 512
  (image linear, masks nearest) -> albumentations `HorizontalFlip` + `Affine(scale,
  translate, fill 114, fill_mask 0)` + `RandomBrightnessContrast` with
  `masks=[...]` and `bbox_params` (clip, min_area 1) -> each kept object's mask
  cropped to its box and `cv2.resize`d nearest to 28x28, padded to 100; then the
  ImageNet normalize to float32. It reads its bytes from memory (favours it) and
  resamples twice where tfpipe resamples once.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # noqa: E402 - benchmarks/_harness.py

SIZE = 512
BATCH = 16
MAX_BOXES = 100
CROP = 28
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def _png(a: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG")
    return buf.getvalue()


def make_data(root: Path, images: int, seed: int = 0) -> Path:
    """Photos with 1-8 ellipse objects each, their masks and boxes -> root/data."""
    from tfpipe.records import (Manifest, ShardedWriter, ShardEntry, SplitInfo,
                                detection_schema, encode_example)
    from tfpipe.sample_data import encode, random_crop, source_photos

    data = root / "data"
    if (data / "manifest.json").exists():
        return data
    rng = np.random.default_rng(seed)
    photos = list(source_photos().values())
    schema = detection_schema(masks=True)
    manifest = Manifest(schema=schema, class_names=[f"class{k}" for k in range(8)])
    records = []
    for i in range(images):
        img = random_crop(photos[i % len(photos)], rng, (300, 500))
        h, w = img.shape[:2]
        ys, xs = np.mgrid[0:h, 0:w]
        boxes, masks = [], []
        for _ in range(int(rng.integers(1, 9))):
            cy, cx = rng.uniform(0.1, 0.9) * h, rng.uniform(0.1, 0.9) * w
            ry, rx = rng.uniform(0.04, 0.3) * h, rng.uniform(0.04, 0.3) * w
            m = (((ys - cy) / ry) ** 2 + ((xs - cx) / rx) ** 2 <= 1.0).astype(np.uint8)
            yy, xx = np.nonzero(m)
            boxes.append([yy.min() / h, xx.min() / w, (yy.max() + 1) / h, (xx.max() + 1) / w])
            masks.append(_png(m))
        b = np.array(boxes, np.float32)
        records.append(encode_example({
            "image/encoded": encode(img, "jpeg", 90), "image/format": b"jpeg",
            "image/height": h, "image/width": w,
            "image/object/bbox/ymin": b[:, 0].tolist(), "image/object/bbox/xmin": b[:, 1].tolist(),
            "image/object/bbox/ymax": b[:, 2].tolist(), "image/object/bbox/xmax": b[:, 3].tolist(),
            "image/object/class/label": [int(v) for v in rng.integers(0, 8, len(b))],
            "image/object/mask": masks}, schema))
    total = sum(len(r) for r in records)
    with ShardedWriter(data, "train", shard_size_bytes=total // 4 + 1) as wr:
        for r in records:
            wr.write(r)
    manifest.splits["train"] = SplitInfo([ShardEntry.from_info(i, data) for i in wr.infos])
    manifest.save(data)
    return data


def load_records(data: Path) -> list[tuple[bytes, np.ndarray, np.ndarray, list[bytes]]]:
    """(jpeg, boxes [n, 4] yxyx, classes [n], mask PNGs) of every train record."""
    from tfpipe.records import decode_example, open_source

    src = open_source(str(data), "train")
    out = []
    import tensorflow as tf

    for rec in tf.data.TFRecordDataset(list(src.files)).as_numpy_iterator():
        ex = decode_example(rec)
        boxes = np.stack([np.asarray(ex[f"image/object/bbox/{k}"], np.float32)
                          for k in ("ymin", "xmin", "ymax", "xmax")], -1)
        out.append((ex["image/encoded"][0], boxes,
                    np.asarray(ex["image/object/class/label"], np.int64),
                    list(ex["image/object/mask"])))
    return out


class Peer:
    """The recipe with OpenCV + albumentations on image, boxes and masks, in threads."""

    def __init__(self, records: list, threads: int, seed: int = 0) -> None:
        import albumentations as A
        import cv2

        self.cv2, self.records = cv2, records
        self.pool = concurrent.futures.ThreadPoolExecutor(threads)
        self.flag = getattr(cv2, "IMREAD_COLOR_RGB", None)
        self.transform = A.Compose(
            [A.HorizontalFlip(p=0.5),
             A.Affine(scale=(0.5, 1.5), translate_percent=(-0.1, 0.1), rotate=0,
                      interpolation=cv2.INTER_LINEAR, mask_interpolation=cv2.INTER_NEAREST,
                      border_mode=cv2.BORDER_CONSTANT, fill=114, fill_mask=0, p=1.0),
             A.RandomBrightnessContrast(brightness_limit=0.2, contrast_limit=0.2, p=1.0)],
            bbox_params=A.BboxParams(format="albumentations", label_fields=["ids"],
                                     clip=True, min_area=1.0), seed=seed)
        self.scale = (1.0 / (255.0 * STD)).astype(np.float32)
        self.shift = (MEAN / STD).astype(np.float32)

    def sample(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        cv2 = self.cv2
        data, boxes, _, pngs = self.records[index]
        buf = np.frombuffer(data, np.uint8)
        if self.flag is not None:
            img = cv2.imdecode(buf, self.flag)
        else:
            img = cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        img = cv2.resize(img, (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)
        masks = [cv2.resize(cv2.imdecode(np.frombuffer(p, np.uint8), cv2.IMREAD_UNCHANGED),
                            (SIZE, SIZE), interpolation=cv2.INTER_NEAREST) for p in pngs]
        xyxy = np.clip(boxes[:, [1, 0, 3, 2]], 0.0, 1.0)
        out = self.transform(image=img, masks=masks, bboxes=xyxy, ids=np.arange(len(xyxy)))
        crops = np.zeros((MAX_BOXES, CROP, CROP), np.uint8)
        for r, (box, k) in enumerate(zip(out["bboxes"][:MAX_BOXES], out["ids"])):
            x0, y0, x1, y1 = (float(v) * SIZE for v in box)
            win = out["masks"][int(k)][int(y0):max(int(y0) + 1, int(np.ceil(y1))),
                                       int(x0):max(int(x0) + 1, int(np.ceil(x1)))]
            crops[r] = cv2.resize(win, (CROP, CROP), interpolation=cv2.INTER_NEAREST)
        return out["image"], crops

    def batches(self):
        n, start = len(self.records), 0
        while True:
            idx = [(start + k) % n for k in range(BATCH)]
            start += BATCH
            out = list(self.pool.map(self.sample, idx))
            images = np.stack([o[0] for o in out]).astype(np.float32)
            images *= self.scale
            images -= self.shift
            yield images, np.stack([o[1] for o in out])


MASKS = "tfpipe detection recipe, instance masks 28x28"
BOXES = "tfpipe detection recipe, boxes only"
PEER = "peer: albumentations + OpenCV, masks (thread pool)"


def variants(data: Path, threads: int, mosaic: bool):
    from tfpipe import build_pipeline, load_config
    from tfpipe.config import parse_set_options

    opts = [f"data.path={data}", f"augment.batch.mosaic.enabled={str(mosaic).lower()}"]
    boxes = load_config("detection", parse_set_options(opts))
    masks = load_config("detection", parse_set_options(
        opts + [f"data.instance_masks={{size: [{CROP}, {CROP}]}}"]))
    records = load_records(data)

    def with_masks():
        ds = build_pipeline(masks, "train")
        assert ds.element_spec["instance_masks"].shape[1:] == (MAX_BOXES, CROP, CROP)
        return ds, True

    return {MASKS: with_masks, BOXES: lambda: (build_pipeline(boxes, "train"), True),
            PEER: lambda: (Peer(records, threads).batches(), False)}


def per_sample_cost(data: Path) -> None:
    """Bytes of an element's instance masks vs full-size masks of the same objects."""
    records = load_records(data)
    n = np.array([min(len(r[1]), MAX_BOXES) for r in records])
    print(f"objects per image: mean {n.mean():.1f}, max {n.max()}; instance_masks per sample: "
          f"{MAX_BOXES * CROP * CROP / 1024:.1f} KiB (max_boxes {MAX_BOXES} x {CROP}x{CROP}); "
          f"full-size masks at {SIZE}x{SIZE} would be {MAX_BOXES * SIZE * SIZE / 2**20:.0f} MiB "
          f"padded, {n.mean() * SIZE * SIZE / 2**20:.1f} MiB for the mean object count")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=5, help="minimum timed batches per row and round")
    p.add_argument("--seconds", type=float, default=3.0,
                   help="target timed seconds per row and round (sets the steps)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=0, help="peer threads (default: the CPUs)")
    p.add_argument("--mosaic", action="store_true", help="mosaic p 0.5 in the tfpipe rows")
    p.add_argument("--data", type=Path, help="an existing dataset dir (made by this script)")
    p.add_argument("--work", type=Path, help="where to build the data (default: temp)")
    args = p.parse_args(argv)

    from tfpipe.bench import measure
    from tfpipe.system import available_cpus

    t0 = time.time()
    tmp = None
    if args.data is None:
        if args.work is None:
            tmp = tempfile.TemporaryDirectory(prefix="tfpipe-inst-bench-")
            args.work = Path(tmp.name)
        args.data = make_data(args.work, args.images)
    cpus = available_cpus()
    threads = args.threads or max(1, int(cpus))
    print(f"data: {args.data}  cpus: {cpus}  peer threads: {threads}  "
          f"(data ready in {time.time() - t0:.0f}s)", flush=True)
    per_sample_cost(args.data)
    builders = variants(args.data, threads, args.mosaic)
    names = list(builders)

    def run(name: str, steps: int):
        ds, is_tf = builders[name]()
        nbytes = None if is_tf else SIZE * SIZE * 3 * 4 + MAX_BOXES * CROP * CROP
        return measure(ds, warmup=args.warmup, steps=steps, repeat=is_tf, element_bytes=nbytes)

    rounds, cpu_ms = H.image_rounds(names, run, args.seconds, args.steps, args.rounds, 52)
    rng = H.med_range
    print()
    print(H.table_head("row", f"images/s: median (range), {args.rounds} rounds",
                       "process CPU ms per image: median (range)"))
    for name in names:
        print(f"| {name} | {rng([r[name] for r in rounds], ',.0f')} | "
              f"{rng(cpu_ms[name], '.1f')} |")
    print()
    for i, r in enumerate(rounds):
        print(f"round {i + 1}: masks / peer {r[MASKS] / r[PEER]:.2f}x (target > 1), "
              f"masks / boxes only {r[MASKS] / r[BOXES]:.2f}x")
    print(f"masks / peer, per round: {rng([r[MASKS] / r[PEER] for r in rounds])}; "
          f"masks / boxes only: {rng([r[MASKS] / r[BOXES] for r in rounds])}")
    print(f"\ntotal {time.time() - t0:.0f}s")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
