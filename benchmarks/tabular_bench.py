"""Tabular pipeline rows/s vs what a Keras user writes, side by side in one run.

    PYTHONPATH=src .venv/bin/python benchmarks/tabular_bench.py --rows 40000 --rounds 3 --steps

The synthetic CTR table (tfpipe.features.make_ctr_table) is converted with
statistics; every variant yields `(features, label)` batches of --batch rows of
the same 10 transforms (COLUMNS):

- `tfpipe`: `build_pipeline` (records shuffled, batched, `parse_example` +
  transforms per batch);
- `keras peer`: what the Keras structured-data examples write for the same
  features: `pandas.read_parquet` -> `fillna` -> `from_tensor_slices(dict(df))`
  -> shuffle -> batch -> a map of Keras preprocessing layers ADAPTED on the
  table (`Normalization`, `Discretization`, `StringLookup`, `IntegerLookup`,
  `Hashing`, `HashedCrossing`) and `tf.math` for log1p and the cyclic hour;
  the read and the adapt are timed separately, once (paid per process);
- `pandas`: the same pandas -> `from_tensor_slices` path running tfpipe's own
  `FeatureTransforms` (so it isolates the reader + parse, not the transforms);
- `per-record`: the same shards, `parse_single_example` + transforms per record,
  then batch;
- `parse only`: the tfpipe pipeline with `parse_example` and no transforms;
- `reader only`: `read_serialized` alone, batched (the reader's ceiling);
- `tfpipe packed`: `build_pipeline` over the same table converted with
  `--rows-per-record N` (--packed, default 1024; docs/tabular.md "Packed layout"):
  blocks shuffled, one parse per group of blocks, rows permuted in the group;
- `reader only (packed)`: `read_serialized` of the packed shards alone (rows/s
  counted as the rows the blocks hold).

`--steps` adds what each step of the tabular path costs or buys, in the same run:

- `tfpipe, read_records (before)`: the pipeline on the image path's per-record
  tolerant reader (`read_records`, (shard, index, record) triples);
- `tfpipe, batch map serial`: the per-batch parse + transforms with one call at a time.

Each round times one full epoch of each variant (built once, one warm-up epoch
first); ratios are per round against `tfpipe`, so machine load moves all of them.
The last lines are the issue's targets: tfpipe / keras peer (>= 3x) and
tfpipe / reader only (>= 0.5x), medians of the per-round ratios, for the row
layout and for the packed layout (against each layout's reader).
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


def _dense(parsed: dict) -> dict:
    return {k: tf.sparse.to_dense(v) if isinstance(v, tf.SparseTensor) else v
            for k, v in parsed.items()}


def step_variants(cfg, batch: int, steps: bool) -> dict[str, tf.data.Dataset]:
    """The tabular pipeline with one step changed each (module doc)."""
    from tfpipe.pipeline import _tabular, build_pipeline
    from tfpipe.pipeline._settings import settings
    from tfpipe.pipeline._source import KEY_SHIFT, read_records, read_serialized

    base = _tabular.Tabular

    class Before(base):  # the per-record reader build_pipeline had before read_serialized
        def records(self):
            s = self.s
            return read_records(self.my_files, self.compression, s.interleave_cycle,
                                skip_framing=s.on_error == "skip", parallel=s.read_parallel
                                ).map(lambda sh, i, r: (tf.cast(sh, tf.int64) * KEY_SHIFT + i, r))

    class ParseOnly(base):
        def parse(self, serialized):
            parsed = _dense(tf.io.parse_example(serialized, self.spec))
            return parsed, parsed.pop(self.label)

    parallel = _tabular.batch_parallelism
    out = {}
    chosen = [("parse only", ParseOnly, parallel)]
    if steps:
        chosen += [("tfpipe, read_records (before)", Before, parallel),
                   ("tfpipe, batch map serial", base, lambda s: 1)]
    for name, cls, npc in chosen:
        _tabular.Tabular, _tabular.batch_parallelism = cls, npc
        try:
            out[name] = build_pipeline(cfg)
        finally:
            _tabular.Tabular, _tabular.batch_parallelism = base, parallel
    s = settings(cfg)
    t = base(s, "train", (0, 1))
    reader = read_serialized(t.my_files, t.compression, s.interleave_cycle,
                             skip_framing=s.on_error == "skip", parallel=1)
    out["reader only"] = reader.batch(batch).map(lambda r: ({}, r)).prefetch(tf.data.AUTOTUNE)
    return out


def keras_peer(df, batch: int) -> tuple[tf.data.Dataset, float]:
    """The Keras structured-data recipe for COLUMNS: layers adapted on the table
    (nulls filled as the examples do: "" for strings, the mean for numbers, with
    a missing flag where COLUMNS asks for one). Returns (dataset, adapt seconds)."""
    import keras

    t = time.perf_counter()
    frame = {
        "price": df["price"].to_numpy(np.float32),
        "category": df["category"].fillna("").to_numpy(str),
        "device": df["device"].fillna("").to_numpy(str),
        "user_id": df["user_id"].to_numpy(np.int64),
        "item_id": df["item_id"].to_numpy(np.int64),
        "user_age": df["user_age"].fillna(df["user_age"].mean()).to_numpy(np.float32),
        "age_missing": df["user_age"].isna().to_numpy(np.float32),
        "timestamp": df["timestamp"].to_numpy(np.int64),
    }
    labels = df["label"].to_numpy(np.int64)
    norm_price = keras.layers.Normalization(axis=None)
    norm_price.adapt(frame["price"])
    bucket = keras.layers.Discretization(num_bins=10)
    bucket.adapt(frame["price"])
    category = keras.layers.StringLookup()
    category.adapt(frame["category"])
    device = keras.layers.StringLookup()
    device.adapt(frame["device"])
    user = keras.layers.IntegerLookup(max_tokens=1001)
    user.adapt(frame["user_id"])
    item = keras.layers.Hashing(num_bins=4096)
    cross = keras.layers.HashedCrossing(num_bins=4096)
    norm_age = keras.layers.Normalization(axis=None)
    norm_age.adapt(frame["user_age"])
    adapt = time.perf_counter() - t

    def features(x, y):
        seconds = tf.cast(tf.math.floormod(x["timestamp"], 86400), tf.float32)
        angle = seconds * (2 * np.pi / 86400)
        return {"price": tf.math.log1p(tf.maximum(x["price"], 0.0)),
                "price_z": norm_price(x["price"]),
                "price_bucket": bucket(x["price"]),
                "category": category(x["category"]),
                "device": device(x["device"]),
                "user": user(x["user_id"]),
                "item": item(x["item_id"]),
                "age": norm_age(x["user_age"]),
                "age_missing": x["age_missing"],
                "hour": tf.stack([tf.sin(angle), tf.cos(angle)], axis=-1),
                "user_x_category": cross((x["user_id"], x["category"]))}, y

    ds = (tf.data.Dataset.from_tensor_slices((frame, labels)).shuffle(10_000, seed=0)
          .batch(batch).map(features, num_parallel_calls=tf.data.AUTOTUNE)
          .prefetch(tf.data.AUTOTUNE))
    return ds, adapt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=40_000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", action="store_true", help="add the per-step variants")
    ap.add_argument("--packed", type=int, default=1024, metavar="N",
                    help="rows per record of the packed variants (0: leave them out)")
    ap.add_argument("--skip", default="", metavar="NAME,...",
                    help="variants to leave out (e.g. 'per-record,pandas' for a large table)")
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

    def config(path: str) -> object:
        return load_config({"data": {"path": path},
                            "pipeline": {"batch_size": args.batch, "shuffle_buffer": 10_000,
                                         "drop_remainder": False},
                            "features": {"label": "label", "columns": COLUMNS}})

    cfg = config(data)
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

    peer_ds, adapt = keras_peer(df, args.batch)
    variants = {"tfpipe": tfpipe_ds, "keras peer": peer_ds, "pandas": pandas_ds,
                "per-record": per_record}
    variants.update(step_variants(cfg, args.batch, args.steps))
    fixed_rows: dict[str, int] = {}  # variants whose elements are blocks, not rows
    if args.packed > 1:
        from tfpipe.pipeline._settings import settings
        from tfpipe.pipeline._source import read_serialized
        from tfpipe.pipeline._tabular_pack import PackedTabular

        packed = os.path.join(tmp, "ctr-packed")
        convert(str(table), packed, progress=False, stats=True, rows_per_record=args.packed)
        variants["tfpipe packed"] = build_pipeline(config(packed))
        s = settings(config(packed))
        t = PackedTabular(s, "train", (0, 1))
        per = max(1, args.batch // args.packed)
        variants["reader only (packed)"] = read_serialized(
            t.my_files, t.compression, s.interleave_cycle, skip_framing=True, parallel=1
        ).batch(per).map(lambda r: ({}, r)).prefetch(tf.data.AUTOTUNE)
        fixed_rows["reader only (packed)"] = sum(t.shard_rows[f] for f in t.my_files)
    for name in filter(None, args.skip.split(",")):
        variants.pop(name.strip(), None)
    for ds in variants.values():
        epoch_seconds(ds)  # warm-up: traces, opens files, fills caches
    rates: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.rounds):
        for name, ds in variants.items():
            sec, rows = epoch_seconds(ds)
            rates[name].append(fixed_rows.get(name, rows) / sec)
    print(f"rows {args.rows}, batch {args.batch}, rounds {args.rounds}, "
          f"cpus {os.cpu_count()}, pandas read {pandas_read:.2f} s, keras adapt {adapt:.2f} s "
          "(once each)")
    print("| variant | rows/s (median) | x tfpipe per round (median, min-max) |")
    print("|---|---|---|")
    for name, r in rates.items():
        ratios = [a / b for a, b in zip(r, rates["tfpipe"])]
        print(f"| {name} | {statistics.median(r):,.0f} | {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f}) |")
    lines = [("tfpipe", "keras peer", 3.0), ("tfpipe", "reader only", 0.5),
             ("tfpipe", "parse only", None)]
    if args.packed > 1:
        lines += [("tfpipe packed", "keras peer", 3.0), ("tfpipe packed", "reader only", 0.5),
                  ("tfpipe packed", "reader only (packed)", 0.5)]
    for mine, peer, target in lines:
        ratios = [a / b for a, b in zip(rates[mine], rates[peer])]
        goal = f" (target >= {target}x)" if target else ""
        print(f"{mine} / {peer}: {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f}){goal}")


if __name__ == "__main__":
    main()
