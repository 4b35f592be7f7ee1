"""What resuming mid-epoch costs: `build_pipeline(step=k)` vs `.skip(k)` after the build.

    PYTHONPATH=src .venv/bin/python benchmarks/resume_bench.py [--rounds 3] [--steps 8]

On a generated dataset (4096 records of 300-500 px JPEG photos, 8 shards), the
imagenet preset (224x224, crop + flip + color ops) at batch 32, epoch 1, resumed
in the middle of the epoch (k = 64 of 128 batches). Each variant is built, then
timed from `iter()` to its first batch -- wall time and this process's CPU time
(all threads; less sensitive to other load on a shared box) -- alternating in
one process:
- fresh: `build_pipeline(cfg, epoch=1)` (step 0): build + first batch, the fixed part;
- skip:  `build_pipeline(cfg, epoch=1).skip(k)`: also produces and drops k batches;
- step:  `build_pipeline(cfg, epoch=1, step=k)`: drops the k x batch records before
  parse/decode.
Cost of resuming = time to first batch minus `fresh`'s (the iterator start and
one batch, common to all three): the ratio
(step - fresh) / (skip - fresh) is what a positioned resume costs as a share of
producing the skipped batches (issue 11: at most 10%). Also checks the first
batch of `step` equals batch k of the epoch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _dataset(out: Path, n: int, shards: int = 8, distinct: int = 256) -> str:
    """n records of `distinct` photos (300-500 px JPEG), repeated: decode work as
    for n distinct images, generated in seconds."""
    import numpy as np
    import tensorflow as tf

    from tfpipe import sample_data

    rng = np.random.default_rng(0)
    photos = list(sample_data.source_photos().values())
    encoded = [sample_data.encode(sample_data.random_crop(photos[i % len(photos)], rng,
                                                          (300, 500)), "jpeg")
               for i in range(distinct)]
    writers = [tf.io.TFRecordWriter(str(out / f"train-{s:05d}-of-{shards:05d}.tfrecord"))
               for s in range(shards)]
    for i in range(n):
        ex = tf.train.Example(features=tf.train.Features(feature={
            "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[encoded[i % distinct]])),
            "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10]))}))
        writers[i % shards].write(ex.SerializeToString())
    for w in writers:
        w.close()
    return str(out / "train-*.tfrecord")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=64, help="k: batches to skip")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--images", type=int, default=4096)
    args = p.parse_args(argv)

    import numpy as np

    from tfpipe import build_pipeline, load_config
    from tfpipe.config import parse_set_options

    with tempfile.TemporaryDirectory() as tmp:
        path = _dataset(Path(tmp), args.images)
        cfg = load_config("imagenet", parse_set_options([
            f"data.path={path}", f"pipeline.batch_size={args.batch}", "data.num_classes=10",
            "pipeline.shuffle_buffer=1024"]))
        k = args.steps
        variants = {
            "fresh": lambda: build_pipeline(cfg, epoch=1),
            "skip": lambda: build_pipeline(cfg, epoch=1).skip(k),
            "step": lambda: build_pipeline(cfg, epoch=1, step=k),
        }

        def first(make):
            ds = make()  # the build is not timed: it is the same for all three
            t, c = time.perf_counter(), _cpu()
            batch = next(iter(ds))
            return time.perf_counter() - t, _cpu() - c, batch

        first(variants["fresh"])  # warm-up: kernels, file cache
        wall: dict[str, list[float]] = {v: [] for v in variants}
        cpu: dict[str, list[float]] = {v: [] for v in variants}
        firsts = {}
        for rnd in range(args.rounds):
            order = list(variants) if rnd % 2 == 0 else list(variants)[::-1]
            for name in order:
                dt, dc, batch = first(variants[name])
                wall[name].append(dt)
                cpu[name].append(dc)
                firsts[name] = batch
                print(f"round {rnd + 1}: {name:6s} first batch after {dt:6.2f} s wall, "
                      f"{dc:6.2f} s CPU", flush=True)
        same = all(np.array_equal(firsts["skip"][key].numpy(), firsts["step"][key].numpy())
                   for key in firsts["skip"])
        for label, t in (("wall", wall), ("CPU", cpu)):
            med = {v: statistics.median(x) for v, x in t.items()}
            skip_cost, step_cost = med["skip"] - med["fresh"], med["step"] - med["fresh"]
            per_round = [round((s_ - f) / (k_ - f), 3) for f, k_, s_ in
                         zip(t["fresh"], t["skip"], t["step"])]
            print(f"{label:4s} median to first batch: fresh {med['fresh']:.2f} s, .skip({k}) "
                  f"{med['skip']:.2f} s, step={k} {med['step']:.2f} s | resume cost: .skip "
                  f"{skip_cost:.2f} s, step= {step_cost:.2f} s, ratio "
                  f"{step_cost / skip_cost:.3f} (per round {per_round})")
        print(f"first batch of step={k} == batch {k} (.skip): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
