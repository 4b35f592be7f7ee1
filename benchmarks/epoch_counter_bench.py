"""What the per-iteration epoch counter costs: build_pipeline vs the same epoch without it.

`build_pipeline(cfg, "train")` runs each epoch inside a `flat_map` over an
iteration counter (docs/pipeline.md, "Epochs"). This measures it against one
epoch's pipeline built directly (`build_stages(cfg)[-1]` + the same options and
prefetch), alternating in one process, the imagenet preset minus saturation at
batch 64 of 224x224 (as benchmarks/pipeline_bench.py).

    .venv/bin/python benchmarks/epoch_counter_bench.py --data DIR [--rounds 4]

DIR: a converted dataset, e.g. the one pipeline_bench.py --work W builds (W/data).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args(argv)

    import tensorflow as tf

    from tfpipe import build_pipeline, load_config
    from tfpipe.bench import measure
    from tfpipe.config import parse_set_options
    from tfpipe.pipeline import build_stages, options, settings

    cfg = load_config("imagenet", parse_set_options([
        f"data.path={args.data}", f"pipeline.batch_size={args.batch}",
        "augment.pixel.saturation.enabled=false"]))
    s = settings(cfg)
    variants = {
        "build_pipeline (epoch counter + flat_map)": lambda: build_pipeline(cfg, "train"),
        "one epoch, no counter": lambda: build_stages(cfg)[-1][1].with_options(
            options(s)).prefetch(tf.data.AUTOTUNE),
    }
    rates: dict[str, list[float]] = {k: [] for k in variants}
    for rnd in range(args.rounds):
        for name in (list(variants) if rnd % 2 == 0 else list(variants)[::-1]):
            r = measure(variants[name](), warmup=2, steps=args.steps)
            rates[name].append(r.elements_per_s)
            print(f"round {rnd + 1}: {name:44s} {r.elements_per_s:8.1f} images/s", flush=True)
    a, b = rates.values()
    print("counter / no counter, per round:", [round(x / y, 3) for x, y in zip(a, b)])
    print("median images/s:", {k: round(statistics.median(v)) for k, v in rates.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
