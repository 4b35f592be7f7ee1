"""Per-element error isolation for `pipeline.on_error` (skip | raise).

A `tf.data` map error is not catchable inside the graph, and `ignore_errors()`
on a record stream drops the rest of the file without saying which record
failed. So each record is processed inside its own one-element dataset:

    from_tensors(record).map(process).ignore_errors()   # 0 or 1 element
        .concatenate(from_tensors(sentinel)).take(1)     # always 1 element

The sentinel carries `ok=False` and the record's shard id and index. Under
`skip` the sentinel is logged (shard path + record index) and counted, then
filtered out; under `raise` it fails with an `InvalidArgumentError` that names
the shard and record. Only the bad element is lost, never the rest of its
shard, and a stream of only bad records yields nothing (so `repeat()` ends
instead of spinning).

Counts live in a process-wide table keyed by shard path; read them with
`skipped_counts()` once the iterator is done (elements still in flight in
prefetch buffers are counted when they are produced).
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

import tensorflow as tf

_LOCK = threading.Lock()
_TABLE: tf.lookup.experimental.MutableHashTable | None = None


def _table() -> tf.lookup.experimental.MutableHashTable:
    global _TABLE
    with _LOCK:
        if _TABLE is None:
            with tf.init_scope():
                _TABLE = tf.lookup.experimental.MutableHashTable(
                    key_dtype=tf.string, value_dtype=tf.int64, default_value=0,
                    name="tfpipe_skipped")
        return _TABLE


def skipped_counts() -> dict[str, int]:
    """Elements skipped under `on_error: skip` so far in this process: shard path -> count."""
    keys, values = _table().export()
    return {k.decode(): int(v) for k, v in zip(keys.numpy(), values.numpy()) if int(v) > 0}


def reset_skipped_counts() -> None:
    """Forget the counts (e.g. between two runs in one process)."""
    table = _table()
    keys, _ = table.export()
    if int(tf.size(keys)) > 0:
        table.remove(keys)


def isolate(ds: tf.data.Dataset, process: Callable[..., dict[str, tf.Tensor]],
            sentinel: Callable[..., dict[str, tf.Tensor]], files: list[str], policy: str,
            parallel: int, deterministic: bool = True) -> tf.data.Dataset:
    """Map `process` over (shard_id, record_index, ...) elements, isolating failures.

    `sentinel(*element)` must return the same structure as `process` (any values);
    an `ok` key is added by this function.
    """
    paths = tf.constant(files)
    # Our functions use explicit tf.cond; autograph would only add tracing time.
    process = tf.autograph.experimental.do_not_convert(process)
    sentinel = tf.autograph.experimental.do_not_convert(sentinel)

    @tf.autograph.experimental.do_not_convert
    def one(*elem: Any) -> tf.data.Dataset:
        good = tf.data.Dataset.from_tensors(elem).map(
            lambda *e: {**process(*e), "ok": tf.constant(True)}).ignore_errors()
        bad = tf.data.Dataset.from_tensors(elem).map(
            lambda *e: {**sentinel(*e), "ok": tf.constant(False)})
        return good.concatenate(bad).take(1)

    out = ds.interleave(one, cycle_length=max(parallel, 1), block_length=1,
                        num_parallel_calls=parallel if parallel > 1 else None,
                        deterministic=deterministic)

    @tf.autograph.experimental.do_not_convert
    def report(elem: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        path = tf.gather(paths, elem["_shard"])
        msg = tf.strings.join(["tfpipe: bad record ", tf.strings.as_string(elem["_record"]),
                               " in shard ", path, f" (pipeline.on_error={policy})"])
        if policy == "raise":
            check = tf.debugging.Assert(elem["ok"], [msg], summarize=1)
            with tf.control_dependencies([check]):
                return dict(elem, ok=tf.identity(elem["ok"]))

        def log_and_count() -> tf.Tensor:
            table = _table()
            with tf.control_dependencies([tf.print(msg + "; skipped", output_stream=sys.stderr)]):
                new = table.lookup(path) + 1
            with tf.control_dependencies([table.insert(path, new)]):
                return tf.constant(False)

        ok = tf.cond(elem["ok"], lambda: tf.constant(True), log_and_count)
        return dict(elem, ok=ok)

    # Sequential on purpose: the count update is a read-modify-write.
    out = out.map(report)
    return out.filter(lambda e: e["ok"]).map(
        lambda e: {k: v for k, v in e.items() if k != "ok"})


def _new_pending_table() -> tf.lookup.experimental.MutableHashTable:
    with tf.init_scope():
        return tf.lookup.experimental.MutableHashTable(
            key_dtype=tf.int64, value_dtype=tf.int64, default_value=-1)


def guarded_map(ds: tf.data.Dataset, process: Callable[..., dict[str, tf.Tensor]],
                sentinel: Callable[..., dict[str, tf.Tensor]], files: list[str], policy: str,
                parallel: int, deterministic: bool = True) -> tf.data.Dataset:
    """`isolate` at the cost of a plain parallel map (the default, ordered path).

    A map error drops only that element under `ignore_errors()`; what is lost is
    WHICH element it was. So each element's (shard, record) is first registered
    in a table under its stream position, the parallel map runs with
    `ignore_errors()`, and an ordered `scan` after it sees the gap in positions,
    looks the missing ones up, logs/counts (skip) or fails (raise), and clears
    the table; an end marker flushes skips at the very end. Needs the map to
    keep order, so `deterministic=False` falls back to `isolate`; so does
    `raise`, because `ignore_errors()` would also swallow errors raised UPSTREAM
    of the map (e.g. framing damage), which `raise` must surface.
    """
    if not deterministic or policy == "raise":
        return isolate(ds, process, sentinel, files, policy, parallel, deterministic)
    paths = tf.constant(files)
    pending = _new_pending_table()
    shift = tf.constant(1 << 40, tf.int64)
    process = tf.autograph.experimental.do_not_convert(process)
    sentinel = tf.autograph.experimental.do_not_convert(sentinel)

    @tf.autograph.experimental.do_not_convert
    def register(shard, rec, local, serialized):
        key = tf.cast(shard, tf.int64) * shift + rec
        with tf.control_dependencies([pending.insert(tf.reshape(local, [1]), tf.reshape(key, [1]))]):
            return shard, rec, tf.identity(local), serialized

    @tf.autograph.experimental.do_not_convert
    def run(shard, rec, local, serialized):
        return {**process(shard, rec, local, serialized), "_local": local,
                "_end": tf.constant(False)}

    end = {**sentinel(tf.constant(0, tf.int32), tf.constant(0, tf.int64),
                      tf.constant(0, tf.int64), tf.constant(b"")),
           "_local": tf.constant(-1, tf.int64), "_end": tf.constant(True)}
    out = ds.map(register).map(run, num_parallel_calls=parallel, deterministic=True)
    out = out.ignore_errors().concatenate(tf.data.Dataset.from_tensors(end))

    def report(missing: tf.Tensor) -> tf.Tensor:
        """Log + count (skip) or fail (raise) for the missing stream positions."""
        keys = pending.lookup(missing)
        shard_paths = tf.gather(paths, tf.maximum(tf.cast(keys // shift, tf.int32), 0))
        msgs = tf.strings.join(["tfpipe: bad record ", tf.strings.as_string(keys % shift),
                                " in shard ", shard_paths, f" (pipeline.on_error={policy})"])
        table = _table()
        uniq, _, counts = tf.unique_with_counts(shard_paths)
        printed = tf.print(tf.strings.reduce_join(msgs + "; skipped", separator="\n"),
                           output_stream=sys.stderr)
        with tf.control_dependencies([printed]):
            new = table.lookup(uniq) + tf.cast(counts, tf.int64)
        with tf.control_dependencies([table.insert(uniq, new)]):
            return tf.constant(True)

    @tf.autograph.experimental.do_not_convert
    def step(expected: tf.Tensor, elem: dict[str, tf.Tensor]):
        local = elem["_local"]
        is_end = elem["_end"]
        # The common case (no gap) costs one compare and one table remove.
        gap = tf.logical_or(is_end, local > expected)

        def handle() -> tf.Tensor:
            missing = tf.cond(is_end, lambda: tf.sort(pending.export()[0]),
                              lambda: tf.range(expected, local, dtype=tf.int64))
            reported = tf.cond(tf.size(missing) > 0, lambda: report(missing),
                               lambda: tf.constant(False))
            with tf.control_dependencies([reported]):
                removed = pending.remove(missing)
            with tf.control_dependencies([removed]):
                return tf.constant(True)

        def nothing() -> tf.Tensor:
            return tf.constant(False)

        handled = tf.cond(gap, handle, nothing)
        with tf.control_dependencies([handled]):
            removed = pending.remove(tf.reshape(local, [1]))
        with tf.control_dependencies([removed]):
            return local + 1, dict(elem)

    out = out.scan(tf.constant(0, tf.int64), step)
    return out.filter(lambda e: tf.logical_not(e["_end"])).map(
        lambda e: {k: v for k, v in e.items() if k not in ("_end", "_local")})
