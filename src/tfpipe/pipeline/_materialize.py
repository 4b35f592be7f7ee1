"""Materialize N augmented epochs to disk, and read them back.

Layout of a materialized directory:

    OUT/tfpipe-materialized.json   {"config_hash", "epochs", "split", "element_spec", ...}
    OUT/epoch-00000/  ...          one `tf.data.Dataset.save` directory per epoch

`build_pipeline` reads it back when `pipeline.materialized` names it, or when
`data.path` points at a directory holding the json. Epoch e of the pipeline is
epoch `e mod epochs` of the saved data.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import Any

import tensorflow as tf

from tfpipe.errors import ConfigError
from tfpipe.pipeline._settings import Settings, settings

MARKER = "tfpipe-materialized.json"


def config_hash(s: Settings) -> str:
    """Hash of everything that shapes the saved elements (not where they go)."""
    keys = [k for k in asdict(s) if k not in ("materialized", "prefetch_to_device", "cache",
                                              "private_threadpool", "ram_budget_mb",
                                              "prefetch", "num_parallel_calls",
                                              "deterministic")]
    return s.fingerprint(*keys)


def _epoch_dir(out: str, epoch: int) -> str:
    return os.path.join(out, f"epoch-{epoch:05d}")


def materialize(config: Any, out: str, epochs: int, split: str = "train") -> dict[str, Any]:
    """Write `epochs` epochs of `build_pipeline(config, split, epoch=e)` under `out`."""
    from tfpipe.pipeline._build import build_stages

    s = settings(config)
    if epochs < 1:
        raise ConfigError(f"--epochs: must be >= 1, got {epochs}")
    os.makedirs(out, exist_ok=True)
    spec = None
    counts = []
    for e in range(epochs):
        ds = build_stages(s, split, epoch=e)[-1][1]
        spec = ds.element_spec
        path = _epoch_dir(out, e)
        # one shard file: Dataset.load interleaves shards, which would reorder batches
        ds.save(path, shard_func=lambda e: tf.constant(0, tf.int64))
        counts.append(int(sum(1 for _ in tf.data.Dataset.load(path, element_spec=spec))))
    info = {
        "format": 1,
        "config_hash": config_hash(s),
        "epochs": epochs,
        "split": split,
        "batches_per_epoch": counts,
        "data_path": s.data_path,
        "element_spec": {k: {"shape": v.shape.as_list(), "dtype": v.dtype.name}
                         for k, v in spec.items()},
    }
    tmp = os.path.join(out, MARKER + ".tmp")
    with open(tmp, "w") as f:
        json.dump(info, f, indent=2)
    os.replace(tmp, os.path.join(out, MARKER))
    return info


def find(s: Settings) -> str | None:
    """The materialized directory this config asks for, or None."""
    if s.materialized:
        if not os.path.isfile(os.path.join(s.materialized, MARKER)):
            raise ConfigError(f"pipeline.materialized: {s.materialized!r} has no {MARKER} "
                              "(write it with `tfpipe materialize CONFIG OUT --epochs N`)")
        return s.materialized
    if s.data_path and os.path.isfile(os.path.join(s.data_path, MARKER)):
        return s.data_path
    return None


def read(path: str, s: Settings, epoch: int, worker: tuple[int, int]) -> tf.data.Dataset:
    with open(os.path.join(path, MARKER)) as f:
        info = json.load(f)
    spec = {k: tf.TensorSpec(v["shape"], v["dtype"]) for k, v in info["element_spec"].items()}
    ds = tf.data.Dataset.load(_epoch_dir(path, epoch % int(info["epochs"])), element_spec=spec)
    wi, wc = worker
    if wc > 1:
        ds = ds.shard(wc, wi)  # whole batches per worker: disjoint and complete
    return ds
