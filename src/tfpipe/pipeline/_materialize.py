"""Materialize N augmented epochs to disk, and read them back.

Layout of a materialized directory:

    OUT/tfpipe-materialized.json   {"format": 2, "config_hash", "settings", "splits": {...}}
    OUT/<split>/epoch-00000/ ...   one `tf.data.Dataset.save` directory per epoch

The data is keyed by split, epoch and config hash. The hash covers every setting
that can change a saved byte: everything except `NOT_HASHED` (where the data
goes, threads, buffers, parallelism -- materialize always writes the
deterministic order, which `num_parallel_calls` cannot change). `build_pipeline`
reads the data back when `pipeline.materialized` names the directory, or when
`data.path` points at it; it refuses data of another config, a split or an
epoch that was not written, with a `ConfigError` saying what differs and how to
rematerialize (docs/pipeline.md, "Materialize").
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

import tensorflow as tf

from tfpipe.errors import ConfigError
from tfpipe.pipeline._settings import Settings, settings

MARKER = "tfpipe-materialized.json"
FORMAT = 2
TRAIN_SPLITS = ("train",)
# Settings that never change a materialized byte. `deterministic` belongs here
# because materialize always writes with deterministic: true (the canonical
# order; the samples themselves never depend on it).
NOT_HASHED = ("materialized", "prefetch_to_device", "cache", "private_threadpool",
              "ram_budget_mb", "prefetch", "num_parallel_calls", "deterministic",
              "read_parallel")

_log = logging.getLogger("tfpipe")

# Settings field -> the config key a user writes (for the mismatch message)
CONFIG_KEYS = {
    "seed": "seed", "data_path": "data.path", "task": "data.task",
    "image_size": "data.image_size", "channels": "data.channels",
    "output_dtype": "data.output_dtype", "mean": "data.normalize.mean",
    "std": "data.normalize.std", "label_format": "data.label_format",
    "num_classes": "data.num_classes", "eval_crop_fraction": "data.eval_crop_fraction",
    "max_boxes": "data.max_boxes", "dct_scaling": "data.dct_scaling", "keys": "data.keys",
    "ignore_label": "data.ignore_label", "instance_masks": "data.instance_masks",
    "batch_size": "pipeline.batch_size",
    "shuffle_buffer": "pipeline.shuffle_buffer", "interleave_cycle": "pipeline.interleave_cycle",
    "drop_remainder": "pipeline.drop_remainder", "on_error": "pipeline.on_error",
    "enable_rate": "augment.enable_rate", "geometry": "augment.geometry",
    "pixel": "augment.pixel", "batch": "augment.batch", "pixel_stage": "augment.pixel_stage",
}


def _norm_path(path: str | None) -> str | None:
    return None if path is None else os.path.normpath(os.path.abspath(os.path.expanduser(path)))


def hashed_settings(s: Settings) -> dict[str, Any]:
    """The settings that shape the saved bytes, as JSON values (data path absolute)."""
    values = {k: v for k, v in asdict(s).items() if k not in NOT_HASHED}
    if values.get("features") is None:  # image configs: the hash they always had
        values.pop("features", None)
    if values.get("keys") is None:  # no key mapping: the hash it always had
        values.pop("keys", None)
    if values.get("keypoints") is None:  # no data.keypoints: the hash it always had
        values.pop("keypoints", None)
    if values.get("pixel_stage") == "host":  # the default: hashes from before the switch hold
        del values["pixel_stage"]
    if values.get("label_offset") == 0:  # likewise for data.label_offset
        del values["label_offset"]
    if values.get("task") != "segmentation":  # only masks read data.ignore_label
        values.pop("ignore_label", None)
    if values.get("instance_masks") is None:  # off: the hash it always had
        values.pop("instance_masks", None)
    values["data_path"] = _norm_path(s.data_path)
    return json.loads(json.dumps(values, sort_keys=True, default=str))


def config_hash(s: Settings) -> str:
    """Hash of everything that shapes the saved elements (`hashed_settings`)."""
    import hashlib

    blob = json.dumps(hashed_settings(s), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _epoch_dir(out: str, split: str, epoch: int) -> str:
    return os.path.join(out, split, f"epoch-{epoch:05d}")


def _read_marker(path: str) -> dict[str, Any]:
    with open(os.path.join(path, MARKER)) as f:
        return json.load(f)


def _write_marker(out: str, info: dict[str, Any]) -> None:
    tmp = os.path.join(out, MARKER + ".tmp")
    with open(tmp, "w") as f:
        json.dump(info, f, indent=2)
    os.replace(tmp, os.path.join(out, MARKER))


def _differences(stored: dict[str, Any], current: dict[str, Any],
                 ignore: tuple[str, ...] = ()) -> list[str]:
    """'key: saved X, config Y' for each hashed setting that differs."""
    out = []
    for k in sorted(set(stored) | set(current)):
        if k in ignore or stored.get(k) == current.get(k):
            continue
        a, b = json.dumps(stored.get(k)), json.dumps(current.get(k))
        short = lambda v: v if len(v) <= 80 else v[:77] + "..."  # noqa: E731
        out.append(f"{CONFIG_KEYS.get(k, k)}: materialized {short(a)}, config {short(b)}")
    return out


def materialize(config: Any, out: str, epochs: int, split: str = "train",
                progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Write `epochs` epochs of `build_pipeline(config, split, epoch=e)` under `out`.

    `progress(epochs done, epochs)` is called before the first and after each epoch.

    A split other than train has no randomness: one epoch is written, served for
    every epoch. Several splits of the SAME config can share `out`; another
    config's data there is refused (remove it, or pick another `out`).
    Returns the split's entry: config_hash, split, epochs, batches_per_epoch, ...
    """
    from tfpipe.pipeline._build import build_stages

    s = replace(settings(config), deterministic=True, materialized=None)
    if epochs < 1:
        raise ConfigError(f"--epochs: must be >= 1, got {epochs}")
    if s.data_path and os.path.isfile(os.path.join(s.data_path, MARKER)):
        raise ConfigError(f"data.path: {s.data_path!r} is materialized data; materialize "
                          "from the converted dataset (tfpipe convert output)")
    if split not in TRAIN_SPLITS:
        epochs = 1
    h, values = config_hash(s), hashed_settings(s)
    os.makedirs(out, exist_ok=True)
    info: dict[str, Any] = {"format": FORMAT, "config_hash": h, "settings": values, "splits": {}}
    if os.path.isfile(os.path.join(out, MARKER)):
        old = _read_marker(out)
        if old.get("format") == FORMAT and old.get("config_hash") == h:
            info["splits"] = {k: v for k, v in old.get("splits", {}).items() if k != split}
        else:
            diff = _differences(old.get("settings", {}), values) or ["(written by an older tfpipe)"]
            raise ConfigError(
                f"{out!r} holds data materialized from another config ("
                + "; ".join(diff) + "); remove it or materialize into another directory")
    _write_marker(out, info)  # the split is absent until its epochs are complete
    shutil.rmtree(os.path.join(out, split), ignore_errors=True)
    spec = None
    counts = []
    for e in range(epochs):
        if progress:
            progress(e, epochs)
        ds = build_stages(s, split, epoch=e)[-1][1]
        spec = ds.element_spec
        path = _epoch_dir(out, split, e)
        if s.on_error == "raise":
            # Dataset.save deadlocks when its input fails (tensorflow/tensorflow#61736):
            # read the epoch once first, so a bad record stops the run with its message
            ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
        # one shard file: Dataset.load interleaves shards, which would reorder batches
        ds.save(path, shard_func=lambda e: tf.constant(0, tf.int64))
        counts.append(int(sum(1 for _ in tf.data.Dataset.load(path, element_spec=spec))))
    if progress:
        progress(epochs, epochs)
    entry = {
        "epochs": epochs,
        "batches_per_epoch": counts,
        "element_spec": {k: {"shape": v.shape.as_list(), "dtype": v.dtype.name}
                         for k, v in spec.items()},
    }
    info["splits"][split] = entry
    _write_marker(out, info)
    return {"config_hash": h, "split": split, "data_path": s.data_path, "path": out, **entry}


