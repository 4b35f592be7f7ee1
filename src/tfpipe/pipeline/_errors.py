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
_TABLES: dict[str, tf.lookup.experimental.MutableHashTable] = {}


def _process_table(name: str, default: Any) -> tf.lookup.experimental.MutableHashTable:
    """The process-wide table `name` (shard path -> int64 value(s)), made once,
    outside any graph being traced, so every pipeline of the process shares it."""
    with _LOCK:
        if name not in _TABLES:
            with tf.init_scope():
                _TABLES[name] = tf.lookup.experimental.MutableHashTable(
                    key_dtype=tf.string, value_dtype=tf.int64, default_value=default,
                    name=name)
        return _TABLES[name]


def _table() -> tf.lookup.experimental.MutableHashTable:
    return _process_table("tfpipe_skipped", 0)


# ----------------------------------------------------------- per-iteration state
# Two iterators of one dataset can be alive at once (`zip(ds, ds)`, a second
# `iter()` while a first is mid-epoch, Keras's peek): what one iteration keeps
# (its pending positions, its skipped records) is keyed by an id drawn once per
# iteration, inside the dataset (`new_iteration`, docs/pipeline.md "Epochs").
ITERATION_SHIFT = 1 << 40  # pending-position keys: iteration * 2**40 + stream position
_PASS_SHIFT = 1 << 20  # per-pass skip keys: iteration * 2**20 + shard id
_COUNTER: list[tf.Variable] = []


def _iteration_counter() -> tf.Variable:
    """The process-wide iteration counter, made once. Made in a thread of its own:
    a `tf.distribute` strategy's scope is per thread, and under it a variable
    would become a distributed one (this is host state)."""
    with _LOCK:
        if not _COUNTER:
            def make() -> None:
                with tf.init_scope():
                    _COUNTER.append(tf.Variable(1, dtype=tf.int64, trainable=False,
                                                name="tfpipe_iterations"))
            t = threading.Thread(target=make)
            t.start()
            t.join()
        return _COUNTER[0]


def new_iteration() -> tf.Tensor:
    """A fresh int64 id (>= 1, never repeated in this process), for use inside a
    dataset function that runs once per iteration (a `flat_map` over one element).
    Atomic (`ResourceCountUpTo`): two iterations starting at once get two ids."""
    counter = _iteration_counter()
    return tf.raw_ops.ResourceCountUpTo(resource=counter.handle, limit=2**62, T=tf.int64)


def _pass_table() -> tf.lookup.experimental.MutableHashTable:
    """iteration * 2**20 + shard id -> records skipped in that iteration (int64 keys)."""
    with _LOCK:
        if "tfpipe_pass_skipped" not in _TABLES:
            with tf.init_scope():
                _TABLES["tfpipe_pass_skipped"] = tf.lookup.experimental.MutableHashTable(
                    key_dtype=tf.int64, value_dtype=tf.int64, default_value=0,
                    name="tfpipe_pass_skipped")
        return _TABLES["tfpipe_pass_skipped"]


def take_pass_skipped(iteration: tf.Tensor, num_shards: int) -> tf.Tensor:
    """[num_shards] records skipped so far in `iteration`, per shard id; forgets them."""
    table = _pass_table()
    keys = iteration * _PASS_SHIFT + tf.range(num_shards, dtype=tf.int64)
    counts = table.lookup(keys)
    with tf.control_dependencies([counts]):
        removed = table.remove(keys)
    with tf.control_dependencies([removed]):
        return tf.reshape(counts, [num_shards])


def _count_in_pass(iteration: tf.Tensor | None, shard_ids: tf.Tensor) -> tf.Tensor:
    """Add one skipped record per entry of `shard_ids` to `iteration`'s counts."""
    if iteration is None:
        return tf.constant(True)
    table = _pass_table()
    uniq, _, counts = tf.unique_with_counts(tf.cast(shard_ids, tf.int64))
    keys = iteration * _PASS_SHIFT + uniq
    new = table.lookup(keys) + tf.cast(counts, tf.int64)
    with tf.control_dependencies([table.insert(keys, new)]):
        return tf.constant(True)


def skipped_counts() -> dict[str, int]:
    """Elements skipped under `on_error: skip` so far in this process: shard path -> count."""
    keys, values = _table().export()
    return {k.decode(): int(v) for k, v in zip(keys.numpy(), values.numpy()) if int(v) > 0}


def reset_skipped_counts() -> None:
    """Forget the counts (e.g. between two runs in one process), framing losses too."""
    for table in (_table(), _framing_table()):
        keys, _ = table.export()
        if int(tf.size(keys)) > 0:
            table.remove(keys)


