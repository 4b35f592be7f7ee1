"""Side by side: the tfpipe `pose` preset (detection + keypoints: flip with the
left/right swap, affine rotation 30 / scale 0.75-1.5 / translate 0.08,
brightness/contrast, float32) with keypoints, the same preset boxes-only
(`data.keypoints: null`), and the same recipe in albumentations + OpenCV with
boxes and keypoints.

    .venv/bin/python benchmarks/keypoints_bench.py --images 200 --rounds 3 --seconds 3

Size: `--size` (default 384x384) overrides data.image_size; everything else is the
preset as shipped (batch 16, max_boxes 20).

Data: `--images` JPEGs (q90, longer side 300-500 px) cut from the photos bundled with
scikit-image / scikit-learn (`tfpipe.sample_data`), 1-6 "people" each: a box and the 17
COCO person keypoints inside it (visibility 2 / 1 / 0 at 70 / 15 / 15 %), written with
`tfpipe.records` (`detection_schema(keypoints=True)`, the manifest's
`source["keypoints"]` with COCO's names and skeleton) into 4 shards. Reuse with --data DIR.

Rows, measured in alternating rounds (images/s; ratios are taken within a round):
- tfpipe, keypoints: `build_pipeline(load_config("pose", size), "train")`;
- tfpipe, boxes only: the same with `data.keypoints=null` (points neither parsed into
  the element nor moved);
- peer: a thread pool of `--threads` (default: the CPUs; OpenCV and albumentations
  release the GIL in their kernels) in this one process runs, per sample,
  `cv2.imdecode` (RGB) -> `cv2.resize` to the output size -> albumentations
  `HorizontalFlip` + `Affine(rotate 30, scale 0.75-1.5, translate 0.08, fill 0)` +
  `RandomBrightnessContrast`, with `BboxParams(clip)` and
  `KeypointParams("xy", remove_invisible=False)`; then the kept boxes' points gathered
  (their object ids ride as labels), points outside the output set absent, boxes and
  points padded to max_boxes, the ImageNet normalize to float32. The peer reads its
  bytes and annotations from memory (loaded once before timing) and does not swap
  left/right points after a flip: both favour it.

Targets (issue #24): tfpipe ahead of the peer in every round; the keypoint path
within 10% of boxes-only (>= 0.9x).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # noqa: E402 - benchmarks/_harness.py

BATCH = 16
MAX_BOXES = 20
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
COCO_NAMES = ["nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
              "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist",
              "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle"]
COCO_SKELETON = [[15, 13], [13, 11], [16, 14], [14, 12], [11, 12], [5, 11], [6, 12], [5, 6],
                 [5, 7], [6, 8], [7, 9], [8, 10], [1, 2], [0, 1], [0, 2], [1, 3], [2, 4],
                 [3, 5], [4, 6]]
K = len(COCO_NAMES)


def make_data(root: Path, images: int, seed: int = 0) -> Path:
    """Photos with random people (box + 17 points) -> 4 shards + manifest under root/data."""
    from tfpipe.records import (Manifest, ShardedWriter, ShardEntry, SplitInfo,
                                detection_schema, encode_example)
    from tfpipe.sample_data import encode, random_crop, source_photos

    data = root / "data"
    if (data / "manifest.json").exists():
        return data
    rng = np.random.default_rng(seed)
    photos = list(source_photos().values())
    schema = detection_schema(keypoints=True)
    records = []
    for i in range(images):
        img = random_crop(photos[i % len(photos)], rng, (300, 500))
        h, w = img.shape[:2]
        n = int(rng.integers(1, 7))
        boxes, ys, xs, vs = [], [], [], []
        for _ in range(n):
            bh, bw = rng.uniform(0.2, 0.7), rng.uniform(0.1, 0.4)
            y0, x0 = rng.uniform(0, 1 - bh), rng.uniform(0, 1 - bw)
            boxes.append([y0, x0, y0 + bh, x0 + bw])
            v = rng.choice([2, 1, 0], K, p=[0.7, 0.15, 0.15])
            ys += np.where(v > 0, rng.uniform(y0, y0 + bh, K), 0).tolist()
            xs += np.where(v > 0, rng.uniform(x0, x0 + bw, K), 0).tolist()
            vs += v.tolist()
        b = np.array(boxes, np.float32)
        records.append(encode_example({
            "image/encoded": encode(img, "jpeg", 90), "image/format": "jpeg",
            "image/height": h, "image/width": w,
            "image/object/bbox/ymin": b[:, 0].tolist(), "image/object/bbox/xmin": b[:, 1].tolist(),
            "image/object/bbox/ymax": b[:, 2].tolist(), "image/object/bbox/xmax": b[:, 3].tolist(),
            "image/object/class/label": [0] * n, "image/object/class/text": [b"person"] * n,
            "image/object/keypoint/y": ys, "image/object/keypoint/x": xs,
            "image/object/keypoint/visibility": vs}, schema))
    total = sum(len(r) for r in records)
    m = Manifest(schema=schema, class_names=["person"], compression=None, settings={},
                 source={"kind": "synthetic people (benchmarks/keypoints_bench.py)",
                         "keypoints": {"names": COCO_NAMES, "skeleton": COCO_SKELETON}})
    with ShardedWriter(data, "train", total // 4 + 1, None) as wr:
        for r in records:
            wr.write(r)
    m.splits["train"] = SplitInfo([ShardEntry.from_info(i, data) for i in wr.infos], [])
    m.save(data)
    return data


def load_records(data: Path) -> list[tuple[bytes, np.ndarray, np.ndarray]]:
    """(jpeg bytes, boxes [n, 4] normalized yxyx, points [n, K, 3]) per train record."""
    import tensorflow as tf

    from tfpipe.bench import baselines as B

    files, compression = B.shard_files(str(data), "train")
    keys = [f"image/object/bbox/{k}" for k in ("ymin", "xmin", "ymax", "xmax")]
    pkeys = ["image/object/keypoint/y", "image/object/keypoint/x"]
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            **{k: tf.io.VarLenFeature(tf.float32) for k in keys + pkeys},
            "image/object/keypoint/visibility": tf.io.VarLenFeature(tf.int64)}
    out = []
    for rec in tf.data.TFRecordDataset(files, compression_type=compression or ""):
        ex = {k: (tf.sparse.to_dense(v) if isinstance(v, tf.SparseTensor) else v).numpy()
              for k, v in tf.io.parse_single_example(rec, spec).items()}
        boxes = np.stack([ex[k] for k in keys], -1).astype(np.float32)
        pts = np.stack([ex[pkeys[0]], ex[pkeys[1]],
                        ex["image/object/keypoint/visibility"].astype(np.float32)], -1)
        out.append((ex["image/encoded"], boxes, pts.reshape(-1, K, 3).astype(np.float32)))
    return out


class Peer:
    """The preset's recipe with OpenCV + albumentations on boxes and keypoints, in threads."""

    def __init__(self, records: list, threads: int, size: tuple[int, int], seed: int = 0
                 ) -> None:
        import albumentations as A
        import cv2

        self.cv2, self.records, self.size = cv2, records, size
        self.pool = concurrent.futures.ThreadPoolExecutor(threads)
        self.flag = getattr(cv2, "IMREAD_COLOR_RGB", None)
        self.transform = A.Compose(
            [A.HorizontalFlip(p=0.5),
             A.Affine(rotate=(-30, 30), scale=(0.75, 1.5), translate_percent=(-0.08, 0.08),
                      interpolation=cv2.INTER_LINEAR, border_mode=cv2.BORDER_CONSTANT,
                      fill=0, p=1.0),
             A.RandomBrightnessContrast(brightness_limit=0.2, contrast_limit=0.2, p=1.0)],
            bbox_params=A.BboxParams(format="albumentations", label_fields=["ids"], clip=True,
                                     min_area=1.0),
            keypoint_params=A.KeypointParams(format="xy", label_fields=["owners"],
                                             remove_invisible=False),
            seed=seed)
        self.scale = (1.0 / (255.0 * STD)).astype(np.float32)
        self.shift = (MEAN / STD).astype(np.float32)

    def sample(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cv2 = self.cv2
        data, boxes, pts = self.records[index]
        buf = np.frombuffer(data, np.uint8)
        if self.flag is not None:
            img = cv2.imdecode(buf, self.flag)
        else:
            img = cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        h, w = self.size
        img = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)
        xyxy = np.clip(boxes[:, [1, 0, 3, 2]], 0.0, 1.0)
        xy = np.stack([pts[..., 1] * w, pts[..., 0] * h], -1).reshape(-1, 2)
        owners = np.repeat(np.arange(len(boxes)), K)
        out = self.transform(image=img, bboxes=xyxy, ids=np.arange(len(boxes)),
                             keypoints=xy, owners=owners)
        kept = np.asarray(out["ids"], np.int64)[:MAX_BOXES]
        b = np.zeros((MAX_BOXES, 4), np.float32)
        kept_boxes = np.asarray(out["bboxes"], np.float32).reshape(-1, 4)[:MAX_BOXES]
        b[:len(kept)] = kept_boxes[:, [1, 0, 3, 2]]  # xyxy -> yxyx
        moved = np.asarray(out["keypoints"], np.float32)[:, :2].reshape(-1, K, 2)[kept]
        vis = pts[kept, :, 2]
        inside = (vis > 0) & (moved[..., 0] >= 0) & (moved[..., 0] <= w) \
            & (moved[..., 1] >= 0) & (moved[..., 1] <= h)
        p = np.zeros((MAX_BOXES, K, 3), np.float32)
        p[:len(kept)] = np.where(inside[..., None], np.stack(
            [moved[..., 1] / h, moved[..., 0] / w, vis], -1), 0.0)
        return out["image"], b, p

    def batches(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        n, start = len(self.records), 0
        while True:
            idx = [(start + k) % n for k in range(BATCH)]
            start += BATCH
            out = list(self.pool.map(self.sample, idx))
            images = np.stack([o[0] for o in out]).astype(np.float32)
            images *= self.scale
            images -= self.shift
            yield images, np.stack([o[1] for o in out]), np.stack([o[2] for o in out])


KP = "tfpipe pose preset (boxes + keypoints)"
BOXES = "tfpipe pose preset, boxes only"
PEER = "peer: albumentations + OpenCV, boxes + keypoints (thread pool)"


def variants(data: Path, threads: int, size: tuple[int, int]):
    from tfpipe import build_pipeline, load_config
    from tfpipe.config import parse_set_options

    sets = [f"data.path={data}", f"data.image_size=[{size[0]},{size[1]}]"]
    cfg = load_config("pose", parse_set_options(sets))
    boxes_only = load_config("pose", parse_set_options(sets + ["data.keypoints=null"]))
    assert boxes_only.data.keypoints is None
    records = load_records(data)
    return {
        KP: lambda: (build_pipeline(cfg, "train"), True),
        BOXES: lambda: (build_pipeline(boxes_only, "train"), True),
        PEER: lambda: (Peer(records, threads, size).batches(), False),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=200)
    p.add_argument("--size", default="384,384", help="output height,width (data.image_size)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=5,
                   help="minimum timed batches per variant and round")
    p.add_argument("--seconds", type=float, default=3.0,
                   help="target timed seconds per variant and round (sets the steps)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=0, help="peer threads (default: the CPUs)")
    p.add_argument("--data", type=Path, help="an existing dataset dir made by this script")
    p.add_argument("--work", type=Path, help="where to build the sample data (default: temp)")
    args = p.parse_args(argv)
    size = tuple(int(v) for v in args.size.split(","))
    assert len(size) == 2, "--size is HEIGHT,WIDTH"

    from tfpipe.bench import measure
    from tfpipe.system import available_cpus

    t0 = time.time()
    tmp = None
    if args.data is None:
        if args.work is None:
            tmp = tempfile.TemporaryDirectory(prefix="tfpipe-kp-bench-")
            args.work = Path(tmp.name)
        args.data = make_data(args.work, args.images)
    cpus = available_cpus()
    threads = args.threads or max(1, int(cpus))
    print(f"data: {args.data}  cpus: {cpus}  peer threads: {threads}  output {size[0]}x{size[1]}"
          f"  (data ready in {time.time() - t0:.0f}s)", flush=True)
    builders = variants(args.data, threads, size)
    names = list(builders)

    def run(name: str, steps: int):
        ds, is_tf = builders[name]()
        # the peer yields NumPy arrays: bytes per element given, not counted
        nbytes = None if is_tf else size[0] * size[1] * 3 * 4 + MAX_BOXES * (4 + K * 3) * 4
        return measure(ds, warmup=args.warmup, steps=steps, repeat=is_tf, element_bytes=nbytes)

    rounds, cpu_ms = H.image_rounds(names, run, args.seconds, args.steps, args.rounds, 64)
    rng = H.med_range

    print()
    print(H.table_head("variant", f"images/s: median (range), {args.rounds} rounds",
                       "process CPU ms per image: median (range)"))
    for name in names:
        print(f"| {name} | {rng([r[name] for r in rounds], ',.0f')} | "
              f"{rng(cpu_ms[name], '.1f')} |")
    print()
    for i, r in enumerate(rounds):
        print(f"round {i + 1}: tfpipe / peer {r[KP] / r[PEER]:.2f}x (target > 1), "
              f"keypoints / boxes only {r[KP] / r[BOXES]:.2f}x (target >= 0.9)")
    vs_peer = [r[KP] / r[PEER] for r in rounds]
    vs_boxes = [r[KP] / r[BOXES] for r in rounds]
    print(f"tfpipe / peer, per round: {rng(vs_peer)}; by CPU time: "
          f"{rng([b / a for a, b in zip(cpu_ms[KP], cpu_ms[PEER])])}")
    print(f"keypoints / boxes only, per round: {rng(vs_boxes)}; by CPU time: "
          f"{rng([b / a for a, b in zip(cpu_ms[KP], cpu_ms[BOXES])])}")
    met = min(vs_peer) > 1.0 and min(vs_boxes) >= 0.9
    print(f"targets {'met' if met else 'NOT met'} in every round")
    print(f"\ntotal {time.time() - t0:.0f}s")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
