"""Assemble the `tf.data` pipeline (stage order: DESIGN.md, docs/pipeline.md).

    list shards -> shard per worker -> interleave(TFRecordDataset)
      [-> cache (train: encoded records)] -> shuffle(epoch seed) -> enumerate
      -> L1 parse + decode (+ fused crop) -> L2 geometry (per sample, uint8)
      [-> cache (eval: decoded, deterministic)] -> batch
      -> L3 pixel (batched, per-sample params from per-sample seeds)
      -> L4 mixup/cutmix (batch seed) -> prefetch (last)
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import tensorflow as tf

from tfpipe import seeds
from tfpipe.errors import ConfigError
from tfpipe.pipeline import _classify
from tfpipe.pipeline._errors import guarded_map as isolate
from tfpipe.pipeline._errors import planned
from tfpipe.pipeline._options import map_parallelism, options
from tfpipe.pipeline._settings import AUTOTUNE, Settings, settings
from tfpipe.pipeline._source import open_records, read_records, worker_files

SHUFFLE_TAG = 0x73687566  # "shuf": the shuffle seed is its own stream of the epoch seed
TRAIN_SPLITS = ("train",)
STAGES = ("read", "parse", "decode", "geometry", "pixel", "batch", "compose")


def _worker(worker: Any) -> tuple[int, int]:
    if worker is None:
        return 0, 1
    if hasattr(worker, "input_pipeline_id"):
        return int(worker.input_pipeline_id), int(worker.num_input_pipelines)
    try:
        index, count = (int(v) for v in worker)
    except (TypeError, ValueError):
        raise ConfigError(f"worker must be (index, count) or a tf.distribute.InputContext, "
                          f"got {worker!r}") from None
    if count < 1 or not 0 <= index < count:
        raise ConfigError(f"worker: need 0 <= index < count, got ({index}, {count})")
    return index, count


def _cache_path(s: Settings, split: str, files: list[str], worker: tuple[int, int],
                what: str) -> str:
    """A cache file name that changes whenever what is cached would change."""
    keys = ("data_path", "task", "channels")
    if what == "decoded":
        keys += ("image_size", "eval_crop_fraction", "max_boxes")
    tag = s.fingerprint(*keys)
    files_hash = hashlib.sha256("\n".join(files).encode()).hexdigest()[:8]
    try:  # fail at build time, not silently inside the iterator
        os.makedirs(s.cache, exist_ok=True)
        probe = os.path.join(s.cache, ".tfpipe-write-test")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        raise ConfigError(f"pipeline.cache: cannot write to {s.cache!r} ({e}); use 'none', "
                          "'memory' or a writable directory") from None
    return os.path.join(s.cache, f"{split}-{what}-{tag}-{files_hash}-w{worker[0]}of{worker[1]}")


def _cache(ds: tf.data.Dataset, s: Settings, split: str, files: list[str],
           worker: tuple[int, int], what: str) -> tf.data.Dataset:
    if s.cache == "none":
        return ds
    if s.cache == "memory":
        return ds.cache()
    return ds.cache(_cache_path(s, split, files, worker, what))


def build_stages(config: Any, split: str = "train", epoch: int = 0, worker: Any = None,
                 *, keep_index: bool = False) -> list[tuple[str, tf.data.Dataset]]:
    """Prefixes of the pipeline, one per stage: read, parse, decode, geometry, pixel,
    batch, compose (the last is the full pipeline without prefetch/options)."""
    return _assemble(settings(config), split, epoch, worker, keep_index, all_stages=True)


def _assemble(s: Settings, split: str, epoch: int, worker: Any, keep_index: bool,
              all_stages: bool) -> list[tuple[str, tf.data.Dataset]]:
    if s.batch_size < 1:
        raise ConfigError(f"pipeline.batch_size: must be >= 1, got {s.batch_size}")
    wi, wc = _worker(worker)
    train = split in TRAIN_SPLITS
    src = open_records(s.data_path, split, s.task)
    files, elem_shard = worker_files(src.files, wi, wc)
    npc = map_parallelism(s)
    stages: list[tuple[str, tf.data.Dataset]] = []

    ds = read_records(files, src.compression, s.interleave_cycle, skip_framing=s.on_error == "skip")
    if elem_shard:
        ds = ds.shard(wc, wi)
    stages.append(("read", ds))

    if train:
        ds = _cache(ds, s, split, files, (wi, wc), "records")
        if s.shuffle_buffer > 1:
            es = seeds.epoch_seed(seeds.global_seed(s.seed), epoch)
            # fold_in puts the data in word 1, the hash in word 0
            shuffle_seed = int(seeds.fold(es, SHUFFLE_TAG).numpy()[0] & 0x7FFFFFFFFFFFFFFF)
            ds = ds.shuffle(s.shuffle_buffer, seed=shuffle_seed, reshuffle_each_iteration=False)
    # (local index, (shard, record, serialized)): the index keys the sample's seeds
    ds = ds.enumerate()

    es = seeds.epoch_seed(seeds.global_seed(s.seed), epoch)
    num_classes = s.num_classes or src.num_classes
    if s.task == "detection":
        from tfpipe.pipeline import _detect

        builder = _detect.Detect(s, es, wi, wc, src.parse, train)
    else:
        builder = _classify.Classify(s, es, wi, wc, src.parse, train)

    # per-block draws (classification training); detection draws per sample
    plan = builder.plan if train and builder.augmenting else None
    if all_stages:  # extra prefixes only for the stage report: each traces functions
        stages.append(("parse", ds.map(lambda i, e: src.parse(e[2]),
                                       num_parallel_calls=npc, deterministic=s.deterministic)))
        stages.append(("decode", planned(ds, plan, parallel=npc).map(
            builder.decode_only, num_parallel_calls=npc, deterministic=s.deterministic)))

    ds, after_batch = isolate(ds, builder.process, builder.sentinel, files, s.on_error, npc,
                              s.deterministic, plan)
    if not train:
        ds = _cache(ds, s, split, files, (wi, wc), "decoded")
    stages.append(("geometry", ds))
    stages.append(("pixel", ds))  # L3 runs batched: the per-sample stage ends at geometry

    drop = s.drop_remainder if train else False
    ds = after_batch(builder.batch(ds, False), drop, s.batch_size)
    stages.append(("batch", ds))

    compose = tf.autograph.experimental.do_not_convert(
        lambda b, batch: builder.compose(batch, seeds.global_index(b, wi, wc), num_classes,
                                         keep_index))
    ds = ds.enumerate().map(compose,
        num_parallel_calls=max(1, npc // 2), deterministic=s.deterministic)
    stages.append(("compose", ds))
    return stages


def build_pipeline(config: Any, split: str = "train", epoch: int = 0, worker: Any = None,
                   as_supervised: bool = False, *, keep_index: bool = False) -> tf.data.Dataset:
    """The `tf.data.Dataset` of batches for `split` (see docs/pipeline.md).

    worker: `(index, count)` or a `tf.distribute.InputContext`; each worker gets a
    disjoint part of the data, together all of it. Restart at (epoch, step) with
    `build_pipeline(config, epoch=epoch).skip(step)`. `keep_index` adds each
    sample's global index as `"index"` (tests, debugging).
    """
    s = settings(config)
    from tfpipe.pipeline import _materialize

    mat = _materialize.find(s)
    if mat is not None:
        ds = _materialize.read(mat, s, epoch, _worker(worker))
    else:
        ds = _assemble(s, split, epoch, worker, keep_index, all_stages=False)[-1][1]
    if as_supervised:
        if s.task == "detection":
            ds = ds.map(lambda e: (e["image"], {k: v for k, v in e.items() if k != "image"}))
        else:
            ds = ds.map(lambda e: (e["image"], e["label"]))
    ds = ds.with_options(options(s))
    prefetch = s.prefetch if s.prefetch != AUTOTUNE else tf.data.AUTOTUNE
    if s.prefetch_to_device and _device_exists(s.prefetch_to_device):
        ds = ds.apply(tf.data.experimental.prefetch_to_device(s.prefetch_to_device))
    else:
        ds = ds.prefetch(prefetch)
    return ds


def _device_exists(name: str) -> bool:
    """True when `name` (e.g. "/gpu:0") is a local device; CPU-only hosts skip it."""
    try:
        spec = tf.DeviceSpec.from_string(name)
    except ValueError:
        raise ConfigError(f"pipeline.prefetch_to_device: not a device name, got {name!r} "
                          "(e.g. '/gpu:0')") from None
    kind = (spec.device_type or "").upper()
    devices = tf.config.list_logical_devices(kind) if kind else []
    index = spec.device_index or 0
    if len(devices) <= index:
        import logging

        logging.getLogger("tfpipe").warning(
            "pipeline.prefetch_to_device=%s: no such device here; using plain prefetch", name)
        return False
    return True
