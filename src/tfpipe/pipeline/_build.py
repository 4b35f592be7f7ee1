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

import hashlib
import os
import sys
from typing import Any

import tensorflow as tf

from tfpipe import seeds
from tfpipe.errors import ConfigError, TfpipeError
from tfpipe.pipeline import _block, _classify
from tfpipe.pipeline._errors import guarded_map as isolate
from tfpipe.pipeline._errors import new_iteration, planned
from tfpipe.pipeline._labels import check_manifest_labels
from tfpipe.pipeline._options import batch_parallelism, map_parallelism, options
from tfpipe.pipeline._settings import AUTOTUNE, Settings, settings
from tfpipe.pipeline._source import Source, open_records, read_records, worker_files

SHUFFLE_TAG = 0x73687566  # "shuf": the shuffle seed is its own stream of the epoch seed
# The (seed, seed2) pair of the shuffle op is (SHUFFLE_SEED, word 0 of
# fold(epoch_seed, SHUFFLE_TAG) mod 2**31 - 1). SHUFFLE_SEED is tf.data's own
# default graph seed, so the order is the one `Dataset.shuffle(seed=that word)`
# gives when no global seed is set; we pass both words ourselves so that a user's
# `tf.random.set_seed` / `keras.utils.set_random_seed` cannot change it.
SHUFFLE_SEED = 87654321
_MAXINT32 = 2**31 - 1
TRAIN_SPLITS = ("train",)
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


def _cache_path(s: Settings, split: str, files: list[str], worker: tuple[int, int],
                what: str) -> str:
    """A cache file name that changes whenever what is cached would change: every
    setting that shapes the cached stream (which records, in which order, decoded
    how) and the identity of the data (`shards_identity`: the manifest's sha256 and
    each file's size and mtime), so a changed setting or data re-converted in place
    under the same names is read anew, never served stale (docs/pipeline.md, "Cache")."""
    from tfpipe import native
    from tfpipe.pipeline._source import effective_cycle, shards_identity

    # on_error: a cache filled under skip would hide from raise what it skipped
    keys = ("data_path", "task", "channels", "on_error")
    if what == "decoded":
        keys += ("image_size", "eval_crop_fraction", "max_boxes", "dct_scaling")
        if s.task == "segmentation":  # the masks' padding (other tasks: names as before)
            keys += ("ignore_label",)
    if s.keys is not None:  # a mapping changes what is parsed; without one, the names as before
        keys += ("keys",)
    tag = s.fingerprint(*keys)
    stream = {
        # the record order: the interleave width as the reader resolves it
        "cycle": effective_cycle(s.interleave_cycle, len(files)),
        # with several workers, batch_size decides file vs element sharding
        "sharding_batch": s.batch_size if worker[1] > 1 else None,
        # the native library reads past framing damage (and decodes), the fallback not
        "native": native.available(),
    }
    import json

    key = "\n".join(files) + "\n" + json.dumps(stream, sort_keys=True) + "\n" + \
        shards_identity(files)
    files_hash = hashlib.sha256(key.encode()).hexdigest()[:16]
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


