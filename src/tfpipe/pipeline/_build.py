"""Assemble the `tf.data` pipeline (stage order: DESIGN.md, docs/pipeline.md).

    list shards -> shard per worker -> interleave(TFRecordDataset)
      [-> cache (train: encoded records)] -> shuffle(epoch seed) -> enumerate
      -> L1 parse + decode (+ fused crop) -> L2 geometry (per sample, uint8)
      [-> cache (eval: decoded, deterministic)] -> batch
      -> L3 pixel (batched, per-sample params from per-sample seeds)
      -> L4 mixup/cutmix (batch seed) -> prefetch (last)

Train datasets from `build_pipeline` advance one epoch per iteration: an
iteration counter (a one-row table captured by the dataset) gives iteration n
of `build_pipeline(cfg, epoch=e)` the epoch e + n, and everything from the
shuffle on is built inside a `flat_map` from that TENSOR epoch. The record
stream (read, worker shard, records cache) stays outside, built once, so a
`cache` is filled once and reused by every epoch.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe import seeds
from tfpipe.errors import ConfigError
from tfpipe.pipeline import _block
from tfpipe.pipeline._caching import cache as _cache
from tfpipe.pipeline._caching import cache_path as _cache_path
from tfpipe.pipeline._cardinality import batches as _batches
# (the epoch pieces under their old names here too: tests and tools import them from _build)
from tfpipe.pipeline._epochs import (SHUFFLE_SEED, SHUFFLE_TAG, TRAIN_SPLITS,  # noqa: F401
                                     EpochCounter, epochs_from, shuffle_seeds)
from tfpipe.pipeline._epochs import shuffle as _shuffle
from tfpipe.pipeline._errors import guarded_map as isolate
from tfpipe.pipeline._errors import planned
from tfpipe.pipeline._labels import check_manifest_labels
from tfpipe.pipeline._options import batch_parallelism, map_parallelism
from tfpipe.pipeline._settings import Settings, settings
from tfpipe.pipeline._source import Source, open_records, read_records, worker_files
from tfpipe.pipeline._tasks import Builder, task_of

# Prefixes in pipeline order (build_stages); the bench's stage report reads these names.
STAGES = ("read", "parse", "decode", "geometry", "batch", "pixel", "compose")


def _worker(worker: Any) -> tuple[int, int]:
    if worker is None:
        return 0, 1
    if worker == "TF_CONFIG":  # this process's place among the cluster's input workers
        from tfpipe.pipeline._cluster import tf_config_worker

        me = tf_config_worker()
        return (0, 1) if me is None else (me.index, me.count)
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


def build_stages(config: Any, split: str = "train", epoch: int = 0, worker: Any = None,
                 *, keep_index: bool = False, until: str | None = None
                 ) -> list[tuple[str, tf.data.Dataset]]:
    """Prefixes of one epoch's pipeline, in pipeline order: read, parse, decode,
    geometry (per-sample L1 + L2), batch (uint8 batches), pixel (batch + L3),
    compose (everything but options and prefetch). Each prefix is what the
    pipeline itself computes up to that stage (the stage report's deltas).
    `until="read"`: the record stream alone, without tracing the later stages
    (what a record count needs: `tfpipe check`'s records check)."""
    if until not in (None, "read"):
        raise ValueError(f"until: must be None or 'read', got {until!r}")
    s = settings(config)
    src, files, wk = _source(s, split, worker)
    read = _records(s, split, src, files, wk)
    if until == "read":
        return [("read", read)]
    records = _cache(read, s, split, files, wk, "records") if split in TRAIN_SPLITS else read
    stages = _assemble(s, split, epoch, wk, src, files, records, keep_index, all_stages=True)
    return [("read", read)] + stages[1:]


def _source(s: Settings, split: str, worker: Any) -> tuple[Source, list[str], tuple[int, int]]:
    if s.batch_size < 1:
        raise ConfigError(f"pipeline.batch_size: must be >= 1, got {s.batch_size}")
    wi, wc = _worker(worker)
    src = open_records(s.data_path, split, s.task, s.keys, task_of(s).needs(s))
    if task_of(s).labels:  # free when the manifest records the label range
        check_manifest_labels(src.label_stats, s.num_classes or src.num_classes,
                              s.label_offset, str(s.data_path))
    files, _ = worker_files(src.files, wi, wc, batch_size=s.batch_size)
    return src, files, (wi, wc)


def _records(s: Settings, split: str, src: Source, files: list[str],
             worker: tuple[int, int]) -> tf.data.Dataset:
    """The record stream of this worker: (shard, record, serialized) [-> records cache]."""
    wi, wc = worker
    _, elem_shard = worker_files(src.files, wi, wc, batch_size=s.batch_size)
    ds = read_records(files, src.compression, s.interleave_cycle, skip_framing=s.on_error == "skip",
                      parallel=s.read_parallel)
    if elem_shard:
        ds = ds.shard(wc, wi)
    return ds


def _assemble(s: Settings, split: str, epoch: int | tf.Tensor, worker: tuple[int, int],
              src: Source, files: list[str], records: tf.data.Dataset, keep_index: bool,
              all_stages: bool, step: int | tf.Tensor = 0, index: Any = None, *,
              offset: int | tf.Tensor | None = None, iteration: tf.Tensor | None = None,
              on_failed: Any = None, pass_end: Any = None, until_batch: bool = False,
              cache_decoded: bool = True) -> list[tuple[str, tf.data.Dataset]]:
    """The stages of one epoch from the record stream; `epoch` may be a tensor.

    `step` > 0 starts the epoch at its batch `step` (tensor or int): the first
    `offset` elements (default `step * batch_size`: exact when nothing before was
    skipped; `stream_offset` gives it exactly) are dropped right after
    `enumerate`, so they are read and shuffled but never parsed, decoded or
    augmented, and every later sample keeps its index (its seed); the batch
    numbering starts at `step`, so batch seeds (L4, enable_rate) stay those of
    the uninterrupted epoch.
    `index(shard, record)`: the sample index instead of the stream position
    (tf.data service, dynamic sharding: pipeline/_service.py).
    `iteration` / `on_failed`: per-iteration state and failed positions
    (`_errors.guarded_map`); `pass_end(batches)`: applied to the uint8 batches
    (the pass report); `until_batch`: stop there (no compose); `cache_decoded`:
    eval's `pipeline.cache` inside (False: the caller caches the batches).
    """
    wi, wc = worker
    train = split in TRAIN_SPLITS
    npc = map_parallelism(s)
    stages: list[tuple[str, tf.data.Dataset]] = [("read", records)]
    ds = records
    es = seeds.epoch_seed(seeds.global_seed(s.seed), epoch)
    if train and s.shuffle_buffer > 1:
        ds = _shuffle(ds, s.shuffle_buffer, es)
    # (local index, (shard, record, serialized)): the index keys the sample's seeds
    ds = ds.enumerate() if index is None else ds.map(lambda *e: (index(e[0], e[1]), e))
    positioned = not (isinstance(step, int) and step == 0)
    if positioned:
        ds = ds.skip(tf.cast(step, tf.int64) * s.batch_size if offset is None
                     else tf.cast(offset, tf.int64))

    builder = _builder(s, es, worker, src, train)
    # per-block draws (classification training); detection draws per sample
    plan = builder.plan if train and builder.augmenting else None
    if all_stages:  # extra prefixes only for the stage report: each traces functions
        stages.append(("parse", ds.map(lambda i, e: src.parse(e[2]),
                                       num_parallel_calls=npc, deterministic=s.deterministic)))
        stages.append(("decode", planned(ds, plan, parallel=npc).map(
            builder.decode_only, num_parallel_calls=npc, deterministic=s.deterministic)))

    drop = s.drop_remainder if train else False
    cache_here = not train and cache_decoded
    if not all_stages and _block.eligible(builder, src.parse_spec, train, files):
        # whole blocks of records become batches, the same bits (pipeline/_block.py)
        ds = _block.batches(ds, builder, src.parse_spec, files, s.on_error, npc,
                            s.deterministic, train, drop, None if not cache_here else (
                                lambda d: _block.cache_blocks(d, s.cache, lambda: _cache_path(
                                    s, split, files, (wi, wc), "decoded"))),
                            write_out=index is None,  # (service: uint8 batches travel)
                            iteration=iteration, on_failed=on_failed)
    else:
        ds, after_batch = isolate(ds, builder.process, builder.sentinel, files, s.on_error, npc,
                                  s.deterministic, plan, iteration, on_failed)
        if cache_here:
            ds = _cache(ds, s, split, files, (wi, wc), "decoded")
        stages.append(("geometry", ds))
        ds = after_batch(builder.batch(ds, False), drop, s.batch_size)
    if pass_end is not None:
        ds = pass_end(ds)
    stages.append(("batch", ds))
    if until_batch:
        return stages
    return stages + _compose_stages(s, builder, ds, step, worker, src, keep_index, all_stages)


def _builder(s: Settings, es: tf.Tensor, worker: tuple[int, int], src: Source,
             train: bool) -> Builder:
    return task_of(s).make(s, es, worker, src.parse, train)


def _compose_stages(s: Settings, builder: Any, ds: tf.data.Dataset, step: int | tf.Tensor,
                    worker: tuple[int, int], src: Source, keep_index: bool, all_stages: bool
                    ) -> list[tuple[str, tf.data.Dataset]]:
    """uint8 batches -> (pixel, for the stage report) compose: numbered from `step`."""
    wi, wc = worker
    num_classes = s.num_classes or src.num_classes
    positioned = not (isinstance(step, int) and step == 0)
    batched = ds.enumerate(tf.cast(step, tf.int64)) if positioned else ds.enumerate()
    stages: list[tuple[str, tf.data.Dataset]] = []
    if all_stages:
        pixel = tf.autograph.experimental.do_not_convert(
            lambda b, batch: builder.pixel_stage(batch))
        stages.append(("pixel", batched.map(pixel, num_parallel_calls=batch_parallelism(s),
                                            deterministic=s.deterministic)))

    compose = tf.autograph.experimental.do_not_convert(
        lambda b, batch: builder.compose(batch, seeds.global_index(b, wi, wc), num_classes,
                                         keep_index))
    ds = batched.map(compose, num_parallel_calls=batch_parallelism(s),
                     deterministic=s.deterministic)
    stages.append(("compose", ds))
    return stages


def batches_per_pass(config: Any, split: str = "train", worker: Any = None) -> int | None:
    """Batches one pass (a train epoch, an eval pass) of `build_pipeline(config,
    split, worker=worker)` yields: the manifest's records of this worker's part
    over `pipeline.batch_size` (rounded down for train with `drop_remainder`, up
    otherwise). None when some shard has no manifest entry (then the dataset's
    cardinality stays unknown). Materialized epochs are not counted here."""
    s = settings(config)
    src, files, wk = _source(s, split, worker)
    return _batches(s, split, src, files, wk)