# ----------------------------------------------------------------- framing damage
# Per damaged shard: [byte offset of the first damage, records lost, records the
# manifest lists (-1: no manifest), records read, records recovered after
# resynchronising, damaged ranges]. Written when the reader reaches the shard's end.
FRAMING_FIELDS = ("offset", "records_lost", "expected", "records_read", "recovered",
                  "damaged_ranges")


def _framing_table() -> tf.lookup.experimental.MutableHashTable:
    return _process_table("tfpipe_framing", [-1] * len(FRAMING_FIELDS))


def framing_losses() -> dict[str, dict[str, int]]:
    """Shards whose framing (length/CRC) is damaged, as last read in this process:
    shard path -> {"offset": byte offset of the first damage, "records_lost":
    records the manifest lists that were not delivered (-1: unknown, no manifest),
    "expected": the manifest's count (-1: none), "records_read": records delivered
    from the shard, "recovered": of those, read after resynchronising past the
    damage, "damaged_ranges": number of damaged byte ranges}. The records lost are
    also in `skipped_counts()` (once per epoch, like bad records)."""
    keys, values = _framing_table().export()
    return {k.decode(): dict(zip(FRAMING_FIELDS, (int(x) for x in v)))
            for k, v in zip(keys.numpy(), values.numpy())}


def report_framing(path: tf.Tensor, damaged: tf.Tensor, message: tf.Tensor,
                   fields: tf.Tensor, policy: str) -> tf.Tensor:
    """Log + count (skip) or fail (raise) a shard's framing damage; returns a
    bool tensor to hang the shard's remaining reads on. `fields`: the
    FRAMING_FIELDS values, then the count to add to `skipped_counts()`."""
    if policy == "raise":
        check = tf.debugging.Assert(tf.logical_not(damaged), [message], summarize=1)
        with tf.control_dependencies([check]):
            return tf.identity(damaged)

    def log_and_count() -> tf.Tensor:
        table, framing = _table(), _framing_table()
        printed = tf.print(message, output_stream=sys.stderr)
        with tf.control_dependencies([printed]):
            new = table.lookup(path) + fields[-1]
        with tf.control_dependencies([table.insert(path, new),
                                      framing.insert(path, fields[:-1])]):
            return tf.constant(True)

    return tf.cond(damaged, log_and_count, lambda: tf.constant(False))


