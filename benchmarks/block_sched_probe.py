"""Probe: CPU-ms/image and cores busy of the imagenet train pipeline's block
structures (issue #12, blocksched; docs/performance.md).

    python benchmarks/block_sched_probe.py DATA STEPS ROUNDS VARIANTS [--set key=value ...]

VARIANTS: comma-separated of `map` (only parse_example isolated per block, the
default), `isolated` (the whole block function isolated per block, before),
`elem` (the per-element path); a suffix `I2` runs that variant with
`threading.max_intra_op_parallelism = 2`. Each round builds each variant
afresh (no other pipeline running beside it), warms it up 6 batches, times
STEPS batches; process CPU time / images = CPU-ms/image, CPU time / wall time =
cores busy. `BS` (env) sets the batch size (default 64).
"""
import os
import statistics as st
import sys
import time

import tensorflow as tf

from tfpipe import build_pipeline, load_config
from tfpipe.config import parse_set_options
from tfpipe.pipeline import _block as B

data, steps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
variants = sys.argv[4].split(",")
extra = sys.argv[5:]
bs = int(os.environ.get("BS", "64"))


def cfg():
    return load_config("imagenet", parse_set_options([
        f"data.path={data}", f"pipeline.batch_size={bs}",
        "augment.pixel.saturation.enabled=false", *extra]))


def ctx(v):
    return B.forced(False) if v == "elem" else B.structure(v.replace("I2", ""))


res = {v: [] for v in variants}
for r in range(rounds):
    for v in variants:
        with ctx(v):
            ds = build_pipeline(cfg(), "train")
        if v.endswith("I2"):
            o = tf.data.Options()
            o.threading.max_intra_op_parallelism = 2
            ds = ds.with_options(o)
        it = iter(ds.repeat())
        for _ in range(6):
            next(it)
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(steps):
            next(it)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        del it
        n = steps * bs
        res[v].append((n / dt, dc * 1000 / n, dc / dt))
        print(f"r{r} {v:9s} {n / dt:7.0f} img/s  {dc * 1000 / n:6.3f} CPU-ms/img  "
              f"{dc / dt:4.2f} cores", flush=True)
for v in variants:
    print(v, "median img/s %.0f CPU-ms/img %.3f cores %.2f"
          % tuple(st.median(x[i] for x in res[v]) for i in range(3)))
print(os.popen("uptime").read().strip())