def shuffle_seeds(epoch_seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(seed, seed2) of the epoch's shuffle, int64 scalars (tensor epoch seeds too)."""
    word = seeds.fold(epoch_seed, SHUFFLE_TAG)[0]  # fold_in puts the data in word 1
    seed2 = tf.math.floormod(tf.bitwise.bitwise_and(word, tf.constant(2**63 - 1, tf.int64)),
                             tf.constant(_MAXINT32, tf.int64))
    return tf.constant(SHUFFLE_SEED, tf.int64), seed2


def _shuffle(ds: tf.data.Dataset, buffer: int, epoch_seed: tf.Tensor) -> tf.data.Dataset:
    """`ds.shuffle(buffer, reshuffle_each_iteration=False)` with both seed words ours.

    `Dataset.shuffle(seed=...)` mixes in the global seed (`random_seed.get_seed`);
    the op itself takes the pair as inputs, so it is called directly
    (`tf.raw_ops`, then `from_variant`: same op and semantics as `Dataset.shuffle`).
    """
    seed, seed2 = shuffle_seeds(epoch_seed)
    flat = tf.nest.flatten(ds.element_spec)
    variant = tf.raw_ops.ShuffleDatasetV3(
        input_dataset=tf.data.experimental.to_variant(ds),
        buffer_size=tf.constant(buffer, tf.int64), seed=seed, seed2=seed2,
        seed_generator=tf.raw_ops.DummySeedGenerator(),
        output_types=[t.dtype for t in flat], output_shapes=[t.shape for t in flat],
        reshuffle_each_iteration=False)
    return tf.data.experimental.from_variant(variant, ds.element_spec)


class EpochCounter:
    """How many iterations of a train dataset have started (a one-row int64 table).

    `next_epoch(first)` runs once per iteration, inside the dataset: it returns
    `first + n` for the n-th iteration and counts it. A table rather than a
    `tf.Variable`: a variable created under a `tf.distribute` strategy's scope
    would become a distributed variable.
    """

    def __init__(self) -> None:
        with tf.init_scope():
            self.table = tf.lookup.experimental.MutableHashTable(
                key_dtype=tf.int64, value_dtype=tf.int64, default_value=0,
                name="tfpipe_epoch_counter")

    def next_epoch(self, first: tf.Tensor) -> tf.Tensor:
        key = tf.constant([0], tf.int64)
        n = self.table.lookup(key)
        with tf.control_dependencies([self.table.insert(key, n + 1)]):
            return tf.reshape(first + n, [])  # a scalar: the seed functions read the rank

    @property
    def iterations(self) -> int:
        """Iterations started so far (eager)."""
        return int(self.table.lookup(tf.constant([0], tf.int64))[0])


def epochs_from(first: int, per_epoch: Any, counter: EpochCounter | None = None
                ) -> tf.data.Dataset:
    """A dataset whose n-th iteration is `per_epoch(first + n)` (epoch a tensor)."""
    counter = counter or EpochCounter()
    start = tf.data.Dataset.from_tensors(tf.constant(first, tf.int64))
    raised: list[TfpipeError] = []

    # Not converted by AutoGraph: this function builds a whole epoch in Python
    # (reading manifests, os.path calls, config logic); converted, AutoGraph walks
    # all of it and warns about every builtin it cannot transform (isfile, getsize)
    # on each build. Its tensors need no Python control flow.
    @tf.autograph.experimental.do_not_convert
    def epoch_pipeline(e: tf.Tensor) -> tf.data.Dataset:
        try:
            return per_epoch(e)
        except TfpipeError as exc:  # a config error found while tracing
            raised.append(exc)
            raise

    try:
        ds = start.map(counter.next_epoch).flat_map(epoch_pipeline)
    except Exception:
        # flat_map traces the function and wraps what it raises (StagingError):
        # the user gets our error, naming the key, not a trace through autograph
        if raised:
            raise raised[0] from None
        raise
    ds._tfpipe_epoch_counter = counter  # noqa: SLF001 - keep the table alive with the dataset
    return ds


def build_stages(config: Any, split: str = "train", epoch: int = 0, worker: Any = None,
                 *, keep_index: bool = False) -> list[tuple[str, tf.data.Dataset]]:
    """Prefixes of one epoch's pipeline, in pipeline order: read, parse, decode,
    geometry (per-sample L1 + L2), batch (uint8 batches), pixel (batch + L3),
    compose (everything but options and prefetch). Each prefix is what the
    pipeline itself computes up to that stage (the stage report's deltas)."""
    s = settings(config)
    src, files, wk = _source(s, split, worker)
    read = _records(s, split, src, files, wk)
    records = _cache(read, s, split, files, wk, "records") if split in TRAIN_SPLITS else read
    stages = _assemble(s, split, epoch, wk, src, files, records, keep_index, all_stages=True)
    return [("read", read)] + stages[1:]


def _source(s: Settings, split: str, worker: Any) -> tuple[Source, list[str], tuple[int, int]]:
    if s.batch_size < 1:
        raise ConfigError(f"pipeline.batch_size: must be >= 1, got {s.batch_size}")
    wi, wc = _worker(worker)
    src = open_records(s.data_path, split, s.task, s.keys)
    if s.task == "classification":  # free when the manifest records the label range
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
             train: bool) -> Any:
    if s.task == "detection":
        from tfpipe.pipeline import _detect

        return _detect.Detect(s, es, worker[0], worker[1], src.parse, train)
    if s.task == "segmentation":
        from tfpipe.pipeline import _segment

        return _segment.Segment(s, es, worker[0], worker[1], src.parse, train)
    return _classify.Classify(s, es, worker[0], worker[1], src.parse, train)


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


