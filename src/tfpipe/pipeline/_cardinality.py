"""Cardinality: the batches a pass declares from the manifest, and the report at
the end of a pass that delivered fewer (docs/pipeline.md, "Cardinality")."""

from __future__ import annotations

import os
import sys
from typing import Any

import tensorflow as tf

from tfpipe.errors import ConfigError
from tfpipe.pipeline._epochs import TRAIN_SPLITS
from tfpipe.pipeline._settings import Settings
from tfpipe.pipeline._source import Source, worker_files


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
    return batches_of(s, split, records, "records", worker)


def batches_of(s: Settings, split: str, count: int, unit: str,
               worker: tuple[int, int]) -> int:
    """Batches of one pass over `count` records (or rows: `unit`) of this worker;
    a ConfigError when drop_remainder would leave an epoch of 0 batches."""
    wi, wc = worker
    drop = s.drop_remainder if split in TRAIN_SPLITS else False
    if drop and count < s.batch_size:  # an epoch of 0 batches: Keras would train 0 steps
        part = f"worker {wi} of {wc}'s part, " if wc > 1 else ""
        raise ConfigError(
            f"pipeline.batch_size: {s.batch_size} is more than the {count} {unit} of split "
            f"{split!r} ({part}from the manifest of {s.data_path}), and "
            f"pipeline.drop_remainder is true: every epoch would have 0 batches; set "
            f"pipeline.batch_size to at most {count} or pipeline.drop_remainder: false")
    return count // s.batch_size if drop else -(-count // s.batch_size)


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
        tf.autograph.experimental.do_not_convert(lambda *_: tf.constant(False))
    ).repeat()  # cardinality: infinite
    return tf.data.Dataset.zip((ds.concatenate(never), tf.data.Dataset.range(n))).map(
        tf.autograph.experimental.do_not_convert(lambda batch, _: batch))


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


batches, declare, pass_report = _batches, _declare, _pass_report
