"""A 256-entry-per-channel table for the colour chain vs the native pixel chain, one run.

brightness + contrast + (normalize) on a uint8 batch [64, 224, 224, 3], per image:

  native chain, float32 out   `tfpipe.native.pixel.pixel_chain(to_float=True, normalize=True)`:
                              what the imagenet float32 pipeline runs
  native chain, uint8 out     the same ops on uint8 levels (to_float=False), no normalize
  LUT, float32 out            per image: exact integer channel sums (mean of the levels),
                              a float32 [256, 1, 3] table, one `cv2.LUT` pass
  LUT, uint8 out              the same with a uint8 table (levels chain)

All one thread (TF intra-op 1, cv2.setNumThreads(1)). The LUT rows are the
peer-style implementation; whether a table can replace the chain bit for bit is
checked by `--check` (uint8 levels: yes, the mean after brightness is an exact
integer sum of table values; float32 [0, 1] intermediates: no, contrast's mean
is the pairwise tree over the pixels' float values, which a histogram cannot
reproduce -- see docs/performance-history.md, "Peers").

    .venv/bin/python benchmarks/lut_bench.py [--seconds 1.0] [--check]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfpipe.native import pixel as native_pixel  # noqa: E402
from tfpipe.sample_data import source_photos  # noqa: E402

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
OPS = ["brightness", "contrast"]


def batch(n: int = 64, size: int = 224) -> np.ndarray:
    srcs = list(source_photos().values())
    return np.stack([cv2.resize(srcs[i % len(srcs)], (size, size), interpolation=cv2.INTER_AREA)
                     for i in range(n)])


def levels_table(image: np.ndarray, delta: float, factor: float) -> np.ndarray:
    """uint8 [256, 1, C]: the levels chain (color.Levels) as a table, float32 ops in
    the twin's order: brightness x + delta * 255 -> round, clip; contrast with the
    exact integer mean of the brightened levels -> round, clip."""
    v = np.arange(256, dtype=np.float32)
    b = np.clip(np.rint(v + np.float32(delta) * np.float32(255.0)), 0, 255).astype(np.float32)
    n = image.shape[0] * image.shape[1]
    out = []
    for ch in range(image.shape[2]):
        hist = np.bincount(image[..., ch].ravel(), minlength=256).astype(np.int64)
        total = int((hist * b.astype(np.int64)).sum())       # exact
        m = np.float32(total / n)                              # one rounding, as pixel.cc
        c = (b - m) * np.float32(factor) + m
        out.append(np.clip(np.rint(c), 0, 255))
    return np.stack(out, -1).astype(np.uint8)[:, None, :]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--check", action="store_true", help="uint8 table == native levels chain")
    args = p.parse_args(argv)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    cv2.setNumThreads(1)
    x = batch()
    b = x.shape[0]
    rng = np.random.default_rng(0)
    params = np.stack([rng.uniform(-0.4, 0.4, b), rng.uniform(0.6, 1.4, b)], 1).astype(np.float32)
    apply = np.ones_like(params, bool)
    xt, pt, at = tf.constant(x), tf.constant(params), tf.constant(apply)

    def chain(to_float: bool, normalize: bool):
        return lambda: native_pixel.pixel_chain(xt, pt, at, OPS, [False, False], to_float=to_float,
                                                normalize=normalize, mean=MEAN, std=STD).numpy()

    mean, std = np.array(MEAN, np.float64), np.array(STD, np.float64)

    def lut_float() -> None:
        for i in range(b):
            d, f = float(params[i, 0]), float(params[i, 1])
            means = np.array(cv2.mean(x[i])[:3]) / 255.0
            v = np.arange(256)[:, None] / 255.0
            bb = np.clip(v + d, 0, 1)
            m = np.clip(means + d, 0, 1)
            t = ((np.clip((bb - m) * f + m, 0, 1) - mean) / std).astype(np.float32)
            cv2.LUT(x[i], t[:, None, :])

    def lut_u8() -> None:
        for i in range(b):
            cv2.LUT(x[i], levels_table(x[i], float(params[i, 0]), float(params[i, 1])))

    rows = {"native chain, float32 out (normalized)": chain(True, True),
            "native chain, uint8 out": chain(False, False),
            "LUT (cv2.LUT), float32 out (normalized)": lut_float,
            "LUT (cv2.LUT), uint8 out": lut_u8}
    if args.check:
        native_u8 = chain(False, False)()
        table = np.stack([cv2.LUT(x[i], levels_table(x[i], float(params[i, 0]), float(params[i, 1])))
                          for i in range(b)])
        diff = int((native_u8 != table).sum())
        print(f"uint8 levels: table vs native chain: {diff} of {table.size} values differ")
    times: dict[str, list[float]] = {k: [] for k in rows}
    for fn in rows.values():
        fn()
    for _ in range(args.rounds):
        for name, fn in rows.items():
            n, c0 = 0, time.process_time()
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < args.seconds / args.rounds:
                fn()
                n += 1
            times[name].append((time.process_time() - c0) / (n * b) * 1e3)
    ref = times["native chain, float32 out (normalized)"]
    print("| variant (1 thread) | CPU ms / image: median (range) | x native float32 chain time |")
    print("|---|---|---|")
    for name, t in rows.items():
        v = times[name]
        ratio = [a / r for a, r in zip(v, ref)]
        print(f"| {name} | {np.median(v):.3f} ({min(v):.3f}-{max(v):.3f}) | "
              f"{np.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
