"""Single-thread cost of the crop resize: tfpipe's native bilinear vs OpenCV vs pure TF.

The crops are what the imagenet train pipeline resizes: random-resized-crop windows
(scale 0.08-1, ratio 3/4-4/3, the preset's) of JPEG q90 crops (300-520 px) of the
real photos bundled with scikit-image / scikit-learn (`tfpipe.sample_data`, the
data of benchmarks/pipeline_bench.py), decoded once up front. Each row resizes
every crop to 224x224x3 uint8, one thread, in alternating rounds:

- `tfpipe native` -- `TfpipeResizeBilinearU8` (bit-identical to the pure-TF row),
  all crops as one graph (one op per crop, inter/intra-op threads 1), so the
  figure is the kernel plus TF's per-op executor cost, not eager dispatch;
- `pure TF` -- tf.image.resize + round + saturate_cast, the same graph shape;
- `cv2.resize INTER_LINEAR` -- `cv2.setNumThreads(1)`, a slice of the decoded
  image (crop = a view, as an OpenCV pipeline does) resized in a Python loop.
  Not the same bytes: OpenCV rounds its weights to 11-bit fixed point.

    PYTHONPATH=src .venv/bin/python benchmarks/resize_bench.py --crops 256 --rounds 5

Run it once per build (e.g. PYTHONPATH=/work/main/src, then this tree's src) to
compare kernels: the cv2 row is the yardstick common to both runs.

`--pipeline DIR` (a dataset benchmarks/pipeline_bench.py built, e.g. its
`--work DIR`/data): instead, the process CPU time (user + sys, getrusage) per
image of some of pipeline_bench's rows, alternating rounds -- on a loaded
machine CPU-ms/img moves much less than images/s, and the resize is CPU work:

    PYTHONPATH=src .venv/bin/python benchmarks/resize_bench.py --pipeline /tmp/pb/data
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SIZE = (224, 224)
RATIO = (3 / 4, 4 / 3)
CV2 = "cv2.resize INTER_LINEAR (crop view)"


def make_crops(n: int, seed: int = 0) -> list[tuple[np.ndarray, tuple[int, int, int, int]]]:
    """[(decoded image, (y, x, h, w) window)] for n JPEGs, one RRC window each."""
    from tfpipe import augment
    from tfpipe.sample_data import make_jpeg_bytes

    jpegs = make_jpeg_bytes(n, seed=seed)
    seeds = tf.constant([[seed, i] for i in range(n)], tf.int64)
    draws = augment.crop_window_draws(seeds, (0.08, 1.0), RATIO)
    out = []
    for i, enc in enumerate(jpegs):
        image = tf.io.decode_jpeg(enc, channels=3).numpy()
        win = augment.crop_window_from_draws(draws[i], image.shape[0], image.shape[1], RATIO)
        out.append((image, tuple(int(v) for v in win)))
    return out


PIPELINE_ROWS = ("decode only (full decode_jpeg, tfpipe threading)",
                 "decode-and-crop only (tfpipe threading)",
                 "tfpipe imagenet (build_pipeline)",
                 "tfpipe imagenet, pixel_stage device (uint8 + draws; L3/normalize in the step)")


def pipeline_cpu(data: str, rounds: int, batches: int) -> None:
    """CPU-ms per image of PIPELINE_ROWS (pipeline_bench's builders), alternating rounds."""
    import resource
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pipeline_bench

    rows, _ = pipeline_bench.variants(Path(data), 64)

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    # One pipeline alive at a time (a live iterator's threads keep refilling its
    # buffers while another row is timed); warm-up batches first, so the timed
    # batches are steady state: the producer is the bottleneck, its buffers stay
    # near empty and the CPU spent between the first and last timed batch is
    # theirs.
    per: dict[str, list[float]] = {k: [] for k in PIPELINE_ROWS}
    for _ in range(rounds):
        for name in PIPELINE_ROWS:
            it = iter(rows[name]().repeat())
            for _ in range(3):
                next(it)
            c0, n = cpu(), 0
            for _ in range(batches):
                n += int(tf.shape(tf.nest.flatten(next(it))[0])[0])
            per[name].append((cpu() - c0) / n * 1e3)
            del it
    ref = per[PIPELINE_ROWS[0]]
    print(f"| row ({rounds} rounds x {batches} batches of 64) | CPU-ms/img: median (range) | "
          "x decode-only CPU time: median |")
    print("|---|---|---|")
    for name in PIPELINE_ROWS:
        v = per[name]
        print(f"| {name} | {statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f}) | "
              f"{statistics.median([a / b for a, b in zip(v, ref)]):.2f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--crops", type=int, default=256)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--pipeline", metavar="DIR", help="CPU-ms/img of pipeline rows on DIR")
    p.add_argument("--batches", type=int, default=6, help="with --pipeline: batches per round")
    args = p.parse_args()
    if args.pipeline:
        return pipeline_cpu(args.pipeline, args.rounds, args.batches)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    import cv2

    from tfpipe import native

    cv2.setNumThreads(1)
    crops = make_crops(args.crops)
    contiguous = [np.ascontiguousarray(im[y:y + h, x:x + w]) for im, (y, x, h, w) in crops]
    sides = [c.shape[:2] for c in contiguous]
    print(f"{len(crops)} crops, h {min(s[0] for s in sides)}-{max(s[0] for s in sides)}, "
          f"w {min(s[1] for s in sides)}-{max(s[1] for s in sides)} -> {SIZE}; "
          f"native: {native.status()['detail']}")
    consts = [tf.constant(c) for c in contiguous]

    def graph(resize):
        @tf.function
        def run():
            # one output byte per crop keeps every op alive without a big concat
            return tf.stack([resize(c)[0, 0, 0] for c in consts])
        run()  # trace + warm
        return lambda: run().numpy()

    def tf_resize(c):
        return tf.saturate_cast(tf.round(tf.image.resize(c, SIZE, "bilinear")), tf.uint8)

    def cv2_rows():
        for im, (y, x, h, w) in crops:
            cv2.resize(im[y:y + h, x:x + w], SIZE[::-1], interpolation=cv2.INTER_LINEAR)

    rows = {CV2: cv2_rows,
            "pure TF (resize + round + saturate)": graph(tf_resize)}
    if native.available():
        rows["tfpipe native TfpipeResizeBilinearU8"] = graph(
            lambda c: native.resize_bilinear_u8(c, SIZE))
    ms: dict[str, list[float]] = {k: [] for k in rows}
    ratio: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(args.rounds):
        this = {}
        for name, fn in rows.items():
            t0 = time.perf_counter()
            fn()
            this[name] = (time.perf_counter() - t0) / len(crops) * 1e3
            ms[name].append(this[name])
        for name in rows:
            ratio[name].append(this[name] / this[CV2])
    print("| row (single thread, 224x224x3 uint8) | ms/img: min (median) | "
          "x cv2 time: median (range) |")
    print("|---|---|---|")
    for name in rows:
        r = ratio[name]
        print(f"| {name} | {min(ms[name]):.4f} ({statistics.median(ms[name]):.4f}) | "
              f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f}) |")


if __name__ == "__main__":
    main()