# ------------------------------------------------------------------ cardinality
def _batches(s: Settings, split: str, src: Source, files: list[str],
             worker: tuple[int, int]) -> int | None:
    """Batches in one pass of this worker, from the manifest's record counts
    (None without a manifest entry for every shard, e.g. a glob of bare shards)."""
    from tfpipe.records import shard_record_counts

    counts = shard_record_counts(src.files)
    if any(f not in counts for f in src.files):
        return None
    wi, wc = worker
    _, elem_shard = worker_files(src.files, wi, wc, batch_size=s.batch_size)
    if elem_shard:  # every count-th element of the whole stream, from the wi-th
        records = len(range(wi, sum(counts.values()), wc))
    else:
        records = sum(counts[f] for f in files)
    drop = s.drop_remainder if split in TRAIN_SPLITS else False
    if drop and records < s.batch_size:  # an epoch of 0 batches: Keras would train 0 steps
        part = f"worker {wi} of {wc}'s part, " if wc > 1 else ""
        raise ConfigError(
            f"pipeline.batch_size: {s.batch_size} is more than the {records} records of split "
            f"{split!r} ({part}from the manifest of {s.data_path}), and "
            f"pipeline.drop_remainder is true: every epoch would have 0 batches; set "
            f"pipeline.batch_size to at most {records} or pipeline.drop_remainder: false")
    return records // s.batch_size if drop else -(-records // s.batch_size)


def batches_per_pass(config: Any, split: str = "train", worker: Any = None) -> int | None:
    """Batches one pass (a train epoch, an eval pass) of `build_pipeline(config,
    split, worker=worker)` yields: the manifest's records of this worker's part
    over `pipeline.batch_size` (rounded down for train with `drop_remainder`, up
    otherwise). None when some shard has no manifest entry (then the dataset's
    cardinality stays unknown). Materialized epochs are not counted here."""
    s = settings(config)
    src, files, wk = _source(s, split, worker)
    return _batches(s, split, src, files, wk)


def _cache_batches(ds: tf.data.Dataset, s: Settings, split: str, files: list[str],
                   worker: tuple[int, int]) -> tf.data.Dataset:
    """eval's `pipeline.cache`: the decoded uint8 batches (named as the decoded
    cache, plus the batch size)."""
    if s.cache == "none":
        return ds
    if s.cache == "memory":
        return ds.cache()
    return ds.cache(_cache_path(s, split, files, worker, "decoded") + f"-batches{s.batch_size}")


def _declare(ds: tf.data.Dataset, n: int | None, s: Settings | None = None
             ) -> tf.data.Dataset:
    """Declare `n` batches per pass: Keras (and `len()`) see the number of steps.

    `on_error: raise` asserts it (`assert_cardinality`: a pass of another length
    fails). Under `skip` a pass may end early (skipped records; a manifest that
    lists more than the shards hold): `n` is then declared without the assert --
    zipped with `range(n)` after the pass, followed by a dataset that is infinite
    to tf.data and yields nothing -- and the pass ends where its batches end
    (`_pass_report` reports it, and fails a pass with more than `n`)."""
    if n is None:
        return ds
    if s is None or s.on_error != "skip":
        return ds.apply(tf.data.experimental.assert_cardinality(n))
    spec = ds.element_spec
    never = tf.data.Dataset.from_tensors(_zeros(spec)).filter(
        lambda *_: tf.constant(False)).repeat()  # cardinality: infinite
    return tf.data.Dataset.zip((ds.concatenate(never), tf.data.Dataset.range(n))).map(
        lambda batch, _: batch)


