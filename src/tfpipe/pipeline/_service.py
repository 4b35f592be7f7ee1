"""`build_pipeline(..., service=...)`: the heavy part of each epoch on tf.data service.

What crosses to the workers is a dataset GRAPH, registered with the dispatcher
per epoch. The train dataset's epoch counter is a table in the client's
process, and a table's value does not travel with the graph; so the local
wrapper (`epochs_from`) keeps counting iterations, and each iteration builds
that epoch's graph with the epoch baked in, registers it (in-graph
`register_dataset`: a new dataset id per epoch) and reads it as its own job.

Modes (docs/scale.md says the same):

* ``off`` (TF's `ShardingPolicy.OFF`): each worker runs the WHOLE epoch, the
  local pipeline's graph exactly (through L4): served by one worker, a
  consumer gets the local epoch bit for bit and in order; with k workers it
  gets k copies of every batch (TF's semantics), in no fixed order.
* ``dynamic`` (`ShardingPolicy.DYNAMIC`): the dispatcher hands shard files to
  workers on demand; each sample is produced once per epoch (at most once when a
  worker fails), in no fixed order. A sample's index (its seeds) cannot come
  from its position in a worker's stream, so the client computes the epoch's
  order of (shard, record) the local pipeline would have (the same interleave
  and seeded shuffle over record numbers, no data read) and the workers look
  each record's index up: every sample is bit-identical to the local
  pipeline's sample of the same index. Workers ship uint8 per-sample batches;
  L3, L4 (mixup/cutmix need the batch) and normalize run on the client.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from tfpipe import seeds
from tfpipe.errors import ConfigError
from tfpipe.pipeline._settings import Settings

MODES = ("off", "dynamic")


def check(s: Settings, split: str, service: str, mode: str, worker: Any) -> None:
    """Config errors found before anything is built."""
    if mode not in MODES:
        raise ConfigError(f"processing_mode: must be one of {', '.join(MODES)}, got {mode!r}")
    if not isinstance(service, str) or "://" not in service and ":" not in service:
        raise ConfigError(f"service: expected 'grpc://HOST:PORT', got {service!r}")
    if s.cache != "none":
        raise ConfigError(f"pipeline.cache: {s.cache!r} is not supported with service= (the "
                          "workers read the records every epoch); set cache: none")
    if s.materialized:
        raise ConfigError("service=: not with materialized data (read it locally)")
    if mode == "dynamic" and worker is not None:
        raise ConfigError("worker=: not with processing_mode='dynamic' (the service splits "
                          "the epoch among its workers); use 'off' per trainer, or one "
                          "consumer")


def _read(service: str, ds: tf.data.Dataset, mode: str, job_name: str | None,
          epoch: tf.Tensor) -> tf.data.Dataset:
    """Register `ds` (in-graph: runs when the iteration starts) and read it as a job."""
    svc = tf.data.experimental.service
    policy = svc.ShardingPolicy.OFF if mode == "off" else svc.ShardingPolicy.DYNAMIC
    # No compression: decoded pixels barely compress, and snappy costs worker CPU.
    dataset_id = svc.register_dataset(service, ds, compression=None)
    if job_name is None:  # an anonymous job per iteration: this consumer alone
        return svc.from_dataset_id(policy, service, dataset_id, ds.element_spec)
    # A named job must change with the epoch (a finished job's name gives an empty
    # stream); the public from_dataset_id only takes a Python string, so the
    # per-epoch name goes through the function it wraps (same arguments).
    from tensorflow.python.data.experimental.ops import data_service_ops

    name = tf.strings.join(["dataset_id=", dataset_id, "/", job_name, "/epoch-",
                            tf.strings.as_string(epoch)])
    return data_service_ops._from_dataset_id(  # noqa: SLF001 - see above
        policy, service, dataset_id, ds.element_spec, job_name=name)


def _remote_options(s: Settings) -> tf.data.Options:
    from tfpipe.pipeline._options import options

    opts = options(s)
    # the client's CPU count must not size the WORKER's pool: 0 = the worker's default
    opts.threading.private_threadpool_size = int(s.private_threadpool or 0)
    if s.ram_budget_mb is None:  # likewise its RAM: 0 = tf.data's default on the worker
        opts.autotune.ram_budget = 0
    return opts


def record_positions(s: Settings, files: list[str], counts: list[int], epoch_seed: tf.Tensor,
                     train: bool) -> tf.Tensor:
    """[N] int64: the local pipeline's stream position of record (file k, record r)
    at `offset[k] + r`, for one epoch -- the read stage's interleave and the
    seeded shuffle replayed over record numbers only (no file is opened)."""
    from tfpipe.pipeline._build import _shuffle
    from tfpipe.pipeline._source import DEFAULT_CYCLE

    n = int(sum(counts))
    offsets = tf.constant([sum(counts[:k]) for k in range(len(counts))], tf.int64)
    cycle = s.interleave_cycle if s.interleave_cycle > 0 else DEFAULT_CYCLE
    cycle = max(1, min(cycle, len(files)))
    ids = tf.data.Dataset.from_tensor_slices(
        (tf.range(len(files), dtype=tf.int64), tf.constant(counts, tf.int64)))
    meta = ids.interleave(tf.autograph.experimental.do_not_convert(
        lambda k, c: tf.data.Dataset.range(c).map(lambda r: tf.gather(offsets, k) + r)),
        cycle_length=cycle, block_length=1)
    if train and s.shuffle_buffer > 1:  # the permutation depends on seeds and length only
        meta = _shuffle(meta, s.shuffle_buffer, epoch_seed)
    keys = meta.batch(max(n, 1)).get_single_element() if n else tf.zeros([0], tf.int64)
    return tf.scatter_nd(tf.reshape(keys, [-1, 1]), tf.range(n, dtype=tf.int64), [n])


def served(s: Settings, split: str, epoch: int, worker: Any, keep_index: bool, service: str,
           mode: str, job_name: str | None) -> tf.data.Dataset:
    """The train/eval dataset whose per-epoch heavy part runs on the service."""
    from tfpipe.pipeline import _build
    from tfpipe.pipeline._source import record_counts

    train = split in _build.TRAIN_SPLITS
    src, files, wk = _build._source(s, split, worker)
    counts = record_counts(src.files) if mode == "dynamic" else []

    # traced by flat_map: plain graph code, autograph would only re-trace Python
    @tf.autograph.experimental.do_not_convert
    def off(e: tf.Tensor) -> tf.data.Dataset:
        records = _build._records(s, split, src, files, wk)
        remote = _build._assemble(s, split, e, wk, src, files, records, keep_index, False)
        return _read(service, remote[-1][1].with_options(_remote_options(s)), mode,
                     job_name, e)

    @tf.autograph.experimental.do_not_convert
    def dynamic(e: tf.Tensor) -> tf.data.Dataset:
        es = seeds.epoch_seed(seeds.global_seed(s.seed), e)
        positions = record_positions(s, src.files, counts, es, train)
        offsets = tf.constant([sum(counts[:k]) for k in range(len(counts))], tf.int64)
        index = tf.autograph.experimental.do_not_convert(lambda shard, rec: tf.gather(
            positions, tf.gather(offsets, shard) + rec))
        # isolate (not the ordered guarded map: indices arrive out of order) and
        # no remainder dropped per worker: the client forms the batches
        ws = dataclasses.replace(s, deterministic=False, drop_remainder=False)
        records = _build._records(ws, split, src, src.files, (0, 1))
        stages = dict(_build._assemble(ws, split, e, (0, 1), src, src.files, records,
                                       keep_index, False, index=index))
        remote = _read(service, stages["batch"].with_options(_remote_options(ws)), mode,
                       job_name, e)
        return compose_locally(s, split, e, src, remote, keep_index)

    per_epoch = off if mode == "off" else dynamic
    if not train:
        return per_epoch(tf.constant(epoch, tf.int64))
    return _build.epochs_from(epoch, per_epoch)


def compose_locally(s: Settings, split: str, e: tf.Tensor, src: Any,
                    remote: tf.data.Dataset, keep_index: bool) -> tf.data.Dataset:
    """Client side of `dynamic`: batches of the configured size, then L3 + L4 +
    normalize, exactly as the local pipeline's compose stage (batch seeds from
    the client's batch count)."""
    from tfpipe.pipeline import _build, _classify

    train = split in _build.TRAIN_SPLITS
    es = seeds.epoch_seed(seeds.global_seed(s.seed), e)
    if s.task == "detection":
        from tfpipe.pipeline import _detect

        make = _detect.Detect
    else:
        make = _classify.Classify
    builder = make(s, es, 0, 1, src.parse, train)
    drop = s.drop_remainder if train else False
    batched = remote.unbatch().batch(s.batch_size, drop_remainder=drop).enumerate()
    num_classes = s.num_classes or src.num_classes
    compose = tf.autograph.experimental.do_not_convert(
        lambda b, batch: builder.compose(batch, b, num_classes, keep_index))
    from tfpipe.pipeline._options import map_parallelism

    # the local pipeline's compose parallelism (_build._assemble)
    return batched.map(compose, num_parallel_calls=max(1, map_parallelism(s) // 2),
                       deterministic=s.deterministic)
