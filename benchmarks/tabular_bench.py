"""Tabular pipeline rows/s vs two common alternatives, side by side in one run.

    PYTHONPATH=src .venv/bin/python benchmarks/tabular_bench.py --rows 40000 --rounds 3 --steps

The synthetic CTR table (tfpipe.features.make_ctr_table) is converted with
statistics; the same `FeatureTransforms` (from the same statistics.json) then
run in three pipelines that all yield `(features, label)` batches of --batch rows:

- `tfpipe`: `build_pipeline` (records shuffled, batched, `parse_example` +
  transforms per batch);
- `pandas`: `pandas.read_parquet` -> column arrays (nulls as value + mask) ->
  `tf.data.Dataset.from_tensor_slices` -> shuffle -> batch -> transforms (the
  pandas read is timed separately, once: it is paid per process, not per epoch);
- `per-record`: the same shards, `parse_single_example` + transforms per record,
  then batch.

`--steps` adds what each step of the tabular path costs or buys, in the same run:

- `tfpipe, read_records (before)`: the pipeline as it was, on the image path's
  per-record tolerant reader (`read_records`, (shard, index, record) triples);
- `tfpipe, batch map serial`: the per-batch parse + transforms map with
  `num_parallel_calls=1`;
- `tfpipe, parse only`: `parse_example` without the transforms (their share);
- `reader only`: `read_serialized` alone, batched (the reader's ceiling).

Each round times one full epoch of each variant (built once, one warm-up epoch
first); ratios are per round against `tfpipe`, so machine load moves all three.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import tensorflow as tf

COLUMNS = {
    "price": "log1p",
    "price_z": {"transform": "normalize", "column": "price"},
    "price_bucket": {"transform": "bucketize", "column": "price", "num_buckets": 10},
    "category": "vocabulary",
    "device": "vocabulary",
    "user": {"transform": "embedding_id", "column": "user_id", "top_k": 1000},
    "item": {"transform": "hash", "column": "item_id", "num_bins": 4096},
    "age": {"transform": "normalize", "column": "user_age", "missing_indicator": True},
    "hour": {"transform": "time", "column": "timestamp", "part": "hour_cyclic"},
    "user_x_category": {"transform": "cross", "columns": ["user_id", "category"],
                        "num_bins": 4096},
}


def epoch_seconds(ds: tf.data.Dataset) -> tuple[float, int]:
    t = time.perf_counter()
    rows = 0
    for _, label in ds:
        rows += int(label.shape[0])
    return time.perf_counter() - t, rows


def step_variants(cfg, batch: int) -> dict[str, tf.data.Dataset]:
    """The tabular pipeline with one step changed each (module doc, --steps)."""
    from tfpipe.pipeline import _tabular, build_pipeline
    from tfpipe.pipeline._settings import settings
    from tfpipe.pipeline._source import read_records, read_serialized

    base = _tabular.Tabular

    class Before(base):  # the reader and triples build_pipeline had before
        def records(self):
            s = self.s
            return read_records(self.my_files, self.compression, s.interleave_cycle,
                                skip_framing=s.on_error == "skip", parallel=s.read_parallel)

        def parse(self, shard, index, serialized):
            return base.parse(self, serialized)

    class ParseOnly(base):
        def parse(self, serialized):
            parsed = tf.io.parse_example(serialized, self.spec)
            return parsed, parsed.pop(self.label)

    parallel = _tabular.batch_parallelism
    out = {}
    for name, cls, npc in (("tfpipe, read_records (before)", Before, parallel),
                           ("tfpipe, batch map serial", base, lambda s: 1),
                           ("tfpipe, parse only", ParseOnly, parallel)):
        _tabular.Tabular, _tabular.batch_parallelism = cls, npc
        try:
            out[name] = build_pipeline(cfg)
        finally:
            _tabular.Tabular, _tabular.batch_parallelism = base, parallel
    s = settings(cfg)
    t = base(s, "train", (0, 1))
    reader = read_serialized(t.my_files, t.compression, s.interleave_cycle,
                             skip_framing=s.on_error == "skip", parallel=s.read_parallel)
    out["reader only"] = reader.batch(batch).map(lambda r: ({}, r)).prefetch(tf.data.AUTOTUNE)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=40_000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", action="store_true", help="add the per-step variants")
    args = ap.parse_args()

    import pandas as pd

    from tfpipe.config import load_config
    from tfpipe.convert import convert
    from tfpipe.features import make_ctr_table
    from tfpipe.pipeline import build_pipeline, tabular_transforms
    from tfpipe.records import Manifest

    tmp = tempfile.mkdtemp(prefix="tabular-bench-")
    table = make_ctr_table(os.path.join(tmp, "ctr.parquet"), args.rows, seed=0)
    data = os.path.join(tmp, "ctr")
    convert(str(table), data, progress=False, stats=True)
    cfg = load_config({"data": {"path": data},
                       "pipeline": {"batch_size": args.batch, "shuffle_buffer": 10_000,
                                    "drop_remainder": False},
                       "features": {"label": "label", "columns": COLUMNS}})
    transforms = tabular_transforms(cfg)
    tfpipe_ds = build_pipeline(cfg)

    # pandas -> from_tensor_slices, the same transforms
    t = time.perf_counter()
    df = pd.read_parquet(table)
    cols = {}
    for c, spec in transforms.raw_spec.items():
        s = df[c]
        missing = s.isna().to_numpy()
        fill = b"" if spec.dtype == tf.string else 0
        values = s.where(~s.isna(), fill)
        if spec.dtype == tf.string:
            values = values.map(lambda v: v.encode() if isinstance(v, str) else v)
        cols[c] = values.to_numpy().astype({tf.string: object, tf.int64: np.int64,
                                            tf.float32: np.float32}[spec.dtype])
        if c in transforms.nullable:
            cols[c + "__missing"] = missing
    labels = df["label"].to_numpy(np.int64)
    pandas_read = time.perf_counter() - t
    pandas_ds = (tf.data.Dataset.from_tensor_slices((cols, labels))
                 .shuffle(10_000, seed=0).batch(args.batch)
                 .map(lambda c, y: (transforms(c), y), num_parallel_calls=tf.data.AUTOTUNE)
                 .prefetch(tf.data.AUTOTUNE))

    # per record: parse_single_example + transforms, then batch
    files = Manifest.load(data).shard_paths(data, "train")
    schema = Manifest.load(data).schema
    spec = {c: (tf.io.VarLenFeature(schema[c].tf_dtype()) if schema[c].kind == "var"
                else tf.io.FixedLenFeature([], schema[c].tf_dtype()))
            for c in transforms.raw_spec}
    spec["label"] = tf.io.FixedLenFeature([], tf.int64)

    def one(record: tf.Tensor):
        ex = tf.io.parse_single_example(record, spec)
        y = ex.pop("label")
        raw = {k: (tf.sparse.expand_dims(v, 0) if isinstance(v, tf.SparseTensor)
                   else tf.reshape(v, [1])) for k, v in ex.items()}
        return {k: v[0] for k, v in transforms(raw).items()}, y

    per_record = (tf.data.TFRecordDataset(files, num_parallel_reads=4)
                  .shuffle(10_000, seed=0)
                  .map(one, num_parallel_calls=tf.data.AUTOTUNE).batch(args.batch)
                  .prefetch(tf.data.AUTOTUNE))

    variants = {"tfpipe": tfpipe_ds, "pandas": pandas_ds, "per-record": per_record}
    if args.steps:
        variants.update(step_variants(cfg, args.batch))
    for ds in variants.values():
        epoch_seconds(ds)  # warm-up: traces, opens files, fills caches
    rates: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.rounds):
        for name, ds in variants.items():
            sec, rows = epoch_seconds(ds)
            rates[name].append(rows / sec)
    print(f"rows {args.rows}, batch {args.batch}, rounds {args.rounds}, "
          f"cpus {os.cpu_count()}, pandas read {pandas_read:.2f} s (once)")
    print("| variant | rows/s (median) | x tfpipe per round (median, min-max) |")
    print("|---|---|---|")
    for name, r in rates.items():
        ratios = [a / b for a, b in zip(r, rates["tfpipe"])]
        print(f"| {name} | {statistics.median(r):,.0f} | {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f}) |")


if __name__ == "__main__":
    main()
