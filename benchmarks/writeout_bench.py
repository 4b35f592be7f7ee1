"""The host L3 + normalize write-out vs the memory floor, ONE run (issue #12, section 3).

    PYTHONPATH=src .venv/bin/python benchmarks/writeout_bench.py [--batch 64] [--size 224]
        [--rounds 5] [--calls 6] [--threads 1]

Times `TfpipePixelChain` (tfpipe.native.pixel, what `FusedPixel` and `normalizer`
run) on one in-memory uint8 batch [B,H,W,3] of photos, warm eager calls, next
to the floors a float32 write-out cannot beat:

  np.copyto f32        copy a float32 batch of the same shape (read + write 4 B/elem)
  u8 -> f32 cast        NumPy `dst[...] = src` into a preallocated float32 batch
  tf.cast u8 -> f32     TF's cast (allocates the output, as the op does)
  normalize alone       `fast.normalizer(imagenet mean, std)` (the no-L3 path)
  b + c + norm          brightness 0.4, contrast 0.6..1.4, normalize (the bench pipeline's chain)
  b + c + s + norm      + saturation 0.6..1.4 (the imagenet preset's chain)
  b + c, uint8 out      the levels chain (uint8 output mode)
  b + c (p 0.5) + norm  both ops gated, half the images skip each

Per variant: wall ms/img (min, median over rounds; each round = `--calls` calls),
CPU ms/img (process_time: all threads) and minor page faults per image (0 for
the op: TF's allocator reuses its memory, where a fresh NumPy float32 batch,
above glibc's mmap threshold, faults in every page). `--threads` sets TF's
intra-op pool (the op shards images over it). Run the same command against two
trees (PYTHONPATH=...) back to back to compare kernels, and with
--baseline-isa for the SSE2 loops (the ops' `isa` attr); the floors are the common
denominator. `--check FILE` saves (or, when FILE exists, compares) the outputs'
bytes, so two trees can be shown to agree bit for bit.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import resource
import statistics
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import cv2  # noqa: E402
import numpy as np  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


_STACK = contextlib.ExitStack()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=6)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--check", type=Path, default=None)
    p.add_argument("--only", action="append", default=[])
    p.add_argument("--baseline-isa", action="store_true",
                   help="run the kernels' baseline (SSE2) loops: tfpipe.native.baseline_isa()")
    a = p.parse_args()

    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from tfpipe import native
    from tfpipe.native import pixel
    from tfpipe.pipeline import fast
    from tfpipe.sample_data import source_photos

    if a.baseline_isa:  # ops are created eagerly below, on this thread, inside it
        _STACK.enter_context(native.baseline_isa())
    st = native.status()
    print(f"native: {st['active']} ({st['detail']}); tf intra-op threads {a.threads}")
    src = list(source_photos().values())
    imgs = np.stack([cv2.resize(src[i % len(src)], (a.size, a.size), interpolation=cv2.INTER_AREA)
                     for i in range(a.batch)])
    b = a.batch
    rng = np.random.default_rng(0)
    d = rng.uniform(-0.4, 0.4, b).astype(np.float32)
    f = rng.uniform(0.6, 1.4, b).astype(np.float32)
    s = rng.uniform(0.6, 1.4, b).astype(np.float32)
    x = tf.constant(imgs)
    f32 = imgs.astype(np.float32) / 255
    dst = np.empty_like(f32)
    norm = fast.normalizer(MEAN, STD)
    half2 = tf.constant(rng.uniform(size=(b, 2)) < 0.5)

    def chain(ops, to_float=True, normalize=True, apply=None, gated=None):
        prm = tf.constant(np.stack([{"brightness": d, "contrast": f, "saturation": s}[o]
                                    for o in ops], 1))
        app = tf.ones([b, len(ops)], tf.bool) if apply is None else apply
        g = [False] * len(ops) if gated is None else gated
        return lambda: pixel.pixel_chain(x, prm, app, ops, g, to_float=to_float,
                                         normalize=normalize, mean=MEAN, std=STD)

    variants = {
        "np.copyto f32 (floor)": lambda: np.copyto(dst, f32),
        "u8 -> f32 cast, NumPy (floor)": lambda: dst.__setitem__(Ellipsis, imgs),
        "tf.cast u8 -> f32": lambda: tf.cast(x, tf.float32),
        "normalize alone": lambda: norm(x),
        "b + c + norm": chain(["brightness", "contrast"]),
        "b + c + s + norm": chain(["brightness", "contrast", "saturation"]),
        "b + c, uint8 out": chain(["brightness", "contrast"], to_float=False, normalize=False),
        "b + c (p 0.5) + norm": chain(["brightness", "contrast"], apply=half2,
                                      gated=[True, True]),
    }
    if a.only:
        variants = {k: v for k, v in variants.items() if any(o in k for o in a.only)}
    results: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in variants}
    faults: dict[str, list[float]] = {k: [] for k in variants}
    for fn in variants.values():  # warm up (op creation, first-touch of buffers)
        fn()
    for _ in range(a.rounds):
        for name, fn in variants.items():
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(a.calls):
                out = fn()  # eager CPU ops are done when they return
            wall = (time.perf_counter() - t0) / (a.calls * b) * 1e3
            cpu = (time.process_time() - c0) / (a.calls * b) * 1e3
            faults[name].append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
                                / (a.calls * b))
            results[name][0].append(wall)
            results[name][1].append(cpu)
    copy = results.get("np.copyto f32 (floor)")
    floor = statistics.median(copy[1]) if copy else float("nan")  # nan: not timed (--only)
    print(f"batch {b}x{a.size}x{a.size}x3, {a.rounds} rounds x {a.calls} calls")
    print(f"{'variant':32s} {'wall ms/img min/med':>20s} {'CPU ms/img min/med':>20s} "
          f"{'CPU x copy':>10s} {'faults/img':>10s}")
    for name, (wall, cpu) in results.items():
        print(f"{name:32s} {min(wall):9.3f} /{statistics.median(wall):7.3f} "
              f"{min(cpu):9.3f} /{statistics.median(cpu):7.3f} "
              f"{statistics.median(cpu) / floor:10.2f} {statistics.median(faults[name]):10.0f}")
    if a.check is not None:
        digests = {k: hashlib.sha256(np.asarray(fn()).tobytes()).hexdigest()
                   for k, fn in variants.items() if not k.endswith("(floor)")}
        if a.check.exists():
            old = json.loads(a.check.read_text())
            same = {k: old.get(k) == v for k, v in digests.items() if k in old}
            print("bytes vs", a.check, ":", "all identical" if all(same.values()) else same)
        else:
            a.check.write_text(json.dumps(digests, indent=1))
            print("digests written to", a.check)


if __name__ == "__main__":
    main()