def isolate(ds: tf.data.Dataset, process: Callable[..., dict[str, tf.Tensor]],
            sentinel: Callable[..., dict[str, tf.Tensor]], files: list[str], policy: str,
            parallel: int, deterministic: bool = True, iteration: tf.Tensor | None = None
            ) -> tf.data.Dataset:
    """Map `process` over (shard_id, record_index, ...) elements, isolating failures.

    `sentinel(*element)` must return the same structure as `process` (any values);
    `ok`, `_shard` and `_record` keys are added by this function (`ok` is removed
    again at the end). `iteration` (`new_iteration`): also count the skipped
    records of this pass (`take_pass_skipped`).
    """
    paths = tf.constant(files)
    # Our functions use explicit tf.cond; autograph would only add tracing time.
    process = tf.autograph.experimental.do_not_convert(process)
    sentinel = tf.autograph.experimental.do_not_convert(sentinel)

    @tf.autograph.experimental.do_not_convert
    def one(*elem: Any) -> tf.data.Dataset:
        where = {"_shard": elem[0], "_record": elem[1]}
        good = tf.data.Dataset.from_tensors(elem).map(
            lambda *e: {**process(*e), **where, "ok": tf.constant(True)}).ignore_errors()
        bad = tf.data.Dataset.from_tensors(elem).map(
            lambda *e: {**sentinel(*e), **where, "ok": tf.constant(False)})
        return good.concatenate(bad).take(1)

    out = ds.interleave(one, cycle_length=max(parallel, 1), block_length=1,
                        num_parallel_calls=parallel if parallel > 1 or parallel == -1 else None,
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
            with tf.control_dependencies([table.insert(path, new),
                                          _count_in_pass(iteration, elem["_shard"][None])]):
                return tf.constant(False)

        ok = tf.cond(elem["ok"], lambda: tf.constant(True), log_and_count)
        return dict(elem, ok=ok)

    # Sequential on purpose: the count update is a read-modify-write.
    out = out.map(report)
    return out.filter(lambda e: e["ok"]).map(
        lambda e: {k: v for k, v in e.items() if k != "ok"})


def log_and_count_skipped(messages: tf.Tensor, shard_paths: tf.Tensor,
                          shard_ids: tf.Tensor | None = None,
                          iteration: tf.Tensor | None = None) -> tf.Tensor:
    """Print each skipped record's message and add it to `skipped_counts()` under
    its shard (vectors, one entry per record); a read-modify-write of the
    process-wide table, so callers run it one element at a time (a scan). With
    `iteration` (and the records' `shard_ids`), count them for that pass too."""
    table = _table()
    uniq, _, counts = tf.unique_with_counts(shard_paths)
    printed = tf.print(tf.strings.reduce_join(messages + "; skipped", separator="\n"),
                       output_stream=sys.stderr)
    with tf.control_dependencies([printed]):
        new = table.lookup(uniq) + tf.cast(counts, tf.int64)
    passed = _count_in_pass(iteration, shard_ids) if shard_ids is not None else tf.constant(True)
    with tf.control_dependencies([table.insert(uniq, new), passed]):
        return tf.constant(True)


def _new_pending_table() -> tf.lookup.experimental.MutableHashTable:
    with tf.init_scope():
        return tf.lookup.experimental.MutableHashTable(
            key_dtype=tf.int64, value_dtype=tf.int64, default_value=-1)


# Records are registered, and the per-sample random draws made, a block at a time.
PLAN_ROWS = 64

Plan = Callable[[tf.Tensor], dict[str, tf.Tensor]]
AfterBatch = Callable[[tf.data.Dataset, bool, int], tf.data.Dataset]


def _zeros_like_spec(spec: Any) -> Any:
    """A value of `spec`'s structure (unknown dims as 0): a stand-in element."""
    return tf.nest.map_structure(
        lambda s: tf.zeros([0 if d is None else d for d in s.shape], s.dtype), spec)


def _keep_full(batched: tf.data.Dataset, drop_remainder: bool, batch_size: int
               ) -> tf.data.Dataset:
    """`drop_remainder` applied after the fact (batches were formed without it)."""
    if not drop_remainder:
        return batched
    full = batched.filter(lambda b: tf.shape(tf.nest.flatten(b)[0])[0] >= batch_size)
    # what batch(drop_remainder=True) would have said: a static batch dimension
    return full.map(lambda b: tf.nest.map_structure(
        lambda t: tf.ensure_shape(t, [batch_size] + t.shape[1:].as_list()), b))


def planned(ds: tf.data.Dataset, plan: Plan | None,
            register: Callable[..., tf.Tensor] | None = None, parallel: int = 1
            ) -> tf.data.Dataset:
    """(local, (shard, record, serialized)) from `enumerate()` ->
    (shard, record, local, serialized[, plan row]).

    `plan(local [n]) -> dict of [n, ...]` runs once per block of PLAN_ROWS
    samples with vectorized ops: the per-sample random draws cost one set of
    kernels per block instead of one per sample (docs/performance-history.md).
    `register(shard, record, local)` (vectors) runs once per block too, in its
    own small sequential map (it is stateful); the plan map is parallel.
    """
    blocks = ds.batch(PLAN_ROWS)
    if register is not None:
        @tf.autograph.experimental.do_not_convert
        def registered(local: tf.Tensor, elem: tuple[tf.Tensor, ...]) -> tuple[Any, ...]:
            with tf.control_dependencies([register(elem[0], elem[1], local)]):
                return tf.identity(local), elem
        blocks = blocks.map(registered)

    @tf.autograph.experimental.do_not_convert
    def block(local: tf.Tensor, elem: tuple[tf.Tensor, ...]) -> tuple[Any, ...]:
        shard, rec, serialized = elem
        if plan is None:
            return shard, rec, local, serialized
        return shard, rec, local, serialized, plan(local)

    return blocks.map(block, num_parallel_calls=parallel if parallel == -1 else max(1, parallel),
                      deterministic=True).unbatch()  # -1: tf.data.AUTOTUNE


def guarded_map(ds: tf.data.Dataset, process: Callable[..., dict[str, tf.Tensor]],
                sentinel: Callable[..., dict[str, tf.Tensor]], files: list[str], policy: str,
                parallel: int, deterministic: bool = True, plan: Plan | None = None,
                iteration: tf.Tensor | None = None,
                on_failed: Callable[[tf.Tensor], Any] | None = None
                ) -> tuple[tf.data.Dataset, AfterBatch]:
    """`isolate` at the cost of a plain parallel map (the default, ordered path).

    `ds` yields `(local, (shard, record, serialized))` (straight from
    `enumerate()`); `process` gets `(shard, record, local, serialized[, plan
    row])`. Returns the mapped dataset and `after_batch(batched, drop_remainder,
    batch_size)` to apply to `batch(..., drop_remainder=False)` of it.

    A map error drops only that element under `ignore_errors()`; what is lost is
    WHICH element it was. So every element's (shard, record) is registered under
    its stream position in a table before the map (a block of PLAN_ROWS at a
    time, one vectorized insert), and each batch removes the positions it
    delivered. Because the map keeps order, every position before a batch's
    last element is settled when that batch forms: what is still registered
    below it failed, and the after-batch step reports (log + count) those; an
    end-of-stream step reports the rest. Nothing runs per element beyond the
    map itself (the earlier per-element register/remove cost ~15% of the
    imagenet pipeline's throughput; before that an ordered `scan` over elements
    cost 15-40%: docs/performance-history.md).
    `iteration` (`new_iteration`, drawn once per iteration): the positions are
    registered under it, so two live iterators of one dataset never settle each
    other's; the pass's skips are counted under it too (`take_pass_skipped`).
    `on_failed(positions)`: called with the stream positions of the failed
    elements as they are reported (the resume offset, `_pipeline.stream_offset`).
    Needs the map to keep order, so `deterministic=False` falls back to `isolate`;
    so does `raise`, because `ignore_errors()` would also swallow errors raised
    UPSTREAM of the map (e.g. framing damage), which `raise` must surface.
    """
    if not deterministic or policy == "raise":
        out = isolate(planned(ds, plan, parallel=parallel), process, sentinel, files, policy,
                      parallel, deterministic, iteration)
        return out, _keep_full
    paths = tf.constant(files)
    pending = _new_pending_table()
    shift = tf.constant(1 << 40, tf.int64)
    # this iteration's keys: [base, base + ITERATION_SHIFT)
    base = (tf.constant(0, tf.int64) if iteration is None
            else tf.cast(iteration, tf.int64) * ITERATION_SHIFT)
    process = tf.autograph.experimental.do_not_convert(process)

    def register(shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor) -> tf.Tensor:
        return pending.insert(base + local, tf.cast(shard, tf.int64) * shift + rec)

    @tf.autograph.experimental.do_not_convert
    def run(shard, rec, local, serialized, *row):
        return {**process(shard, rec, local, serialized, *row), "_local": local}

    mapped = planned(ds, plan, register, parallel).map(
        run, num_parallel_calls=parallel, deterministic=True).ignore_errors()

    def report(positions: tf.Tensor, keys: tf.Tensor) -> tf.Tensor:
        """Log + count the failed elements at `positions` (registered `keys`)."""
        order = tf.argsort(positions)
        keys = tf.gather(keys, order)
        shard_ids = tf.maximum(tf.cast(keys // shift, tf.int32), 0)
        shard_paths = tf.gather(paths, shard_ids)
        msgs = tf.strings.join(["tfpipe: bad record ", tf.strings.as_string(keys % shift),
                                " in shard ", shard_paths, f" (pipeline.on_error={policy})"])
        logged = log_and_count_skipped(msgs, shard_paths, shard_ids, iteration)
        if on_failed is None:
            return logged
        with tf.control_dependencies([logged, on_failed(tf.gather(positions, order) - base)]):
            return tf.constant(True)

    def settle(before: tf.Tensor | None) -> tf.Tensor:
        """Report and forget this iteration's registered positions < `before`
        (None: all of them)."""
        positions, keys = pending.export()
        positions, keys = tf.reshape(positions, [-1]), tf.reshape(keys, [-1])
        mine = tf.logical_and(positions >= base, positions < base + ITERATION_SHIFT)
        if before is not None:
            mine = tf.logical_and(mine, positions < before)
        positions = tf.boolean_mask(positions, mine)
        keys = tf.boolean_mask(keys, mine)
        reported = tf.cond(tf.size(positions) > 0, lambda: report(positions, keys),
                           lambda: tf.constant(False))
        with tf.control_dependencies([reported]):
            return pending.remove(positions)

    # Both steps are scans: ordered and one at a time by construction (the
    # count update is a read-modify-write); the state is the settled watermark.
    @tf.autograph.experimental.do_not_convert
    def settle_before_batch(watermark: tf.Tensor, batch: dict[str, tf.Tensor]):
        delivered = base + batch["_local"]
        # what the batch delivered first; then everything still registered below
        # its LAST element failed (the map keeps order): reported now, so a
        # failure inside a batch is known once the batch is (stream_offset)
        done = pending.remove(delivered)
        with tf.control_dependencies([done]):
            settled = settle(delivered[-1])
        with tf.control_dependencies([settled]):
            return delivered[-1], {k: tf.identity(v) for k, v in batch.items()}

    @tf.autograph.experimental.do_not_convert
    def settle_all(watermark: tf.Tensor, elem: Any):
        with tf.control_dependencies([settle(None)]):
            return watermark, tf.nest.map_structure(tf.identity, elem)

    def after_batch(batched: tf.data.Dataset, drop_remainder: bool, batch_size: int
                    ) -> tf.data.Dataset:
        start = tf.constant(0, tf.int64)
        out = batched.scan(start, settle_before_batch)  # once per batch
        # Runs once when the stream ends and yields nothing: the failures after
        # the last batch's last element.
        end = tf.data.Dataset.from_tensors(_zeros_like_spec(out.element_spec)).scan(
            start, settle_all).filter(lambda *_: tf.constant(False))
        # The remainder is dropped only now, after its positions were removed.
        return _keep_full(out.concatenate(end), drop_remainder, batch_size)

    return mapped, after_batch
