"""`build_pipeline`: the entry that picks the path (a task's own pipeline, the
tf.data service, materialized epochs, the live pipeline from the records) and
finishes every dataset the same way (as_supervised, options, prefetch).

It imports the paths; none of them imports it (no import cycles: the shared
pieces live in `_epochs`, `_caching`, `_cardinality`; the stages in `_build`).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe import seeds
from tfpipe.errors import ConfigError, TfpipeError
from tfpipe.pipeline import _materialize, _service
from tfpipe.pipeline._build import (_assemble, _builder, _compose_stages, _records, _source,
                                    _worker)
from tfpipe.pipeline._caching import cache as _cache
from tfpipe.pipeline._caching import cache_batches as _cache_batches
from tfpipe.pipeline._cardinality import batches as _batches
from tfpipe.pipeline._cardinality import declare as _declare
from tfpipe.pipeline._cardinality import pass_report as _pass_report
from tfpipe.pipeline._epochs import TRAIN_SPLITS, epochs_from
from tfpipe.pipeline._errors import new_iteration
from tfpipe.pipeline._options import options
from tfpipe.pipeline._settings import AUTOTUNE, Settings, settings
from tfpipe.pipeline._tasks import task_of


def _live(s: Settings, split: str, epoch: int, worker: Any, keep_index: bool, step: int = 0,
          offset: int | None = None) -> tf.data.Dataset:
    """The pipeline from the raw records: train advances one epoch per iteration;
    with a manifest, a pass declares `batches_per_pass` batches (docs/pipeline.md,
    "Cardinality"). Every iteration draws its own id (`_errors.new_iteration`),
    which keys what that iteration keeps (two live iterators never share it)."""
    src, files, wk = _source(s, split, worker)
    records = _records(s, split, src, files, wk)
    # A positioned first pass is shorter than the rest: no single length to declare.
    n = None if step else _batches(s, split, src, files, wk)
    where = "" if wk[1] == 1 else f" (worker {wk[0]} of {wk[1]})"
    if split not in TRAIN_SPLITS:  # no randomness: every iteration is the same data
        what = tf.constant(f"{split} pass{where}")

        @tf.autograph.experimental.do_not_convert
        def one_pass(_: tf.Tensor) -> tf.data.Dataset:
            it = new_iteration()
            return _assemble(s, split, epoch, wk, src, files, records, keep_index, False, step,
                             offset=offset, iteration=it, until_batch=True, cache_decoded=False,
                             pass_end=lambda b: _pass_report(b, n, s, what, files, it))[-1][1]
        batches = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).flat_map(one_pass)
        # eval's cache holds the uint8 batches, outside the per-iteration part
        batches = _cache_batches(batches, s, split, files, wk)
        es = seeds.epoch_seed(seeds.global_seed(s.seed), epoch)
        ds = _compose_stages(s, _builder(s, es, wk, src, False), batches, step, wk, src,
                             keep_index, False)[-1][1]
        return _declare(ds, n, s)
    # the records cache is outside the per-epoch part: filled once, read by every epoch
    records = _cache(records, s, split, files, wk, "records")
    first = tf.constant(epoch, tf.int64)
    failures = FailureLog(s.batch_size)

    def one(e: tf.Tensor) -> tf.data.Dataset:  # only the epoch `epoch` itself is positioned
        here = tf.equal(e, first)
        at = tf.where(here, tf.constant(step, tf.int64), 0) if step else 0
        skip = None if offset is None else tf.where(here, tf.constant(offset, tf.int64), 0)
        it = new_iteration()
        what = tf.strings.join(["train epoch ", tf.strings.as_string(e), where])
        return _assemble(s, split, e, wk, src, files, records, keep_index, False, at,
                         offset=skip, iteration=it, on_failed=failures.note(e),
                         pass_end=lambda b: _pass_report(b, n, s, what, files, it))[-1][1]
    ds = epochs_from(epoch, one)
    declared = _declare(ds, n, s)
    # _declare returns a new dataset: keep the counter reachable (set_epoch)
    declared._tfpipe_epoch_counter = ds._tfpipe_epoch_counter  # noqa: SLF001
    declared._tfpipe_failures = failures  # noqa: SLF001 - read by stream_offset
    return declared


class FailureLog:
    """Stream positions of the records a train dataset skipped, per epoch: a
    table the dataset owns (epoch * 2**40 + position -> 1). Positions are a
    function of (epoch, record), so iterators of one epoch write the same keys.
    `stream_offset` reads it; it holds one entry per skipped record and epoch."""

    SHIFT = 1 << 40

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        with tf.init_scope():
            self.table = tf.lookup.experimental.MutableHashTable(
                key_dtype=tf.int64, value_dtype=tf.int64, default_value=0,
                name="tfpipe_failed_positions")

    def note(self, epoch: tf.Tensor) -> Any:
        """`on_failed` for `epoch`'s pass: records the failed positions (a vector)."""
        def add(positions: tf.Tensor) -> Any:
            keys = tf.cast(epoch, tf.int64) * self.SHIFT + tf.cast(positions, tf.int64)
            return self.table.insert(keys, tf.ones_like(keys))
        return add

    def positions(self, epoch: int) -> list[int]:
        """The failed positions of `epoch` recorded so far, ascending (eager)."""
        keys, _ = self.table.export()
        lo = int(epoch) * self.SHIFT
        return sorted(int(k) - lo for k in keys.numpy().reshape(-1)
                      if lo <= int(k) < lo + self.SHIFT)


