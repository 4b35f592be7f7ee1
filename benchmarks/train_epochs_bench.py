"""Process memory (RSS) over many epochs: one pipeline for all epochs vs one per epoch.

    PYTHONPATH=src .venv/bin/python benchmarks/train_epochs_bench.py [--epochs 32] [--only epochs]

Each variant runs in its own fresh process (RSS is per process) on the same
small generated dataset (256 photos, 4 shards, the test config at 64x64,
batch 32) and iterates every epoch to the end:
- `tfpipe.train.epochs(cfg, N)`: ONE `build_pipeline`, the epoch pinned per epoch
  (`set_epoch`); the train dataset runs the next epoch on each iteration anyway.
- rebuild: `build_pipeline(cfg, epoch=e)` for each epoch (the hand-written loop).
Prints RSS (MiB) after epochs 1, 2, 5, 10, 20, ... and the growth from epoch 2
to the last. docs/performance-history.md ("Epochs helper: memory") has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = Path(__file__).resolve().parent


def _dataset(out: Path, n: int = 256, shards: int = 4) -> str:
    import numpy as np
    import tensorflow as tf

    from tfpipe import sample_data

    rng = np.random.default_rng(0)
    photos = list(sample_data.source_photos().values())
    writers = [tf.io.TFRecordWriter(str(out / f"train-{s:05d}-of-{shards:05d}.tfrecord"))
               for s in range(shards)]
    for i in range(n):
        img = sample_data.random_crop(photos[i % len(photos)], rng, (80, 160))
        ex = tf.train.Example(features=tf.train.Features(feature={
            "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[sample_data.encode(img, "jpeg")])),
            "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10]))}))
        writers[i % shards].write(ex.SerializeToString())
    for w in writers:
        w.close()
    return str(out / "train-*.tfrecord")


def config(path: str) -> dict:
    return {"seed": 1, "data": {"path": path, "image_size": [64, 64], "num_classes": 10},
            "pipeline": {"batch_size": 32, "shuffle_buffer": 256},
            "augment": {"geometry": {"random_resized_crop": {}, "flip": {"p": 0.5}},
                        "pixel": {"brightness": {"max_delta": 0.3},
                                  "contrast": {"lower": 0.7, "upper": 1.3}}}}


def child(variant: str, path: str, epochs: int) -> None:
    import psutil

    from tfpipe.pipeline import build_pipeline
    from tfpipe.train import epochs as each_epoch

    cfg, proc, rss = config(path), psutil.Process(), {}
    datasets = (each_epoch(cfg, epochs) if variant == "epochs"
                else ((e, build_pipeline(cfg, epoch=e)) for e in range(epochs)))
    for e, ds in datasets:
        for _ in ds:
            pass
        rss[e + 1] = proc.memory_info().rss / 2**20
    print(json.dumps(rss))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=32)
    p.add_argument("--only", choices=("epochs", "rebuild"), help="run one variant")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child[0], args.child[1], args.epochs)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = _dataset(Path(tmp))
        results = {}
        for variant in [args.only] if args.only else ("epochs", "rebuild"):
            out = subprocess.run([sys.executable, __file__, "--epochs", str(args.epochs),
                                  "--child", variant, path], check=True, text=True,
                                 capture_output=True).stdout
            results[variant] = {int(k): v for k, v in json.loads(out.splitlines()[-1]).items()}
    marks = [m for m in (1, 2, 5, 10, 20, 30, 40, 50, 60) if m <= args.epochs] + [args.epochs]
    marks = sorted(set(marks))
    print("RSS MiB after epoch:", " ".join(f"{m:>7d}" for m in marks))
    for variant, rss in results.items():
        label = {"epochs": "tfpipe.train.epochs (one pipeline)",
                 "rebuild": "build_pipeline per epoch"}[variant]
        print(f"{label:38s}", " ".join(f"{rss[m]:7.0f}" for m in marks),
              f"| growth epoch 2 -> {args.epochs}: {rss[args.epochs] - rss[2]:+.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
