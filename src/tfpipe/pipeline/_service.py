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

A lost worker: TF's client never gives up on a task whose worker is gone (the
dispatcher keeps every worker it ever saw registered and the job never ends),
and none of TF's settings bounds that wait. So each epoch's service stream runs
under `stall_guard`: graph ops only, it fails the iteration with a tfpipe
message once no element has arrived for `service_timeout_s` (docs/scale.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from tfpipe import seeds
from tfpipe.errors import ConfigError
from tfpipe.pipeline._settings import Settings

MODES = ("off", "dynamic")
# A healthy worker delivers an epoch's first batch within seconds; five minutes
# leaves room for a cold, loaded worker and still fails long before a cluster
# scheduler's own job timeout would.
DEFAULT_TIMEOUT_S = 300.0
# The guard's clock: one tick every TICK_S while it waits. The end of each epoch
# costs ~3 ticks (the ticker's interleave thread winding down: measured 0.3 s),
# each tick one scan step on an empty element; 0.1 s bounds both.
TICK_S = 0.1
# An epoch's first element may wait this many timeouts: before it, the workers
# receive the epoch's job, build its graph and fill the shuffle buffer (16-25 s
# on the loaded 2-core dev host, where later elements took 0.3 s).
FIRST_FACTOR = 3


def check(s: Settings, split: str, service: str, mode: str, worker: Any,
          timeout_s: float | None = DEFAULT_TIMEOUT_S) -> None:
    """Config errors found before anything is built."""
    if timeout_s is not None and (isinstance(timeout_s, bool)
                                  or not isinstance(timeout_s, (int, float))
                                  or not 1 <= timeout_s <= 86_400):
        raise ConfigError("service_timeout_s: must be a number of seconds in [1, 86400], or "
                          f"None to wait for a lost worker forever, got {timeout_s!r}")
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


_DATA, _TICK, _END = 0, 1, 2


def _blank(spec: tf.TypeSpec) -> tf.Tensor:
    """An empty stand-in of `spec`'s type (unknown dimensions 0) with `spec`'s static
    shape, so ticks and data share one element spec."""
    if not isinstance(spec, tf.TensorSpec):
        raise ConfigError(f"service=: the served elements hold a {type(spec).__name__}; "
                          "the lost-worker guard handles dense tensors only (set "
                          "service_timeout_s=None to serve it unguarded)")
    shape = [d if d is not None else 0 for d in spec.shape.as_list()]
    t = tf.fill(shape, "") if spec.dtype == tf.string else tf.zeros(shape, spec.dtype)
    return tf.compat.v1.placeholder_with_default(t, spec.shape)


def stall_guard(ds: tf.data.Dataset, timeout_s: float, service: str, mode: str,
                epoch: tf.Tensor) -> tf.data.Dataset:
    """`ds`, failing with a tfpipe message once it has delivered nothing for `timeout_s`.

    Graph ops only: a ticker (TF's SleepDataset, one empty element every TICK_S)
    runs beside `ds` in a non-deterministic interleave, and a scan counts how long
    the consumer has pulled nothing but ticks (an epoch's first element may take
    FIRST_FACTOR times as long). It measures waiting, not training:
    while the consumer is busy nothing is pulled, and a pull finds the buffered
    data element first. Ticks are dropped; `ds`'s elements pass unchanged, in order.
    """
    from tensorflow.python.data.experimental.ops import testing  # SleepDataset

    spec = ds.element_spec
    dnc = tf.autograph.experimental.do_not_convert
    blank = dnc(lambda kind: (tf.cast(kind, tf.int8), tf.nest.map_structure(_blank, spec)))
    data = ds.map(dnc(lambda *el: (tf.constant(_DATA, tf.int8),
                                   el if isinstance(spec, tuple) else el[0])))
    data = data.concatenate(tf.data.Dataset.from_tensors(_END).map(blank))
    ticks = (tf.data.Dataset.from_tensors(_TICK).map(blank).repeat()
             .apply(testing.sleep(int(TICK_S * 1e6))))
    branches = tf.data.Dataset.from_tensors(data).concatenate(tf.data.Dataset.from_tensors(ticks))
    # deterministic=False: a pull takes whichever branch is ready, so a stalled
    # data branch cannot block the ticks (the argument overrides Options.deterministic)
    merged = branches.interleave(dnc(lambda d: d), cycle_length=2, block_length=1,
                                 num_parallel_calls=2, deterministic=False)
    # no quotes or apostrophes: TF's Assert prints string data C-escaped
    head = f"tfpipe: tf.data service {service} (processing_mode={mode}) delivered nothing for "
    tail = (": a worker was most likely lost (killed or unreachable) and not restarted. The "
            "TF client waits for a lost worker forever, and the dispatcher keeps it in every "
            "later job too (its log names it: Lost worker HOST:PORT due to timeout). Restart "
            "that worker on the same address, or the dispatcher and its workers; raise "
            "service_timeout_s if the workers are only slow")

    @dnc
    def step(state: tuple[tf.Tensor, tf.Tensor], x: Any) -> Any:
        since, count = state
        kind, el = x
        now = tf.timestamp()
        tick = tf.equal(kind, _TICK)
        # a run of ticks starts at its first pull; any data element ends it
        since = tf.where(tick, tf.where(since < 0, now, since), tf.constant(-1.0, tf.float64))
        waited = tf.where(tick, now - since, tf.constant(0.0, tf.float64))
        count = count + tf.cast(tf.equal(kind, _DATA), tf.int64)
        first = tf.equal(count, 0)
        limit = tf.where(first, tf.constant(FIRST_FACTOR * timeout_s, tf.float64),
                         tf.constant(timeout_s, tf.float64))
        msg = tf.strings.join([
            head, tf.strings.as_string(waited, precision=1), " s (service_timeout_s=",
            f"{timeout_s:g}", tf.where(first, f", x{FIRST_FACTOR} before the first element of "
                                       "an epoch", ""), ") in epoch ",
            tf.strings.as_string(epoch), " after ", tf.strings.as_string(count), " batches",
            tail])
        with tf.control_dependencies([tf.debugging.Assert(waited < limit, [msg])]):
            kind = tf.identity(kind)
        return (since, count), (kind, el)

    out = merged.scan((tf.constant(-1.0, tf.float64), tf.constant(0, tf.int64)), step)
    out = out.take_while(dnc(lambda kind, el: kind != _END))
    return out.filter(dnc(lambda kind, el: kind == _DATA)).map(dnc(lambda kind, el: el))


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
           mode: str, job_name: str | None,
           timeout_s: float | None = DEFAULT_TIMEOUT_S) -> tf.data.Dataset:
    """The train/eval dataset whose per-epoch heavy part runs on the service."""
    from tfpipe.pipeline import _build
    from tfpipe.pipeline._source import record_counts

    train = split in _build.TRAIN_SPLITS
    src, files, wk = _build._source(s, split, worker)

    def guarded(ds: tf.data.Dataset, e: tf.Tensor) -> tf.data.Dataset:
        return ds if timeout_s is None else stall_guard(ds, timeout_s, service, mode, e)
    counts = record_counts(src.files) if mode == "dynamic" else []

    # traced by flat_map: plain graph code, autograph would only re-trace Python
    @tf.autograph.experimental.do_not_convert
    def off(e: tf.Tensor) -> tf.data.Dataset:
        records = _build._records(s, split, src, files, wk)
        remote = _build._assemble(s, split, e, wk, src, files, records, keep_index, False)
        return guarded(_read(service, remote[-1][1].with_options(_remote_options(s)), mode,
                             job_name, e), e)

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
        remote = guarded(_read(service, stages["batch"].with_options(_remote_options(ws)),
                               mode, job_name, e), e)
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
    elif s.task == "segmentation":
        from tfpipe.pipeline import _segment

        make = _segment.Segment
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
