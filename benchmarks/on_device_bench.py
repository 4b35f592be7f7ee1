"""Cost of the device stage (`tfpipe.augment.OnDevice`) per batch, run on this CPU.

For reference only: on a GPU host the stage runs on the accelerator (not
measured here: no device was lent). Batches of the imagenet preset (224x224x3,
batch 64) in `augment.pixel_stage: device` are taken from the pipeline once and
kept in memory; then each variant's `tf.function` runs on them in alternating
rounds, and the figure is milliseconds per batch (median and range over rounds):

- the preset's stage (brightness, contrast, saturation + normalize; plain TF ops),
- the same with mixup + cutmix on,
- `augment.normalize` alone on the same uint8 batch (what the stage costs at the least).

    .venv/bin/python benchmarks/on_device_bench.py --rounds 5 --steps 10

`--host-cpu` measures instead the HOST's CPU time per image of the train
pipeline (process user + system seconds over `--steps` batches, all tf.data
threads included), `pixel_stage: host` vs `device` vs the decode-only reference
of benchmarks/pipeline_bench.py, in alternating rounds: on a shared machine CPU
time moves much less with the load than wall-clock throughput does.

Data: the same generated shards as benchmarks/pipeline_bench.py (--data DIR to reuse).
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=400)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=10, help="timed batches per variant and round")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--data", type=Path)
    p.add_argument("--host-cpu", action="store_true",
                   help="host CPU ms per image of the pipeline (host vs device vs decode-only)")
    args = p.parse_args(argv)

    import tensorflow as tf

    sys.path.insert(0, str(Path(__file__).parent))
    from pipeline_bench import make_data

    import tfpipe
    from tfpipe import augment
    from tfpipe.config import parse_set_options
    from tfpipe.pipeline import device_stage

    tmp = None
    if args.data is None:
        tmp = tempfile.TemporaryDirectory(prefix="tfpipe-ondevice-")
        args.data = make_data(Path(tmp.name), args.images)
    if args.host_cpu:
        return host_cpu(args)
    common = [f"data.path={args.data}", f"pipeline.batch_size={args.batch}",
              "augment.pixel_stage=device"]
    mix = ["augment.batch.mixup.enabled=true", "augment.batch.cutmix.enabled=true"]
    variants = {}
    for name, extra in (("imagenet preset stage (B/C/S + normalize)", []),
                        ("imagenet preset stage + mixup + cutmix", mix)):
        cfg = tfpipe.load_config("imagenet", parse_set_options(common + extra))
        layer = device_stage(cfg)
        batches = [(({k: v for k, v in b.items() if k != "label"}), b["label"])
                   for b in tfpipe.build_pipeline(cfg, "train").take(4)]
        variants[name] = (tf.function(lambda f, y, layer=layer: layer(f, y)), batches)
    first = variants[next(iter(variants))][1]
    norm = tf.function(lambda f, y: augment.normalize(f["image"], (0.485, 0.456, 0.406),
                                                      (0.229, 0.224, 0.225)))
    variants["augment.normalize alone"] = (norm, first)

    ms: dict[str, list[float]] = {n: [] for n in variants}
    for name, (fn, batches) in variants.items():  # trace + warm up
        for f, y in batches:
            tf.nest.map_structure(lambda t: t.numpy(), fn(f, y))
    for rnd in range(args.rounds):
        names = list(variants) if rnd % 2 == 0 else list(reversed(variants))
        for name in names:
            fn, batches = variants[name]
            t0 = time.perf_counter()
            for i in range(args.steps):
                f, y = batches[i % len(batches)]
                out = fn(f, y)
                tf.nest.map_structure(lambda t: t.numpy(), out)  # wait for the result
            ms[name].append((time.perf_counter() - t0) * 1000.0 / args.steps)
            print(f"round {rnd + 1}: {name:45s} {ms[name][-1]:8.1f} ms/batch", flush=True)
    print(f"\n| device stage on CPU, batch {args.batch}x224x224x3 | ms per batch: median (range), "
          f"{args.rounds} rounds |")
    print("|---|---|")
    for name, v in ms.items():
        print(f"| {name} | {statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f}) |")
    if tmp is not None:
        tmp.cleanup()
    return 0


def host_cpu(args: argparse.Namespace) -> int:
    """Host CPU ms per image: pixel_stage host vs device vs decode-only, alternating rounds."""
    import tfpipe
    from tfpipe.bench import baselines as B
    from tfpipe.config import parse_set_options
    from pipeline_bench import pipeline_map_parallelism

    base = [f"data.path={args.data}", f"pipeline.batch_size={args.batch}",
            "augment.pixel.saturation.enabled=false"]  # the pipeline_bench recipe
    host = tfpipe.load_config("imagenet", parse_set_options(base))
    dev = tfpipe.load_config("imagenet", parse_set_options(base + ["augment.pixel_stage=device"]))
    npc = pipeline_map_parallelism(host)
    builders = {"pixel_stage host (float32 normalized)": lambda: tfpipe.build_pipeline(host),
                "pixel_stage device (uint8 + draws)": lambda: tfpipe.build_pipeline(dev),
                "decode only (full decode_jpeg, tfpipe threading)":
                    lambda: B.decode_only_like(host, npc)}
    ms: dict[str, list[float]] = {n: [] for n in builders}
    for rnd in range(args.rounds):
        names = list(builders) if rnd % 2 == 0 else list(reversed(builders))
        for name in names:
            it = iter(builders[name]())
            for _ in range(2):  # warm up: pipeline start, first traces
                next(it)
            images = 0
            t0 = time.process_time()
            for _ in range(args.steps):
                b = next(it)
                first = b[next(iter(b))] if isinstance(b, dict) else b[0]
                images += int(first.shape[0])
            ms[name].append((time.process_time() - t0) * 1000.0 / images)
            print(f"round {rnd + 1}: {name:50s} {ms[name][-1]:6.3f} CPU ms/image", flush=True)
    ref = ms["decode only (full decode_jpeg, tfpipe threading)"]
    print(f"\n| host pipeline, batch {args.batch}x224x224x3 | CPU ms per image: median (range), "
          f"{args.rounds} rounds | x decode-only's CPU time: median (range) |")
    print("|---|---|---|")
    for name, v in ms.items():
        r = [a / b for a, b in zip(v, ref)]
        print(f"| {name} | {statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f}) | "
              f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
