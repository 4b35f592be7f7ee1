"""Side by side: the tfpipe detection preset (flip, scale/translate affine,
brightness/contrast, mosaic p 0.5, 512x512 float32, batch 16) with and without
mosaic, without affine and mosaic, decode-only, and the same recipe written with
OpenCV / albumentations / NumPy.

    .venv/bin/python benchmarks/detection_bench.py --images 300 --rounds 3 --seconds 3
    .venv/bin/python benchmarks/detection_bench.py --kernel   # augment.mosaic alone

Data: `--images` COCO-style JPEGs (q90, longer side 300-500 px) cut from the photos
bundled with scikit-image / scikit-learn (`tfpipe.sample_data`), 1-8 random boxes
each, written as a COCO JSON and converted with `tfpipe.convert.convert` (the COCO
source) into 4 shards. Reuse with --data DIR (a converted dataset).

Rows, measured in alternating rounds (each figure is images/s; ratios are taken
within a round):
- tfpipe detection preset (`load_config("detection")`), mosaic on / off, affine and
  mosaic off;
- decode-only: full `decode_jpeg` of every record with tfpipe's threading
  (`tfpipe.bench.baselines.decode_only_like`);
- peer: a thread pool (as many threads as CPUs; OpenCV and albumentations release the
  GIL in their kernels) runs, per sample, `cv2.imdecode` (RGB) -> `cv2.resize` to
  512x512 -> albumentations `HorizontalFlip` + `Affine(scale, translate, fill 114)`
  with boxes -> `RandomBrightnessContrast`; then, per output sample with p 0.5, a
  NumPy/cv2 mosaic (each of the 4 partners `cv2.resize`d by 0.5 and pasted into its
  quadrant, boxes scaled, shifted, clipped, filtered) and the ImageNet normalize to
  float32. The peer reads its JPEG bytes and boxes from memory (loaded once before
  timing), which favours it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
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
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def make_data(root: Path, images: int, seed: int = 0) -> Path:
    """COCO JSON + JPEGs under root/coco -> converted shards under root/data."""
    from tfpipe.sample_data import encode, random_crop, source_photos

    data = root / "data"
    if (data / "manifest.json").exists():
        return data
    rng = np.random.default_rng(seed)
    photos = list(source_photos().values())
    img_dir = root / "coco" / "images"
    img_dir.mkdir(parents=True, exist_ok=True)
    coco: dict = {"images": [], "annotations": [],
                  "categories": [{"id": k + 1, "name": f"class{k}"} for k in range(8)]}
    for i in range(images):
        img = random_crop(photos[i % len(photos)], rng, (300, 500))
        h, w = img.shape[:2]
        name = f"{i:06d}.jpg"
        (img_dir / name).write_bytes(encode(img, "jpeg", 90))
        coco["images"].append({"id": i + 1, "file_name": name, "width": w, "height": h})
        for _ in range(int(rng.integers(1, 9))):
            bw, bh = rng.uniform(0.08, 0.6) * w, rng.uniform(0.08, 0.6) * h
            x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
            coco["annotations"].append({
                "id": len(coco["annotations"]) + 1, "image_id": i + 1,
                "category_id": int(rng.integers(1, 9)),
                "bbox": [round(x, 2), round(y, 2), round(bw, 2), round(bh, 2)]})
    ann = root / "coco" / "annotations.json"
    ann.write_text(json.dumps(coco))
    from tfpipe.convert import convert

    total = sum(f.stat().st_size for f in img_dir.iterdir())
    convert(str(ann), str(data), format="coco", images=str(img_dir),
            shard_size=total // 4 + 1, seed=seed)
    return data


def load_records(data: Path) -> list[tuple[bytes, np.ndarray, np.ndarray]]:
    """(jpeg bytes, boxes [n,4] normalized yxyx, classes [n]) of every train record."""
    import tensorflow as tf

    from tfpipe.bench import baselines as B

    files, compression = B.shard_files(str(data), "train")
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            **{f"image/object/bbox/{k}": tf.io.VarLenFeature(tf.float32)
               for k in ("ymin", "xmin", "ymax", "xmax")},
            "image/object/class/label": tf.io.VarLenFeature(tf.int64)}
    out = []
    for rec in tf.data.TFRecordDataset(files, compression_type=compression or ""):
        ex = tf.io.parse_single_example(rec, spec)
        boxes = np.stack([tf.sparse.to_dense(ex[f"image/object/bbox/{k}"]).numpy()
                          for k in ("ymin", "xmin", "ymax", "xmax")], axis=-1)
        out.append((ex["image/encoded"].numpy(), boxes.astype(np.float32),
                    tf.sparse.to_dense(ex["image/object/class/label"]).numpy()))
    return out


class Peer:
    """The same recipe with OpenCV + albumentations + NumPy in a thread pool."""

    def __init__(self, records: list, threads: int, seed: int = 0) -> None:
        import albumentations as A
        import cv2

        self.cv2 = cv2
        self.records = records
        self.pool = concurrent.futures.ThreadPoolExecutor(threads)
        self.rng = np.random.default_rng(seed)
        self.flag = getattr(cv2, "IMREAD_COLOR_RGB", None)
        self.transform = A.Compose(
            [A.HorizontalFlip(p=0.5),
             A.Affine(scale=(0.5, 1.5), translate_percent=(-0.1, 0.1), rotate=0,
                      interpolation=cv2.INTER_LINEAR, border_mode=cv2.BORDER_CONSTANT,
                      fill=114, p=1.0),
             A.RandomBrightnessContrast(brightness_limit=0.2, contrast_limit=0.2, p=1.0)],
            bbox_params=A.BboxParams(format="albumentations", label_fields=["classes"],
                                     clip=True, min_area=1.0))
        self.scale = (1.0 / (255.0 * STD)).astype(np.float32)
        self.shift = (MEAN / STD).astype(np.float32)

    def sample(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cv2 = self.cv2
        data, boxes, classes = self.records[index]
        buf = np.frombuffer(data, np.uint8)
        if self.flag is not None:
            img = cv2.imdecode(buf, self.flag)
        else:
            img = cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        img = cv2.resize(img, (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)
        xyxy = np.clip(boxes[:, [1, 0, 3, 2]], 0.0, 1.0)
        ok = (xyxy[:, 2] > xyxy[:, 0]) & (xyxy[:, 3] > xyxy[:, 1])
        out = self.transform(image=img, bboxes=xyxy[ok], classes=classes[ok])
        b = np.asarray(out["bboxes"], np.float32).reshape(-1, 4)
        return out["image"], b, np.asarray(out["classes"], np.int64)

    def mosaic(self, batch: list, i: int, partners: list[int], cx: int, cy: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cv2 = self.cv2
        half = SIZE // 2
        canvas = np.zeros((SIZE, SIZE, 3), np.uint8)
        all_b, all_c = [], []
        origins = [(cx - half, cy - half), (cx, cy - half), (cx - half, cy), (cx, cy)]
        for q, j in enumerate([i] + partners):
            img, boxes, classes = batch[j]
            tile = cv2.resize(img, (half, half), interpolation=cv2.INTER_LINEAR)
            ox, oy = origins[q]
            # quadrant of the canvas this tile may fill
            qx0, qx1 = (0, cx) if q in (0, 2) else (cx, SIZE)
            qy0, qy1 = (0, cy) if q in (0, 1) else (cy, SIZE)
            x0, x1 = max(qx0, ox), min(qx1, ox + half)
            y0, y1 = max(qy0, oy), min(qy1, oy + half)
            if x1 > x0 and y1 > y0:
                canvas[y0:y1, x0:x1] = tile[y0 - oy:y1 - oy, x0 - ox:x1 - ox]
            if len(boxes):
                px = boxes * half + np.array([ox, oy, ox, oy], np.float32)
                clipped = np.stack([np.clip(px[:, 0], qx0, qx1), np.clip(px[:, 1], qy0, qy1),
                                    np.clip(px[:, 2], qx0, qx1), np.clip(px[:, 3], qy0, qy1)], 1)
                area = (clipped[:, 2] - clipped[:, 0]) * (clipped[:, 3] - clipped[:, 1])
                full = (px[:, 2] - px[:, 0]) * (px[:, 3] - px[:, 1])
                keep = (area >= 4.0) & (area >= 0.1 * full)
                all_b.append(clipped[keep] / SIZE)
                all_c.append(classes[keep])
        b = np.concatenate(all_b) if all_b else np.zeros((0, 4), np.float32)
        c = np.concatenate(all_c) if all_c else np.zeros((0,), np.int64)
        return canvas, b, c

    def batches(self):
        n = len(self.records)
        start = 0
        while True:
            idx = [(start + k) % n for k in range(BATCH)]
            start += BATCH
            batch = list(self.pool.map(self.sample, idx))
            jobs = []
            for i in range(BATCH):
                if self.rng.random() < 0.5:
                    partners = [int(v) for v in self.rng.integers(0, BATCH, 3)]
                    cx, cy = (int(round(v * SIZE)) for v in self.rng.uniform(0.25, 0.75, 2))
                    jobs.append(self.pool.submit(self.mosaic, batch, i, partners, cx, cy))
                else:
                    jobs.append(None)
            out = [batch[i] if job is None else job.result() for i, job in enumerate(jobs)]
            images = np.stack([o[0] for o in out]).astype(np.float32)
            images *= self.scale
            images -= self.shift
            boxes = np.zeros((BATCH, MAX_BOXES, 4), np.float32)
            for i, o in enumerate(out):
                k = min(len(o[1]), MAX_BOXES)
                boxes[i, :k] = o[1][:k]
            yield images, boxes


def previous_mosaic_images(images, partners, cx, cy, scale: float = 0.5):
    """The definition before this one (kept here only to measure it): every tile
    warped over the WHOLE canvas with `augment.affine` and a quadrant kept of each."""
    import tensorflow as tf

    from tfpipe import augment as A

    b = tf.shape(images)[0]
    h, w = images.shape[1], images.shape[2]
    xs = tf.range(w, dtype=tf.float32)[None, None, :] + 0.5
    ys = tf.range(h, dtype=tf.float32)[None, :, None] + 0.5
    left, top = xs < cx[:, None, None], ys < cy[:, None, None]
    masks = [top & left, top & ~left, ~top & left, ~top & ~left]
    sw, sh = scale * w, scale * h
    offsets = [(cx - sw, cy - sh), (cx, cy - sh), (cx - sw, cy), (cx, cy)]
    canvas = tf.zeros_like(images)
    for q in range(4):
        tx, ty = offsets[q]
        m = A.compose(A.translate_matrix(tf.fill([b], 0.5), tf.fill([b], 0.5)),
                      A.scale_matrix(tf.fill([b], scale)),
                      A.translate_matrix(tx - 0.5, ty - 0.5))
        tile = A.affine(tf.gather(images, partners[q]), m, (h, w), "bilinear", "constant", 0.0)
        canvas = tf.where(masks[q][..., None], tile, canvas)
    return canvas


def kernel_bench(rounds: int, reps: int = 3) -> None:
    """augment.mosaic on a 16x512x512x3 batch (p 1): native, pure-TF twin, and the
    previous definition on uint8 and on float32 (where the pipeline ran it)."""
    import tensorflow as tf

    from tfpipe import augment as A
    from tfpipe import native

    rng = np.random.default_rng(0)
    x = tf.constant(rng.integers(0, 256, (BATCH, SIZE, SIZE, 3), dtype=np.uint8))
    xf = tf.cast(x, tf.float32) / 255.0
    boxes = tf.zeros([BATCH, MAX_BOXES, 4])
    classes = tf.fill([BATCH, MAX_BOXES], tf.constant(-1, tf.int64))
    num = tf.zeros([BATCH], tf.int32)
    partners = [tf.range(BATCH)] + [tf.constant(rng.permutation(BATCH), tf.int32)
                                    for _ in range(3)]
    cx = tf.constant(rng.integers(128, 384, BATCH), tf.float32)
    cy = tf.constant(rng.integers(128, 384, BATCH), tf.float32)
    fns = {}
    for name, pure in (("augment.mosaic uint8, native TfpipeMosaic", False),
                       ("augment.mosaic uint8, pure-TF twin", True)):
        with native.pure_tf() if pure else _Nothing():
            fns[name] = tf.function(lambda s: A.mosaic(x, boxes, classes, num, s)[0]
                                    ).get_concrete_function(tf.TensorSpec([2], tf.int32))
    fns["previous definition, uint8 (4 full-canvas warps)"] = tf.function(
        lambda s: previous_mosaic_images(x, partners, cx, cy)).get_concrete_function(
        tf.TensorSpec([2], tf.int32))
    fns["previous definition, float32 (as the pipeline ran it)"] = tf.function(
        lambda s: previous_mosaic_images(xf, partners, cx, cy)).get_concrete_function(
        tf.TensorSpec([2], tf.int32))
    times: dict[str, list[float]] = {n: [] for n in fns}
    for rnd in range(rounds):
        for name, fn in (fns.items() if rnd % 2 == 0 else reversed(list(fns.items()))):
            fn(tf.constant([0, 0])).numpy()
            t = time.perf_counter()
            for i in range(reps):
                fn(tf.constant([rnd, i])).numpy()
            times[name].append((time.perf_counter() - t) / reps / BATCH * 1e3)
    first = next(iter(fns))
    print(f"| mosaic of a {BATCH}x{SIZE}x{SIZE}x3 batch, p 1 | ms per image: median (range) "
          f"| x native |")
    print("|---|---|---|")
    for name, t in times.items():
        ratio = [a / b for a, b in zip(t, times[first])]
        print(f"| {name} | {statistics.median(t):.2f} ({min(t):.2f}-{max(t):.2f}) | "
              f"{statistics.median(ratio):.1f} ({min(ratio):.1f}-{max(ratio):.1f}) |")


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


REF = "decode only (full decode_jpeg, tfpipe threading)"
MOSAIC = "tfpipe detection preset (mosaic p 0.5)"
NO_MOSAIC = "tfpipe detection preset without mosaic"
PEER = "peer: cv2 + albumentations + NumPy mosaic (thread pool)"


def variants(data: Path, threads: int):
    from tfpipe import build_pipeline, load_config
    from tfpipe.bench import baselines as B
    from tfpipe.config import parse_set_options
    from tfpipe.pipeline import map_parallelism, settings

    def cfg(*extra: str):
        return load_config("detection", parse_set_options([f"data.path={data}", *extra]))

    base = cfg()
    npc = int(map_parallelism(settings(base)))
    records = load_records(data)
    return {
        MOSAIC: lambda: (build_pipeline(base, "train"), True),
        NO_MOSAIC: lambda: (build_pipeline(cfg("augment.batch.mosaic.enabled=false"),
                                           "train"), True),
        "tfpipe detection preset without affine and mosaic": lambda: (build_pipeline(
            cfg("augment.batch.mosaic.enabled=false", "augment.geometry.affine.enabled=false"),
            "train"), True),
        PEER: lambda: (Peer(records, threads).batches(), False),
        REF: lambda: (B.decode_only_like(base, npc), True),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=5, help="minimum timed batches per variant and round")
    p.add_argument("--seconds", type=float, default=3.0,
                   help="target timed seconds per variant and round (sets the steps)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--data", type=Path, help="an existing converted dataset dir")
    p.add_argument("--work", type=Path, help="where to build the sample data (default: a temp dir)")
    p.add_argument("--kernel", action="store_true",
                   help="time augment.mosaic alone (native, pure TF, previous definition)")
    args = p.parse_args(argv)
    if args.kernel:
        kernel_bench(args.rounds)
        return 0

    from tfpipe.bench import measure
    from tfpipe.system import available_cpus

    t0 = time.time()
    tmp = None
    if args.data is None:
        if args.work is None:
            tmp = tempfile.TemporaryDirectory(prefix="tfpipe-det-bench-")
            args.work = Path(tmp.name)
        args.data = make_data(args.work, args.images)
    cpus = available_cpus()
    print(f"data: {args.data}  cpus: {cpus}  (data ready in {time.time() - t0:.0f}s)",
          flush=True)
    builders = variants(args.data, max(1, int(cpus)))
    names = list(builders)

    def run(name: str, steps: int):
        ds, is_tf = builders[name]()
        # the peer yields NumPy arrays: bytes per element given, not counted
        nbytes = None if is_tf else SIZE * SIZE * 3 * 4 + MAX_BOXES * 4 * 4
        return measure(ds, warmup=args.warmup, steps=steps, repeat=is_tf, element_bytes=nbytes)

    # equal time per row, as in pipeline_bench.py (_harness.sized_steps: a 3-step probe
    # asking for more than 10 x --steps is probed again over that many)
    rounds, cpu_ms = H.image_rounds(names, run, args.seconds, args.steps, args.rounds, 58)
    rng = H.med_range

    print()
    print(H.table_head("variant", f"images/s: median (range), {args.rounds} rounds",
                       "x decode-only: median (range)",
                       "process CPU ms per image: median (range)"))
    for name in names:
        rates = [r[name] for r in rounds]
        ratio = [r[name] / r[REF] for r in rounds]
        print(f"| {name} | {rng(rates, ',.0f')} | {rng(ratio)} | {rng(cpu_ms[name], '.1f')} |")
    print()
    print(f"mosaic / no mosaic, per round: {rng([r[MOSAIC] / r[NO_MOSAIC] for r in rounds])}"
          f"; by CPU time: {rng([b / a for a, b in zip(cpu_ms[MOSAIC], cpu_ms[NO_MOSAIC])])}")
    print(f"tfpipe (mosaic) / peer, per round: {rng([r[MOSAIC] / r[PEER] for r in rounds])}"
          f"; by CPU time: {rng([b / a for a, b in zip(cpu_ms[MOSAIC], cpu_ms[PEER])])}")
    print(f"\ntotal {time.time() - t0:.0f}s")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
