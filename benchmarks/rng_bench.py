"""Per-sample stateless RNG ops vs tfpipe.seeds batched draws, ONE run.

    .venv/bin/python benchmarks/rng_bench.py [--batch 64] [--seconds 3] [--rounds 3]

Each variant emits batches of `--batch` samples, and each sample gets the draws
the pipeline makes today: one fold (sample index into the epoch's sample stream),
one split(4), and four uniform([10]) with the four child seeds. Only the RNG work
is timed (no images):

  per-sample ops   TF's stateless_fold_in / stateless_split / stateless_uniform in a
                   per-element Dataset.map, then batch (what the pipeline does today)
  batched x4       batch the indices first, then fold_rows + split_rows + four
                   uniform_rows calls on [B, 2] seeds in ONE map per batch
  batched [B,4]    the same with one uniform_rows call on the [B, 4, 2] split seeds

The batched variants return the same numbers bit for bit (checked before timing).
Ratios to the first variant are the figures to trust (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfpipe import seeds  # noqa: E402

NPC = 8  # PERF-NOTES: a fixed 8 beat AUTOTUNE on this machine
LO, HI = -0.4, 0.4
PARENT = seeds.sample_stream(seeds.epoch_seed(seeds.global_seed(0), 1))


def per_sample(batch: int) -> tf.data.Dataset:
    def draw(i):
        s = tf.random.experimental.stateless_fold_in(PARENT, i, alg="philox")
        kids = tf.random.experimental.stateless_split(s, 4, alg="philox")
        u = tf.stack([tf.random.stateless_uniform([10], kids[k], LO, HI, alg="philox") for k in range(4)])
        return s, u

    ds = tf.data.Dataset.range(2**62).map(draw, num_parallel_calls=NPC, deterministic=True)
    return ds.batch(batch, drop_remainder=True).prefetch(2)


def batched(batch: int, one_call: bool) -> tf.data.Dataset:
    def draw(i):
        s = seeds.fold_rows(tf.broadcast_to(PARENT, [tf.shape(i)[0], 2]), i)
        kids = seeds.split_rows(s, 4)
        if one_call:
            u = seeds.uniform_rows(kids, (10,), LO, HI)
        else:
            u = tf.stack([seeds.uniform_rows(kids[:, k], (10,), LO, HI) for k in range(4)], axis=1)
        return s, u

    ds = tf.data.Dataset.range(2**62).batch(batch, drop_remainder=True)
    return ds.map(draw, num_parallel_calls=NPC, deterministic=True).prefetch(2)


def _rate(ds: tf.data.Dataset, batch: int, seconds: float) -> float:
    it = iter(ds)
    for _ in range(5):
        next(it)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        next(it)
        n += 1
    return n * batch / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    variants = {
        "per-sample ops": per_sample(args.batch),
        "batched x4": batched(args.batch, one_call=False),
        "batched [B,4]": batched(args.batch, one_call=True),
    }
    ref = [np.asarray(t) for t in next(iter(variants["per-sample ops"]))]
    for name, ds in list(variants.items())[1:]:
        got = [np.asarray(t) for t in next(iter(ds))]
        for r, g in zip(ref, got):
            if not np.array_equal(r.view(np.uint32) if r.dtype == np.float32 else r,
                                  g.view(np.uint32) if g.dtype == np.float32 else g):
                raise SystemExit(f"{name}: draws differ from the per-sample ops")
    print(f"batch {args.batch}: 1 fold + 1 split(4) + 4 uniform([10]) per sample; outputs identical")

    rates: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.rounds):  # interleave rounds so load changes hit every variant
        for name, ds in variants.items():
            rates[name].append(_rate(ds, args.batch, args.seconds))
    base = np.median(rates["per-sample ops"])
    print(f"{'variant':16s} {'samples/s (median)':>20s} {'range':>20s} {'us/sample':>10s} {'ratio':>7s}")
    for name, r in rates.items():
        med = float(np.median(r))
        print(f"{name:16s} {med:20,.0f} {min(r):9,.0f}-{max(r):<10,.0f} {1e6 / med:10.1f} {med / base:6.1f}x")


if __name__ == "__main__":
    main()
