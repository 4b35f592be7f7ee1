"""Cost of the lost-worker guard (`service_timeout_s`) on a stream, in one run.

The guard wraps each epoch's tf.data service stream (pipeline/_service.py,
`stall_guard`). Its cost does not depend on where the stream comes from, so this
wraps the LOCAL pipeline's epoch (no servers: nothing else varies) and times whole
epochs with and without it, in alternating rounds after a warm-up, median:

    .venv/bin/python benchmarks/service_guard_bench.py --images 240 --batch 4 --rounds 5

Small batches make the per-batch part (one scan step, a filter, the interleave
hand-off) as large as it gets; the fixed part is the ticker winding down at the
end of each epoch (~3 ticks of 0.1 s).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=240)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    import tensorflow as tf

    from tfpipe.bench._data import write_sample_dataset
    from tfpipe.pipeline import build_pipeline
    from tfpipe.pipeline._service import stall_guard

    tmp = Path(tempfile.mkdtemp(prefix="guardbench-"))
    data = write_sample_dataset(tmp / "data", n=args.images, shards=4, size_range=(48, 96),
                                split="validation")
    cfg = {"seed": 1, "data": {"path": str(data), "image_size": [32, 32]},
           "pipeline": {"batch_size": args.batch, "cache": "none"}}
    plain = build_pipeline(cfg, split="validation")  # the same batches every iteration
    guarded = stall_guard(plain, 300.0, "grpc://bench", "off", tf.constant(0, tf.int64))
    variants = {"plain": plain, "guarded": guarded}
    for ds in variants.values():
        for _ in ds:  # warm-up
            pass
    times: dict[str, list[float]] = {k: [] for k in variants}
    batches = 0
    for _ in range(args.rounds):
        for name, ds in variants.items():
            start = time.perf_counter()
            batches = sum(1 for _ in ds)
            times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{batches} batches of {args.batch} per epoch, median of {args.rounds} rounds")
    for name in variants:
        print(f"  {name:8s} {med[name]:.3f} s/epoch  ({med[name] / med['plain']:.2f}x)")
    print(f"  guard: +{med['guarded'] - med['plain']:.3f} s per epoch")


if __name__ == "__main__":
    main()