def stream_offset(dataset: tf.data.Dataset, epoch: int, step: int,
                  start: tuple[int, int] | None = None) -> int:
    """The stream position where batch `step` of `epoch` begins, for a train
    `dataset` from `build_pipeline` that has delivered batches `0 .. step - 1` of
    that epoch: `step * batch_size` plus the records skipped (`on_error: skip`)
    before it. `build_pipeline(config, epoch=epoch, step=step, offset=it)` then
    resumes at exactly that batch, whatever was skipped (docs/training.md).
    `start=(step0, offset0)`: the dataset itself was positioned there (a resumed
    run): positions before `offset0` were never read in this process.
    Raises TfpipeError for any other dataset."""
    log = getattr(dataset, "_tfpipe_failures", None)
    if log is None:
        raise TfpipeError("stream_offset: needs a train dataset exactly as build_pipeline "
                          "returned it (not an eval split, not a dataset transformed after "
                          "the build, not materialized data)")
    step0, offset0 = start if start is not None else (0, 0)
    if offset0 < 0:  # a position saved without an offset: counted in batches
        offset0 = step0 * log.batch_size
    p = offset0 + (int(step) - int(step0)) * log.batch_size
    for q in log.positions(epoch):  # each failure below p pushes the end of the batches on
        if q < offset0:
            continue
        if q >= p:
            break
        p += 1
    return p


def build_pipeline(config: Any, split: str = "train", epoch: int = 0, worker: Any = None,
                   as_supervised: bool = False, *, keep_index: bool = False, step: int = 0,
                   offset: int | None = None, service: str | None = None,
                   processing_mode: str = "off",
                   job_name: str | None = None,
                   service_timeout_s: float | None = 300.0) -> tf.data.Dataset:
    """The `tf.data.Dataset` of batches for `split` (see docs/pipeline.md).

    A train dataset advances one epoch per iteration: its n-th iteration (each
    `for` loop, each Keras epoch, each pass of `repeat()`) is epoch `epoch + n`,
    the same bits as a fresh `build_pipeline(config, epoch=epoch + n)`. Eval
    splits have no randomness and give the same batches every iteration.

    worker: `(index, count)`, a `tf.distribute.InputContext` or "TF_CONFIG" (this
    process's place among the cluster's chief + workers); each worker gets a
    disjoint part of the data, together all of it, shares within one batch.
    `keep_index` adds each sample's global index as `"index"`.

    step: resume at batch `step` of epoch `epoch` (docs/training.md): the first
    iteration is that epoch from its batch `step` on, bit-identical to batches
    `step, step + 1, ...` of the uninterrupted epoch; later iterations are the
    next epochs, whole. The skipped records are read but never parsed, decoded
    or augmented (unlike `.skip(step)` after the build, which produces and
    throws away every skipped batch). Per worker, `step` counts that worker's
    batches. `tfpipe.train` saves and restores this position with a checkpoint.
    offset: the stream position where batch `step` begins (`stream_offset` of
    the run being resumed): exact also when records before it were skipped
    under `on_error: skip`; default `step * batch_size` (exact when none were).

    service: `"grpc://HOST:PORT"` of a tf.data service dispatcher: each epoch's
    read/decode/L1-L2 work runs on its workers; `processing_mode` "off" (every
    worker the whole epoch: one worker gives the local epoch bit for bit) or
    "dynamic" (the epoch split among workers, each sample once, bit-identical by
    index, any order); `job_name` shares a job between consumers (docs/scale.md).
    An iteration that receives nothing from the service for `service_timeout_s`
    seconds (a lost worker: TF's client would wait forever) fails with a message
    saying so; None waits forever.
    """
    s = settings(config)
    if offset is not None and (task_of(s).pipeline is not None or service is not None):
        raise ConfigError("build_pipeline: offset= is for image pipelines built from the "
                          "records (not tabular configs, not service=); resume with step= there")
    task = task_of(s)
    if task.pipeline is not None:  # a table: (features, label) batches, docs/tabular.md
        if service is not None or keep_index:
            raise ConfigError("build_pipeline: service= and keep_index are not supported for "
                              "tabular configs (a features: section)")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ConfigError(f"build_pipeline: step must be an integer >= 0, got {step!r}")
        return task.build()(s, split, epoch, _worker(worker), step)
    if service is not None:
        if step:
            raise ConfigError("build_pipeline: step= (resume) is not supported with service=; "
                              "resume from an epoch boundary (step=0) there")

        _service.check(s, split, service, processing_mode, worker, service_timeout_s)
        return _finish(_service.served(s, split, epoch, worker, keep_index, service,
                                       processing_mode, job_name, service_timeout_s),
                       s, as_supervised)
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ConfigError(f"build_pipeline: step must be an integer >= 0, got {step!r}")
    if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int)
                               or offset < step * s.batch_size):
        raise ConfigError(f"build_pipeline: offset must be an integer >= step * batch_size "
                          f"({step} * {s.batch_size}), the stream position of batch `step` "
                          f"(tfpipe.pipeline.stream_offset); got {offset!r}")
    if offset is not None and not step:
        offset = None  # the start of the epoch: nothing to skip
    ds = _materialize.open_materialized(s, split, epoch, _worker(worker))
    live = ds is None
    if not live and step:
        raise ConfigError(f"build_pipeline(step={step}): positioning is not supported on "
                          f"materialized data (pipeline.materialized / data.path is a "
                          "materialized directory); build from the records, or use .skip")
    if live:
        ds = _live(s, split, epoch, worker, keep_index, step, offset)
    counter = getattr(ds, "_tfpipe_epoch_counter", None)
    failures = getattr(ds, "_tfpipe_failures", None)
    # (before _finish: options flow downstream, and prefetch stays the last stage)
    out = _finish(ds.with_options(_shard_options(worker)), s, as_supervised)
    if counter is not None:
        out._tfpipe_epochs = (counter, epoch)  # noqa: SLF001 - read by set_epoch
    if failures is not None:
        out._tfpipe_failures = failures  # noqa: SLF001 - read by stream_offset
    if live and split in TRAIN_SPLITS:
        # what one iteration runs, without the epoch counter's flat_map: for tools
        # that read the graph (doctor), which would otherwise see only the wrapper
        out._tfpipe_one_epoch = lambda: _finish(  # noqa: SLF001 - read by one_epoch_view
            _one_epoch(s, split, epoch, worker, keep_index, step, offset), s, as_supervised)
    return out


