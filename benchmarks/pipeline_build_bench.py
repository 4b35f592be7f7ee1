"""Side by side: `build_pipeline` cost with the seed rows' Philox body shared vs inline.

`tfpipe.seeds` draws for rows of seeds ([B, 2]: fold_rows, split_rows,
uniform_rows, full_int_rows) with a vectorized Philox4x32-10 of ~250 integer
ops. Before, every draw site of a pipeline built that body inline (19 sites in
the imagenet train pipeline); now one traced `tf.function` per (output kind,
generator calls) is shared, and each site is one call node. This script builds
the imagenet preset's train split with both, in the same process (the inline
version is the old module kept in benchmarks/_seed_rows_unrolled.py and swapped
in for its variant), and reports per variant:

* build: `build_pipeline(cfg, "train")` CPU seconds (time.process_time, all
  threads of the process) and wall seconds;
* ops: nodes of the dataset's serialized GraphDef plus its function library;
* pass 1 / pass 2: CPU and wall seconds to the first batch of the first and of
  the next iteration (a new epoch: tf.data instantiates and optimizes the
  functions again);
* ms per batch: the rest of pass 2 (steady state: the call nodes must not slow
  the running pipeline); and the seed draws alone (rng_bench's "batched x4"
  map), samples/s.

"cold" rows run each variant in a fresh process (the first build of a process
also pays the one-time tracing of the shared functions); "warm" rows alternate
the variants in one process. Both variants must give the same first batches:
the script checks it bit for bit.

    PYTHONPATH=src .venv/bin/python benchmarks/pipeline_build_bench.py --rounds 3 --cold 2
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = Path(__file__).resolve().parent
VARIANTS = ("inline (before)", "shared tf.function (now)")


def make_data(root: Path, images: int) -> Path:
    """A small converted image dataset under root/data (build cost does not depend on it)."""
    from tfpipe.convert import convert
    from tfpipe.sample_data import make_image_folder

    data = root / "data"
    if (data / "manifest.json").exists():
        return data
    folder = make_image_folder(root / "raw", num_classes=4, per_class=-(-images // 4), seed=0,
                               png_fraction=0.0, gray_fraction=0.0)
    total = sum(f.stat().st_size for f in folder.rglob("*.jpg"))
    convert(str(folder), str(data), shard_size=total // 2 + 1, seed=0)
    return data


def use(variant: str) -> None:
    """Route every tfpipe module's row functions to `variant`'s implementation."""
    import tfpipe.seeds._rows as now

    names = ("fold_rows", "full_int_rows", "split_rows", "uniform_rows")
    if not hasattr(use, "impls"):
        spec = importlib.util.spec_from_file_location("_seed_rows_unrolled", HERE / "_seed_rows_unrolled.py")
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        use.impls = {VARIANTS[0]: {n: getattr(old, n) for n in names},
                     VARIANTS[1]: {n: getattr(now, n) for n in names}}
    every = {id(f) for impl in use.impls.values() for f in impl.values()}
    for mod in [m for k, m in sys.modules.items() if k.startswith("tfpipe") and m is not None]:
        for n in names:
            if id(getattr(mod, n, None)) in every:
                setattr(mod, n, use.impls[variant][n])


def count_ops(ds) -> int:
    import tensorflow as tf

    gd = tf.compat.v1.GraphDef()
    gd.ParseFromString(ds._as_serialized_graph(  # noqa: SLF001 - the graph tf.data runs
        external_state_policy=tf.data.experimental.ExternalStatePolicy.IGNORE).numpy())
    return len(gd.node) + sum(len(f.node_def) for f in gd.library.function)


def timed(fn):
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c, time.perf_counter() - w


def one(cfg, variant: str) -> dict:
    from tfpipe import build_pipeline

    use(variant)
    ds, build_cpu, build_wall = timed(lambda: build_pipeline(cfg, "train"))
    ops = count_ops(ds)
    b1, p1_cpu, p1_wall = timed(lambda: next(iter(ds)))
    it = iter(ds)
    b2, p2_cpu, p2_wall = timed(lambda: next(it))
    n, rest_cpu, rest_wall = timed(lambda: sum(1 for _ in it))  # steady state: the rest of pass 2
    digest = hashlib.sha256(b1["image"].numpy().tobytes() + b2["image"].numpy().tobytes()
                            + b1["label"].numpy().tobytes()).hexdigest()[:16]
    return {"build_cpu": build_cpu, "build_wall": build_wall, "ops": ops, "p1_cpu": p1_cpu,
            "p1_wall": p1_wall, "p2_cpu": p2_cpu, "p2_wall": p2_wall,
            "ms_per_batch_cpu": 1e3 * rest_cpu / max(n, 1), "ms_per_batch_wall": 1e3 * rest_wall / max(n, 1),
            "digest": digest}


def draw_rate(variant: str, batch: int = 64, seconds: float = 1.5) -> float:
    """Samples/s of the pipeline's per-batch seed draws alone (fold + split(4) + 4 x
    uniform([10]) on [batch, 2] rows, one map per batch: benchmarks/rng_bench.py's
    "batched x4"), so a per-call overhead of the shared function would show."""
    import tensorflow as tf

    from tfpipe import seeds

    use(variant)
    parent = tf.constant([5, -9], tf.int64)

    def draw(i):
        kids = seeds.split_rows(seeds.fold_rows(tf.broadcast_to(parent, [tf.shape(i)[0], 2]), i), 4)
        return tf.stack([seeds.uniform_rows(kids[:, k], (10,), -0.4, 0.4) for k in range(4)], axis=1)

    ds = tf.data.Dataset.range(1 << 40).batch(batch).map(draw).prefetch(2)
    it = iter(ds)
    for _ in range(20):  # warm-up
        next(it)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        next(it)
        n += 1
    return n * batch / (time.perf_counter() - t0)


def config(data: Path, batch: int):
    from tfpipe import load_config
    from tfpipe.config import parse_set_options

    return load_config("imagenet", parse_set_options([f"data.path={data}", f"pipeline.batch_size={batch}"]))


def report(title: str, rows: dict[str, list[dict]]) -> None:
    keys = ("build_cpu", "build_wall", "ops", "p1_cpu", "p1_wall", "p2_cpu", "p2_wall",
            "ms_per_batch_cpu", "ms_per_batch_wall")
    print(f"\n{title} (median of {len(next(iter(rows.values())))})")
    print(f"| variant | {' | '.join(keys)} |")
    print("|---|" + "---|" * len(keys))
    med = {v: {k: statistics.median(r[k] for r in rs) for k in keys} for v, rs in rows.items()}
    for v, m in med.items():
        print(f"| {v} | " + " | ".join(f"{m[k]:.0f}" if k == "ops" else f"{m[k]:.2f}" for k in keys) + " |")
    a, b = med[VARIANTS[0]], med[VARIANTS[1]]
    print("| before / now | " + " | ".join(f"{a[k] / b[k]:.2f}x" if b[k] else "-" for k in keys) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="warm rounds per variant, alternating")
    ap.add_argument("--cold", type=int, default=2, help="fresh-process builds per variant")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--images", type=int, default=96)
    ap.add_argument("--draw-rounds", type=int, default=3, help="rounds of the seed-draws-only rate")
    ap.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:  # one cold build in this fresh process
        print(json.dumps(one(config(args.data, args.batch), args.child)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = make_data(Path(tmp), args.images)
        cold: dict[str, list[dict]] = {v: [] for v in VARIANTS}
        for _ in range(args.cold):
            for v in VARIANTS:
                out = subprocess.run([sys.executable, __file__, "--child", v, "--data", str(data),
                                      "--batch", str(args.batch)], capture_output=True, text=True,
                                     timeout=600, check=True)
                cold[v].append(json.loads(out.stdout.strip().splitlines()[-1]))
        cfg = config(data, args.batch)
        one(cfg, VARIANTS[1])  # process warm-up (TF start-up, first traces), not counted
        one(cfg, VARIANTS[0])
        warm: dict[str, list[dict]] = {v: [] for v in VARIANTS}
        for _ in range(args.rounds):
            for v in VARIANTS:
                warm[v].append(one(cfg, v))
        rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(args.draw_rounds):
            for v in VARIANTS:
                rates[v].append(draw_rate(v))
    digests = {r["digest"] for rs in (*cold.values(), *warm.values()) for r in rs}
    print(f"imagenet preset, train split, batch {args.batch}; CPU s = time.process_time; "
          f"first batches identical across variants: {len(digests) == 1} ({sorted(digests)})")
    if args.cold:
        report("cold: one build in a fresh process", cold)
    report("warm: alternating builds in one process", warm)
    if args.draw_rounds:
        med = {v: statistics.median(r) for v, r in rates.items()}
        print(f"\nseed draws only (fold + split(4) + 4 x uniform([10]) per batch of 64), samples/s, "
              f"median of {args.draw_rounds}:")
        for v in VARIANTS:
            print(f"| {v} | {med[v]:,.0f} ({min(rates[v]):,.0f}-{max(rates[v]):,.0f}) |")
        print(f"| now / before | {med[VARIANTS[1]] / med[VARIANTS[0]]:.2f}x |")
    if len(digests) != 1:
        sys.exit("variants gave different batches")


if __name__ == "__main__":
    main()