def find(s: Settings) -> tuple[str, bool] | None:
    """(materialized directory, named by data.path?) this config asks for, or None."""
    if s.materialized:
        if not os.path.isfile(os.path.join(s.materialized, MARKER)):
            raise ConfigError(f"pipeline.materialized: {s.materialized!r} has no {MARKER} "
                              "(write it with `tfpipe materialize CONFIG OUT --epochs N`)")
        return s.materialized, False
    if s.data_path and os.path.isfile(os.path.join(s.data_path, MARKER)):
        return s.data_path, True
    return None


def _rematerialize(path: str, split: str, epochs: int | str = "N") -> str:
    split_opt = "" if split in TRAIN_SPLITS else f" --split {split}"
    return (f"rematerialize with `tfpipe materialize CONFIG {path} --epochs {epochs}{split_opt}` "
            "(same config), or drop pipeline.materialized to build from the records")


def open_materialized(s: Settings, split: str, epoch: int, worker: tuple[int, int]
                      ) -> tf.data.Dataset | None:
    """The materialized `split` for this config, or None when it must be built live.

    None: no materialized directory is configured, or `split` was not
    materialized and `data.path` leads to the records (it is then built from
    them, as without `pipeline.materialized`). Raises ConfigError for data of
    another config, a split that cannot be built otherwise, or an epoch that was
    not written. Train: iteration n of the dataset is saved epoch `epoch + n`.
    """
    found = find(s)
    if found is None:
        return None
    path, by_data_path = found
    info = _read_marker(path)
    if info.get("format") != FORMAT:
        raise ConfigError(f"{path!r}: materialized by an older tfpipe (no split/config keys); "
                          + _rematerialize(path, split))
    splits = info.get("splits", {})
    if split not in splits:
        have = sorted(splits) or "none"
        if not by_data_path:
            _log.info("pipeline.materialized=%s holds splits %s, not %r: building %r from "
                      "data.path=%s", path, have, split, split, s.data_path)
            return None
        raise ConfigError(
            f"data.path: {path!r} holds materialized splits {have}, not {split!r}, and no "
            f"records to build it from; materialize it (`tfpipe materialize CONFIG {path} "
            f"--split {split}`) or set data.path to the converted dataset and "
            f"pipeline.materialized: {path}")
    ignore = ("data_path",) if by_data_path else ()
    diff = _differences(info.get("settings", {}), hashed_settings(s), ignore)
    if diff:
        raise ConfigError(
            f"pipeline.materialized: {path!r} was written for another config (hash "
            f"{info.get('config_hash')}, this config {config_hash(s)}): " + "; ".join(diff)
            + "; " + _rematerialize(path, split))
    entry = splits[split]
    spec = {k: tf.TensorSpec(v["shape"], v["dtype"]) for k, v in entry["element_spec"].items()}
    wi, wc = worker

    def served(ds: tf.data.Dataset) -> tf.data.Dataset:
        return ds.shard(wc, wi) if wc > 1 else ds  # whole batches per worker

    if split not in TRAIN_SPLITS:  # no randomness: the one saved epoch serves every epoch
        return served(tf.data.Dataset.load(_epoch_dir(path, split, 0), element_spec=spec))
    n = int(entry["epochs"])
    if not 0 <= epoch < n:
        raise ConfigError(f"epoch {epoch}: {path!r} holds epochs 0..{n - 1} of {split!r}; "
                          + _rematerialize(path, split, epoch + 1))
    saved = [tf.data.Dataset.load(_epoch_dir(path, split, e), element_spec=spec)
             for e in range(n)]
    message = (f"tfpipe: {path} holds epochs 0..{n - 1} of {split!r} (each iteration of the "
               f"dataset is the next epoch); " + _rematerialize(path, split, "M") + "; asked epoch")

    def one_epoch(e: tf.Tensor) -> tf.data.Dataset:
        check = tf.debugging.Assert(e < n, [message, e], summarize=1)
        with tf.control_dependencies([check]):
            e = tf.identity(e)
        choice = tf.data.Dataset.from_tensors(e).repeat()
        return served(tf.data.Dataset.choose_from_datasets(saved, choice,
                                                           stop_on_empty_dataset=True))

    from tfpipe.pipeline._epochs import epochs_from

    return epochs_from(epoch, one_epoch)