def set_epoch(dataset: tf.data.Dataset, epoch: int) -> None:
    """Make the next iteration of a train `dataset` from `build_pipeline` be `epoch`.

    The dataset then goes on counting from there (the iteration after is
    `epoch + 1`). For loops that peek at a dataset (or iterate it an unknown
    number of times) between epochs: `tfpipe.train.epochs` calls this before
    every epoch. A dataset built with `step=k` at epoch e is positioned again
    whenever its epoch is e. Raises TfpipeError for any other dataset (eval
    splits, or a dataset transformed after `build_pipeline`).
    """
    held = getattr(dataset, "_tfpipe_epochs", None)
    if held is None:
        raise TfpipeError("set_epoch: needs a train dataset exactly as build_pipeline returned "
                          "it (not an eval split, not a dataset transformed after the build)")
    counter, first = held
    key = tf.constant([0], tf.int64)
    counter.table.insert(key, tf.constant([int(epoch) - int(first)], tf.int64))


def _shard_options(worker: Any) -> tf.data.Options:
    """tf.distribute's auto-shard policy for this dataset. Built per worker, it is
    already disjoint: OFF (a second, DATA-level sharding would drop data). Built
    whole, DATA, said explicitly: FILE sharding of our shard list would give every
    worker the same sample indices (so the same seeds), and AUTO falls back to DATA
    with only a log line; DATA keeps each sample's single-pipeline index, at the
    cost of every worker reading and decoding everything (docs/scale.md)."""
    opts = tf.data.Options()
    policy = tf.data.experimental.AutoShardPolicy
    opts.experimental_distribute.auto_shard_policy = (
        policy.DATA if worker is None else policy.OFF)
    return opts


def one_epoch_view(dataset: tf.data.Dataset) -> tf.data.Dataset | None:
    """For a train dataset returned by `build_pipeline`: the same pipeline for its
    first epoch built directly (no per-iteration epoch counter and `flat_map`), so a
    tool that reads the dataset graph (doctor) sees every stage. None for any other
    dataset (eval splits, materialized data, or a dataset transformed after
    `build_pipeline`: those graphs already are what runs)."""
    make = getattr(dataset, "_tfpipe_one_epoch", None)
    return make() if callable(make) else None


def _one_epoch(s: Settings, split: str, epoch: int, worker: Any, keep_index: bool,
               step: int = 0, offset: int | None = None) -> tf.data.Dataset:
    src, files, wk = _source(s, split, worker)
    records = _cache(_records(s, split, src, files, wk), s, split, files, wk, "records")
    return _assemble(s, split, epoch, wk, src, files, records, keep_index, False,
                     step, offset=offset)[-1][1]


def _finish(ds: tf.data.Dataset, s: Settings, as_supervised: bool) -> tf.data.Dataset:
    """as_supervised, options and the final prefetch (the same for every path)."""
    if as_supervised:
        ds = ds.map(task_of(s).supervised)
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