def _zeros(spec: Any) -> Any:
    """A value of `spec`'s structure (unknown dims as 0)."""
    return tf.nest.map_structure(
        lambda t: tf.zeros([0 if d is None else d for d in t.shape], t.dtype), spec)


def _pass_report(ds: tf.data.Dataset, n: int | None, s: Settings, what: tf.Tensor,
                 files: list[str], iteration: tf.Tensor | None = None) -> tf.data.Dataset:
    """One pass of `ds` (its batches), unchanged; at its end, when it delivered
    fewer than the declared `n` batches, ONE line on stderr says so: how many,
    the records skipped in this pass per shard (`iteration`: the pass's own
    counts), the shards with framing damage, or, when nothing was skipped, that
    the manifest lists more records than the shards hold. A pass never repeats
    or invents a sample to make up the difference (docs/pipeline.md,
    "Cardinality"). A pass with more than `n` batches fails: the manifest lists
    fewer records than the shards hold. Only under `on_error: skip` (under
    `raise` the length is asserted)."""
    if n is None or s.on_error != "skip":
        return ds
    from tfpipe.pipeline._errors import _framing_table, take_pass_skipped

    paths = tf.constant(files)
    names = tf.constant([os.path.basename(f) for f in files])
    data = s.data_path
    end = tf.data.Dataset.from_tensors((tf.constant(True), _zeros(ds.element_spec)))
    marked = ds.map(lambda *b: (tf.constant(False), b[0] if len(b) == 1 else b)).concatenate(end)

    def listed(mask: tf.Tensor, counts: tf.Tensor, suffix: str) -> tf.Tensor:
        """'name (n suffix), ...' of the shards in `mask` ('' when none)."""
        return tf.strings.reduce_join(tf.boolean_mask(
            names + " (" + tf.strings.as_string(counts) + suffix + ")", mask), separator=", ")

    def shortfall(count: tf.Tensor) -> tf.Tensor:
        skipped = (take_pass_skipped(iteration, len(files)) if iteration is not None
                   else tf.zeros([len(files)], tf.int64))
        # the reader's per-shard findings (FRAMING_FIELDS): framing damage (damaged
        # ranges > 0), a missing shard (offset -1) or a clean read of fewer records
        # than the manifest lists (neither: the manifest is wrong, not the data)
        framed = tf.reshape(_framing_table().lookup(paths), [len(files), -1])
        lost = tf.maximum(framed[:, 1], 0)
        damaged = tf.logical_and(lost > 0, framed[:, 5] > 0)
        missing = tf.logical_and(lost > 0, framed[:, 0] < 0)
        fewer = tf.logical_and(lost > 0, tf.logical_not(tf.logical_or(damaged, missing)))
        total = tf.reduce_sum(skipped) + tf.reduce_sum(
            tf.where(tf.logical_or(damaged, missing), lost, 0))
        parts = tf.stack([
            tf.strings.reduce_join(tf.boolean_mask(
                names + ": " + tf.strings.as_string(skipped), skipped > 0), separator=", "),
            tf.strings.join(["framing damage: ", listed(damaged, lost, " lost")]),
            tf.strings.join(["missing: ", listed(missing, lost, " records")])])
        parts = tf.boolean_mask(parts, tf.stack([tf.reduce_any(skipped > 0),
                                                 tf.reduce_any(damaged),
                                                 tf.reduce_any(missing)]))
        skipped_text = tf.strings.join([
            tf.strings.as_string(total), " records skipped in this pass (",
            tf.strings.reduce_join(parts, separator="; "), ")"])
        fewer_text = tf.strings.join([
            "the shards hold fewer records than the manifest lists (",
            listed(fewer, lost, " fewer"), "; a stale or edited manifest.json; "
            f"`tfpipe verify {data}` checks it)"])
        if iteration is None:  # no per-pass counts here (tabular): say both causes
            why = tf.constant("records were skipped (see the lines above and "
                              "skipped_counts()) or the shards hold fewer records than the "
                              "manifest lists")
        else:
            why = tf.where(
                total > 0,
                tf.strings.join([skipped_text, tf.where(tf.reduce_any(fewer),
                                                        tf.strings.join(["; ", fewer_text]),
                                                        "")]),
                tf.where(tf.reduce_any(fewer),
                         tf.strings.join(["no record was skipped in this pass: ", fewer_text]),
                         f"no record was skipped in this pass: the shards hold fewer records "
                         f"than the manifest lists (a stale or edited manifest.json; `tfpipe "
                         f"verify {data}` checks it)"))
        line = tf.strings.join([
            "tfpipe: ", what, f" of {data} ended after ", tf.strings.as_string(count),
            f" of the {n} "
            "batches the manifest promises: ", why, "; no sample is repeated to fill the "
            "pass (pipeline.on_error=skip; Keras warns 'Your input ran out of data' at the "
            "end of such an epoch and goes on with the next)"])
        with tf.control_dependencies([tf.print(line, output_stream=sys.stderr)]):
            return tf.constant(True)

    def finish(count: tf.Tensor) -> tf.Tensor:
        if iteration is None:
            return tf.cond(count < n, lambda: shortfall(count), lambda: tf.constant(False))
        # the pass's own counts are taken (and forgotten) either way
        return tf.cond(count < n, lambda: shortfall(count), lambda: tf.reduce_any(
            take_pass_skipped(iteration, len(files)) < 0))

    @tf.autograph.experimental.do_not_convert
    def step(count: tf.Tensor, x: Any) -> Any:
        last, batch = x
        count = count + tf.cast(tf.logical_not(last), tf.int64)
        excess = tf.debugging.Assert(count <= n, [tf.strings.join([
            "tfpipe: ", what, f" has more batches than the {n} the manifest promises: the "
            f"shards hold more records than it lists (a stale manifest.json; `tfpipe verify "
            f"{data}` checks it)"])])
        done = tf.cond(last, lambda: finish(count), lambda: tf.constant(False))
        with tf.control_dependencies([excess, done]):
            return count, (tf.identity(last), tf.nest.map_structure(tf.identity, batch))

    out = marked.scan(tf.constant(0, tf.int64), step)
    return out.filter(lambda last, _: tf.logical_not(last)).map(lambda _, batch: batch)


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
    if offset is not None and (s.features is not None or service is not None):
        raise ConfigError("build_pipeline: offset= is for image pipelines built from the "
                          "records (not tabular configs, not service=); resume with step= there")
    if s.features is not None:  # a table: (features, label) batches, docs/tabular.md
        from tfpipe.pipeline import _tabular

        if service is not None or keep_index:
            raise ConfigError("build_pipeline: service= and keep_index are not supported for "
                              "tabular configs (a features: section)")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ConfigError(f"build_pipeline: step must be an integer >= 0, got {step!r}")
        return _tabular.build(s, split, epoch, _worker(worker), step)
    if service is not None:
        from tfpipe.pipeline import _service

        if step:
            raise ConfigError("build_pipeline: step= (resume) is not supported with service=; "
                              "resume from an epoch boundary (step=0) there")

        _service.check(s, split, service, processing_mode, worker, service_timeout_s)
        return _finish(_service.served(s, split, epoch, worker, keep_index, service,
                                       processing_mode, job_name, service_timeout_s),
                       s, as_supervised)
    from tfpipe.pipeline import _materialize

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
        if s.task == "detection":
            ds = ds.map(lambda e: (e["image"], {k: v for k, v in e.items() if k != "image"}))
        elif s.task == "segmentation":
            ds = ds.map(lambda e: (e["image"], e["mask"]))
        elif "augment_enabled" in ds.element_spec:
            # pixel_stage device, train: (features, label), the draws beside the image
            ds = ds.map(lambda e: ({k: v for k, v in e.items() if k != "label"}, e["label"]))
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
