"""Side by side: the train L1 per sample vs one block op per batch vs decode-only.

One process, the same shards (`pipeline_bench.make_data`: JPEG q90, ~460x390),
batches of 64 uint8 224x224x3 random-resized crops with a horizontal flip (the
imagenet preset's L1, nothing else), in alternating rounds; each figure is
images/s and its ratio to the decode-only reference measured in the same round:

- per-sample: tfpipe's records, a parallel map of parse_single_example +
  `native.jpeg.decode_crop_resize` (TfpipeDecodeCropResize), then batch(64):
  what the pipeline's L1 costs today;
- block: batch(64) of the serialized records, then parse_example and ONE
  `native.jpeg.decode_crop_resize_block` call per batch: with tf.data's default
  `max_intra_op_parallelism` (1: the op's rows run inline, the batch map's
  num_parallel_calls = the CPUs is the parallelism), and with 0 (one call
  spreads its rows over TF's intra-op pool), map num_parallel_calls 1 and 2;
- reference: full `decode_jpeg` with tfpipe's threading
  (`tfpipe.bench.baselines.decode_only_like`, as in pipeline_bench.py).

The crop draws and flips come from a fixed table of 64 rows (sample i uses row
i % 64), so no variant spends time drawing them: the rows differ only in how
the same decode + resize work is driven.

    .venv/bin/python benchmarks/block_decode_bench.py --images 640 --rounds 3 --seconds 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # noqa: E402 - benchmarks/_harness.py

REF = "decode only (full decode_jpeg, tfpipe threading)"
RATIO = (3 / 4, 4 / 3)


def variants(data: Path, batch: int):
    """name -> zero-argument builder of a fresh dataset."""
    import tensorflow as tf

    from tfpipe import augment, load_config
    from tfpipe.bench import baselines as B
    from tfpipe.config import parse_set_options
    from tfpipe.native import jpeg
    from tfpipe.pipeline import map_parallelism, options, settings
    from tfpipe.system import available_cpus

    if not jpeg.has_decode_crop_resize_block():
        raise SystemExit("native kernels not built: python -m tfpipe.native build")
    cfg = load_config("imagenet", parse_set_options([f"data.path={data}",
                                                     f"pipeline.batch_size={batch}"]))
    s = settings(cfg)
    npc = int(map_parallelism(s))
    cpus = int(s.private_threadpool or available_cpus())
    size = s.image_size
    seeds = tf.constant([[5, i] for i in range(batch)], tf.int64)
    draws = augment.crop_window_draws(seeds, (0.08, 1.0), RATIO)  # [batch, 4, 10]
    flips = tf.constant([i % 2 == 0 for i in range(batch)])
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64, default_value=-1)}

    def per_sample() -> tf.data.Dataset:
        def one(i, record):
            ex = tf.io.parse_single_example(record, spec)
            k = i % batch
            image = jpeg.decode_crop_resize(ex["image/encoded"], draws[k], True, flips[k], size,
                                            RATIO)
            return image, ex["image/class/label"]

        ds = B.tfpipe_records(cfg).enumerate().map(one, num_parallel_calls=npc,
                                                   deterministic=s.deterministic)
        return ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE) \
            .with_options(options(s))

    def block(parallel: int, intra: int | None = None):
        opts = options(s)
        if intra is not None:  # let one call spread its rows over TF's intra-op pool
            opts.threading.max_intra_op_parallelism = intra

        def build() -> tf.data.Dataset:
            def rows(records):
                ex = tf.io.parse_example(records, spec)
                images, status, _ = jpeg.decode_crop_resize_block(
                    ex["image/encoded"], draws, tf.zeros([batch], tf.int32), flips, size, RATIO)
                return images, ex["image/class/label"], status

            ds = B.tfpipe_records(cfg).batch(batch, drop_remainder=True)
            ds = ds.map(rows, num_parallel_calls=parallel, deterministic=s.deterministic)
            return ds.prefetch(tf.data.AUTOTUNE).with_options(opts)
        return build

    return {
        f"per-sample decode_crop_resize map (npc={npc}) + batch({batch})": per_sample,
        f"batch({batch}) + block op, map npc={cpus} (rows inline)": block(cpus),
        f"batch({batch}) + block op, map npc=1, max_intra_op_parallelism=0": block(1, 0),
        f"batch({batch}) + block op, map npc=2, max_intra_op_parallelism=0": block(2, 0),
        REF: lambda: B.decode_only_like(cfg, npc),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=640)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=5, help="minimum timed batches per variant and round")
    p.add_argument("--seconds", type=float, default=2.0,
                   help="target timed seconds per variant and round (sets the steps)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--data", type=Path, help="an existing converted dataset dir")
    args = p.parse_args(argv)

    from pipeline_bench import make_data

    from tfpipe.bench import measure
    from tfpipe.system import available_cpus

    t0 = time.time()
    tmp = None
    if args.data is None:
        tmp = tempfile.TemporaryDirectory(prefix="tfpipe-block-bench-")
        args.data = make_data(Path(tmp.name), args.images)
    print(f"data: {args.data}  cpus: {available_cpus()}  (data ready in {time.time() - t0:.0f}s)",
          flush=True)
    builders = variants(args.data, args.batch)
    names = list(builders)

    def run(name: str, steps: int):
        return measure(builders[name](), warmup=args.warmup, steps=steps)

    # equal time per variant, not equal steps (_harness.sized_steps, as pipeline_bench.py)
    steps = H.sized_steps(names, run, args.seconds, args.steps, max_steps=10 * args.steps)
    # process CPU ms per image: less sensitive than images/s to other processes
    # on a shared machine (it includes the thread pools' spinning)
    results = H.alternating_rounds(
        names, args.rounds, lambda name: run(name, steps[name]),
        lambda rnd, name, r: f"round {rnd + 1}: {name:58s} {r.elements_per_s:8.1f} images/s")

    print()
    print(H.table_head("variant", f"images/s: median (range), {args.rounds} rounds",
                       "x decode-only: median (range)", "CPU ms/image: median (range)"))
    for name in names:
        r = [this[name].elements_per_s for this in results]
        q = [this[name].elements_per_s / this[REF].elements_per_s for this in results]
        c = [H.cpu_ms_per_image(this[name]) for this in results]
        print(f"| {name} | {H.med_range(r, ',.0f')} | {H.med_range(q)} | {H.med_range(c)} |")
    print(f"\ntotal {time.time() - t0:.0f}s")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
