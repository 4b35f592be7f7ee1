"""Probe: CPU-ms/image and cores busy of the imagenet train pipeline's block
structures (issue #12, blocksched; docs/performance-history.md).

    python benchmarks/block_sched_probe.py DATA STEPS ROUNDS VARIANTS [--set key=value ...]

VARIANTS: comma-separated of `map` (only parse_example isolated per block, the
default), `isolated` (the whole block function isolated per block, before),
`elem` (the per-element path); a suffix `I2` runs that variant with
`threading.max_intra_op_parallelism = 2`. Each round builds each variant
afresh (no other pipeline running beside it), warms it up 6 batches, times
STEPS batches; process CPU time / images = CPU-ms/image, CPU time / wall time =
cores busy. `BS` (env) sets the batch size (default 64).
"""
import contextlib
import os
import statistics as st
import sys
import tensorflow as tf

from _harness import cpu_ms_per_image  # benchmarks/ (this script's directory)
from tfpipe import build_pipeline, load_config
from tfpipe.bench import measure
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


@contextlib.contextmanager
def ctx(v):
    if v == "elem":
        with B.forced(False):
            yield
        return
    # forced: a block structure even where the record-size rule picks per-element
    with B.forced(True), B.structure(v.replace("I2", "")):
        yield


res = {v: [] for v in variants}
for r in range(rounds):
    for v in variants:
        with ctx(v):
            ds = build_pipeline(cfg(), "train")
        if v.endswith("I2"):
            o = tf.data.Options()
            o.threading.max_intra_op_parallelism = 2
            ds = ds.with_options(o)
        m = measure(ds, warmup=6, steps=steps)
        cores = m.cpu_util * m.available_cpus
        res[v].append((m.elements_per_s, cpu_ms_per_image(m), cores))
        print(f"r{r} {v:9s} {m.elements_per_s:7.0f} img/s  {cpu_ms_per_image(m):6.3f} "
              f"CPU-ms/img  {cores:4.2f} cores", flush=True)
for v in variants:
    print(v, "median img/s %.0f CPU-ms/img %.3f cores %.2f"
          % tuple(st.median(x[i] for x in res[v]) for i in range(3)))
print(os.popen("uptime").read().strip())
