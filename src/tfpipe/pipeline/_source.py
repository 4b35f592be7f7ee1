"""Read stage: shard list -> per-worker assignment -> parallel interleave -> parse.

Every record travels with `(shard index, record index in shard)` so that a bad
record or image can be reported by name under `pipeline.on_error`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import tensorflow as tf

from tfpipe.errors import ConfigError, ManifestError
# tfpipe's own record keys (defined with the role mapping; the builders import them here)
from tfpipe.pipeline._keys import (  # noqa: F401
    BOX_KEYS,
    BOX_LABEL_KEY,
    IMAGE_KEY,
    LABEL_KEY,
    KeyedParse,
    resolve,
)
from tfpipe.pipeline._tasks import task_named
from tfpipe.records import is_tfds_dir, open_source

# A fixed interleave width when the config says auto or autotune: tf.data's AUTOTUNE cycle
# length is the host's core count, which would make the sample order (and so every
# seed) machine-dependent. 4 open shards keep reads sequential and still mix shards.
DEFAULT_CYCLE = 4


@dataclass(frozen=True)
class Source:
    files: list[str]
    compression: str | None  # tf.data's compression_type: None or "GZIP"
    parse: Callable[[tf.Tensor], dict[str, tf.Tensor]]
    num_classes: int | None
    # `tf.io.parse_example` features of the named keys (`RecordSource.parse_spec`)
    parse_spec: Callable[[Iterable[str]], dict[str, Any]] | None = None
    # the label range the manifest records ({key, min, max}: `tfpipe adopt`), or None
    label_stats: dict[str, Any] | None = None


def open_records(path: str | None, split: str, task: str,
                 keys: dict[str, Any] | None = None,
                 needs: dict[str, str] | None = None) -> Source:
    """Shards of `split` under `path` via `tfpipe.records.open_source` (manifest-checked).

    Shards that are missing or differ in size from the manifest stay in the list:
    the reader decides by `pipeline.on_error` (`read_records`: refused by name
    under `raise`, read as far as they can be and reported under `skip`).
    `keys` (`data.keys`) or a TFDS-prepared directory's own mapping: the parse
    reads the record's keys and hands out tfpipe's (`_keys.KeyedParse`).
    `needs`: record key -> the config key that asks for it (`Task.needs`): a
    ConfigError naming both and listing the records' keys when one is missing."""
    if not path:
        raise ConfigError("data.path: not set; point it at a converted dataset directory "
                          "or a shard glob (tfpipe convert SRC OUT)")
    foreign = bool(keys) or is_tfds_dir(path)
    required = None if foreign else list(task_named(task).required_keys)
    src = open_source(path, split=split, required=required, check_files=False)
    for key, asked_by in (needs or {}).items():
        if foreign:
            raise ConfigError(f"{asked_by}: needs tfpipe's own record key {key!r}; not "
                              "available through data.keys or a TFDS directory yet")
        if key not in src.schema:
            have = ", ".join(k for k in sorted(src.schema) if not k.startswith("tfpipe/"))
            raise ConfigError(f"{asked_by}: the records under {path!r} (split {split!r}) have "
                              f"no {key!r}. The records have: {have}. `tfpipe convert` "
                              "writes it from COCO (docs/coco-objects.md)")
    files = list(src.files)
    if not files:
        raise ManifestError(f"no {split!r} shards under {path!r}")
    names = list(src.class_names or [])
    source = src.manifest.source if src.manifest is not None else {}
    stats = source.get("labels")
    stats = stats if isinstance(stats, dict) else None
    derived = source.get("keys") if source.get("format") == "tfds" else None
    plan = resolve(keys, derived, src.schema, task, f"{path} (split {split!r})") \
        if foreign else None
    if plan is None:
        return Source(files, src.tf_compression or None, src.parse, len(names) or None,
                      src.parse_spec, stats)
    parse = KeyedParse(plan)
    return Source(files, src.tf_compression or None, parse, len(names) or None,
                  parse.parse_spec, stats)


def worker_files(files: list[str], index: int, count: int, counts: list[int] | None = None,
                 batch_size: int = 1) -> tuple[list[str], bool]:
    """Files for worker `index` of `count`, and whether elements must be sharded instead.

    Whole files go to workers (each reads only its own shards) when the records
    can be dealt so that no worker has more than one batch more than another:
    files go, largest first, to the least loaded worker (`counts`: records per
    file; default: `record_counts`). Otherwise -- fewer files than workers, or
    uneven files (3 shards of 73 for 2 workers would be 146 vs 73) -- every
    worker reads all files and keeps every count-th record: shares within one
    record of each other, at the price of each worker reading every file.
    """
    if count <= 1:
        return files, False
    if len(files) < count:
        return files, True
    counts = record_counts(files) if counts is None else counts
    load = [0] * count
    owner = [0] * len(files)
    for k in sorted(range(len(files)), key=lambda k: -counts[k]):  # stable: ties keep order
        w = min(range(count), key=lambda i: load[i])
        owner[k] = w
        load[w] += counts[k]
    if max(load) - min(load) > batch_size:
        return files, True
    return [f for f, w in zip(files, owner) if w == index], False


def record_counts(files: list[str]) -> list[int]:
    """Records per file: the manifest's counts, else counted (one framing pass,
    remembered per file path, size and mtime)."""
    from tfpipe.records import shard_record_counts

    known = shard_record_counts(files)
    return [known[f] if f in known else _counted(f, *_stamp(f)) for f in files]


def shards_identity(files: list[str]) -> str:
    """What the data of `files` is, for cache keys: per file its manifest entry's
    sha256 and record count (when listed), its size and mtime (ns), or "missing".
    Re-converting in place changes the manifest's sha256; rewriting a bare shard
    changes its size or mtime."""
    import os

    from tfpipe.records import shard_entries

    listed = {f: (e.sha256, e.num_records) for f, e in shard_entries(files).items()}
    parts = []
    for f in files:
        try:
            st = os.stat(f)
            here = f"{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            here = "missing"
        parts.append(f"{f}|{listed.get(f, '')}|{here}")
    return "\n".join(parts)


def _stamp(path: str) -> tuple[int, int]:
    import os

    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=4096)
def _counted(path: str, size: int, mtime: int) -> int:
    compression = "GZIP" if path.endswith(".gz") else ""
    with tf.init_scope():  # eager even when called while a function is traced
        return int(tf.data.TFRecordDataset(path, compression_type=compression).reduce(
            tf.constant(0, tf.int64), lambda n, _: n + 1))


def effective_cycle(cycle: int, num_files: int) -> int:
    """The interleave width `read_records` uses for `cycle` over `num_files` shards
    (what sets the record order)."""
    if cycle <= 0:
        cycle = DEFAULT_CYCLE
    return max(1, min(cycle, num_files))


def _reader_setup(files: list[str], compression: str | None, cycle: int, skip_framing: bool,
                  expected: dict[str, int] | None) -> tuple[int, dict[str, int], str, bool]:
    """(cycle, expected counts, framing policy, resync?) shared by the two readers.

    Shards missing or differing in size from their manifest are refused here,
    by name, under `raise` (`tfpipe.records.shard_problems`); under `skip` they
    are read (a missing one as nothing, reported: `_shard_notes`)."""
    from tfpipe.native import tfrecord as native_tfrecord
    from tfpipe.records import shard_problems, shard_record_counts

    if not skip_framing:
        problems = shard_problems(files)
        if problems:  # every such shard, one line each
            raise ManifestError("\n".join(problems.values()))
    cycle = effective_cycle(cycle, len(files))
    if expected is None:
        expected = shard_record_counts(files)
    return (cycle, expected, "skip" if skip_framing else "raise",
            not compression and native_tfrecord.available())


def _shard_notes(files: list[str]) -> tuple[list[bool], list[str], list[str]]:
    """Per file, at build time: present?, the message if it is missing, and what a
    clean read delivering another count than the manifest's would mean (compares
    the size on disk with the manifest's num_bytes)."""
    import os

    from tfpipe.records import shard_sizes

    sizes = shard_sizes(files)
    present, missing, miscount = [], [], []
    for f in files:
        here = os.path.isfile(f)
        present.append(here)
        directory = os.path.dirname(os.path.abspath(f))
        listed = sizes.get(f)
        missing.append(
            f"tfpipe: shard {f} is missing: the {listed[0] if listed else 'unknown number of'}"
            " records the manifest lists are lost (pipeline.on_error=skip). Restore it, or "
            f"run `tfpipe verify {directory} --salvage OUT` for a complete dataset without it.")
        size = os.path.getsize(f) if here else -1
        if listed is None or size == listed[1]:
            why = ("the manifest is wrong, not the data (the file has the size the manifest "
                   "says; its count was edited?)")
        elif size < listed[1]:
            why = (f"the file is {listed[1] - size} bytes shorter than the manifest says: it "
                   "was cut between two records (or the manifest is wrong)")
        else:
            why = (f"the file is {size - listed[1]} bytes longer than the manifest says: it "
                   "was rewritten after conversion (or the manifest is wrong)")
        miscount.append(f"{why}. Run `tfpipe verify {directory} --salvage OUT` for a dataset "
                        "whose manifest matches its records")
    return present, missing, miscount


def read_records(files: list[str], compression: str | None, cycle: int,
                 skip_framing: bool = True,
                 expected: dict[str, int] | None = None, parallel: int = 0) -> tf.data.Dataset:
    """Dataset of (shard_id int32, record_index int64, serialized) in a fixed order.

    Framing damage (bad length/CRC, truncation) is a `DataLossError` inside
    `TFRecordDataset`, which then ends that file. So each shard is read with
    the fast reader, errors absorbed, while a scan keeps (records, bytes) read;
    when the reader stopped before the end of the file:

    * with the native library and an uncompressed shard, the rest is walked
      exactly as `tfpipe verify --salvage` walks it (`tfpipe.native.tfrecord`)
      and every intact record after the damage is read too (resynchronised);
    * the damage is reported with the shard's path, the byte offset, the
      records the manifest lists and how many were lost: under `skip`
      (`skip_framing`) as a log line, in `skipped_counts()` (records lost) and
      `framing_losses()` (details); under `raise` as an `InvalidArgumentError`.

    `expected`: path -> records the manifest lists (default: read from the
    manifest.json beside the shards, when there is one). `parallel`: parallel
    shard reads (0: one per open shard; -1: tf.data.AUTOTUNE); never the order.
    """
    from tfpipe.pipeline._errors import new_iteration, report_framing

    cycle, expected, policy, resync = _reader_setup(files, compression, cycle, skip_framing,
                                                    expected)
    present, missing, miscount = _shard_notes(files)
    ids = tf.data.Dataset.from_tensor_slices(
        (tf.range(len(files), dtype=tf.int32), tf.constant(files),
         tf.constant([int(expected.get(f, -1)) for f in files], tf.int64),
         tf.constant(present), tf.constant(missing), tf.constant(miscount)))
    # Where each shard's fast reader stopped: shard id -> [records, bytes],
    # accumulated a block at a time. Keyed by an id drawn each time a shard's
    # read starts (`new_iteration`), not by the shard: two live iterators reading
    # the same shard at once (zip(ds, ds), a second iter() mid-epoch) would
    # otherwise mix their counts, and a count short of the real one "resumed"
    # past damage that is not there, delivering records twice.
    with tf.init_scope():
        stopped = tf.lookup.experimental.MutableHashTable(
            key_dtype=tf.int64, value_dtype=tf.int64,
            default_value=tf.constant([0, 0], tf.int64))

    # not converted by AutoGraph (no tensor-dependent Python control flow): the
    # conversion cost ~0.6 s of every fresh process's first build
    @tf.autograph.experimental.do_not_convert
    def one_file(shard_id: tf.Tensor, path: tf.Tensor, want: tf.Tensor, here: tf.Tensor,
                 gone: tf.Tensor, note: tf.Tensor) -> tf.data.Dataset:
        key = new_iteration()  # this read of this shard (see `stopped`)
        fast = tf.data.TFRecordDataset(path, compression_type=compression or "")
        # (index, record) between a start marker (index -2: the block holding it
        # resets the shard's entry, also after an abandoned iteration) and an end
        # marker (index -1: even a shard that yields nothing passes one block)
        marker = lambda i: tf.data.Dataset.from_tensors(  # noqa: E731
            (tf.constant(i, tf.int64), tf.constant(b"")))
        fast = marker(-2).concatenate(
            fast.ignore_errors(log_warning=True).enumerate()).concatenate(marker(-1))

        @tf.autograph.experimental.do_not_convert
        def count(index: tf.Tensor, record: tf.Tensor) -> tuple[tf.Tensor, ...]:
            """Once per block: add its (records, bytes) to the shard's entry and
            drop the markers (the first row of the first block, the last of the last)."""
            starts = index[0] == -2
            lo = tf.cast(starts, tf.int32)
            hi = tf.size(index) - tf.cast(index[-1] == -1, tf.int32)
            index, record = index[lo:hi], record[lo:hi]
            size = tf.reduce_sum(tf.cast(tf.strings.length(record), tf.int64) + 16)  # framing
            prev = tf.where(starts, tf.zeros([2], tf.int64), stopped.lookup(key))
            add = tf.stack([tf.size(index, out_type=tf.int64), size])
            with tf.control_dependencies([stopped.insert(key, prev + add)]):
                return tf.fill(tf.shape(index), shard_id), tf.identity(index), \
                    tf.identity(record)

        # Blocks of 64: the stateful count runs once per block, not per record (a
        # table op in a per-record function cost ~2x the old per-record read in a
        # side-by-side; docs/pipeline.md "Bad records" has the figures).
        head = fast.batch(64).map(count).unbatch()
        rest = tf.data.Dataset.from_tensors(shard_id).flat_map(
            lambda sid: _after_damage(sid, path, want, _take(stopped, key), compression,
                                      resync, policy, report_framing, note))
        whole = head.concatenate(rest)
        if all(present):
            return whole
        # a shard missing at build time (on_error: skip): reported, read as nothing;
        # one of the two by `here` (take(0) never opens its input)
        lost = tf.data.Dataset.from_tensors(shard_id).flat_map(
            lambda sid: _missing(sid, path, want, gone, policy, report_framing))
        on = tf.where(here, tf.constant(-1, tf.int64), 0)
        return whole.take(on).concatenate(lost.take(-1 - on))

    # deterministic=True: the record order must not depend on thread timing,
    # since the sample index (and so the seed) comes from the position.
    if cycle == 1:
        return ids.interleave(one_file, cycle_length=1, block_length=1)
    return ids.interleave(one_file, cycle_length=cycle, block_length=1,
                          num_parallel_calls=parallel or cycle, deterministic=True)


def _missing(shard_id: tf.Tensor, path: tf.Tensor, want: tf.Tensor, message: tf.Tensor,
             policy: str, report_framing: Callable[..., tf.Tensor]) -> tf.data.Dataset:
    """A shard missing at build time: one report line per pass, its manifest count
    in `skipped_counts()` and `framing_losses()` (offset -1), no records."""
    fields = tf.stack([tf.constant(-1, tf.int64), want, want, tf.constant(0, tf.int64),
                       tf.constant(0, tf.int64), tf.constant(0, tf.int64),
                       tf.maximum(want, 0)])
    reported = report_framing(path, tf.constant(True), message, fields, policy)
    with tf.control_dependencies([reported]):
        empty = tf.zeros([0], tf.int64) + tf.cast(shard_id, tf.int64) * 0
    return tf.data.Dataset.from_tensor_slices(
        (tf.cast(empty, tf.int32), empty, tf.zeros([0], tf.string)))


def _take(table: tf.lookup.experimental.MutableHashTable, key: tf.Tensor) -> tf.Tensor:
    """`table[key]`, then forgotten (one entry per shard read would pile up)."""
    value = table.lookup(key)
    with tf.control_dependencies([value]):
        removed = table.remove(tf.reshape(key, [1]))
    with tf.control_dependencies([removed]):
        return tf.identity(value)


def _after_damage(shard_id: tf.Tensor, path: tf.Tensor, want: tf.Tensor, stopped: tf.Tensor,
                  compression: str | None, resync: bool, policy: str,
                  report_framing: Callable[..., tf.Tensor],
                  note: tf.Tensor | str = "") -> tf.data.Dataset:
    """What follows a shard's fast read: nothing when it read the whole file and
    the records the manifest lists; else the report and, when `resync`, the
    intact records after the damage. A clean read of another count than the
    manifest's is reported too, with `note` (what that means: `_shard_notes`)."""
    n_read, offset = stopped[0], stopped[1]
    empty = tf.zeros([0], tf.int64)
    if resync:
        from tfpipe.native.tfrecord import walk

        w = walk(path, offset, n_read)
        starts, counts, first = w.segment_starts, w.segment_counts, w.segment_indices
        damaged = tf.size(w.finding_offsets) > 0
        ranges = tf.size(w.finding_offsets, out_type=tf.int64)
        known_lost = tf.reduce_sum(tf.maximum(w.finding_records_lost, 0))
        unknown = tf.reduce_any(w.finding_records_lost < 0)
        kind = tf.cond(damaged, lambda: w.finding_kinds[0], lambda: tf.constant(""))
    else:
        starts, counts, first = empty, empty, empty
        if compression:  # offsets in a GZIP stream cannot be probed: trust the manifest
            damaged = tf.logical_and(want >= 0, n_read < want)
        else:
            # is there a byte where the reader stopped? (the file is longer than what it read)
            probe = tf.data.FixedLengthRecordDataset(path, record_bytes=1, header_bytes=offset)
            damaged = probe.take(1).reduce(tf.constant(False), lambda _, b: tf.constant(True))
        ranges = tf.cast(damaged, tf.int64)
        known_lost = tf.constant(0, tf.int64)
        unknown = tf.constant(True)
        kind = tf.constant("framing damage (resynchronising needs the native library)"
                           if not compression else "GZIP stream or framing damage")
    recovered = tf.reduce_sum(counts)
    delivered = n_read + recovered
    lost = tf.where(want >= 0, tf.maximum(want - delivered, 0),
                    tf.where(unknown, tf.constant(-1, tf.int64), known_lost))
    lost_text = tf.where(
        want >= 0,
        tf.strings.join([tf.strings.as_string(lost), " of the ", tf.strings.as_string(want),
                         " records the manifest lists were lost"]),
        tf.where(unknown, tf.strings.join(["an unknown number of records lost (no manifest;"
                                           " at least ", tf.strings.as_string(known_lost), ")"]),
                 tf.strings.join([tf.strings.as_string(known_lost), " records lost"])))
    message = tf.strings.join([
        "tfpipe: framing damage in shard ", path, " at byte ", tf.strings.as_string(offset),
        " (", kind, tf.where(n_read > 0, tf.strings.join(
            [", after record ", tf.strings.as_string(n_read - 1)]), ", at its first record"),
        "): ",
        tf.strings.as_string(n_read), " records read before it, ",
        tf.strings.as_string(recovered),
        " intact after it (read, resynchronised)" if policy == "skip" and resync
        else " read after it", ", ", lost_text,
        f" (pipeline.on_error={policy}). Run `tfpipe verify ",
        tf.strings.regex_replace(path, "/[^/]*$", ""),
        " --salvage OUT` for a complete dataset of every readable record."])
    # skipped_counts() gets the records lost; "unknown" (no manifest, garbage
    # skipped) counts as the known losses, at least the one damaged frame
    counted = tf.where(lost >= 0, lost, tf.maximum(known_lost, 1))
    # no framing damage, but not the manifest's count (edited manifest, a shard cut
    # between two records or rewritten): said precisely, never silently short
    miscounted = tf.logical_and(tf.logical_not(damaged),
                                tf.logical_and(want >= 0, delivered != want))
    message = tf.where(miscounted, tf.strings.join([
        "tfpipe: shard ", path, ": the manifest lists ", tf.strings.as_string(want),
        " records, the shard holds ", tf.strings.as_string(delivered),
        " intact records and ends cleanly: ", note, f" (pipeline.on_error={policy})."]),
        message)
    message = tf.reshape(message, [])  # a scalar: tf.print writes it without quotes
    fields = tf.stack([offset, lost, want, delivered, recovered, ranges, counted])
    reported = report_framing(path, tf.logical_or(damaged, miscounted), message, fields,
                              policy)
    with tf.control_dependencies([reported]):
        starts = tf.identity(starts)

    def run(start: tf.Tensor, count: tf.Tensor, index0: tf.Tensor) -> tf.data.Dataset:
        # TFRecordDatasetV2's byte_offsets has no Python wrapper: build it raw
        variant = tf.raw_ops.TFRecordDatasetV2(
            filenames=tf.reshape(path, [1]), compression_type="",
            buffer_size=tf.constant(256 << 10, tf.int64), byte_offsets=tf.reshape(start, [1]))
        records = tf.data.experimental.from_variant(
            variant, tf.TensorSpec([], tf.string)).take(count)
        return records.enumerate(index0).map(lambda i, r: (shard_id, i, r))

    return tf.data.Dataset.from_tensor_slices((starts, counts, first)).flat_map(run)


# Records per block in read_serialized's tolerant path: the shard's stateful
# (records, bytes) count runs once per block; with 512 (vs read_records' 64 and
# per-record triples) that path read ~1.6x read_records' rows/s in a side run.
SERIALIZED_BLOCK = 512


KEY_SHIFT = 1 << 40  # read_serialized(keyed=True): key = shard id * 2**40 + record index


def read_serialized(files: list[str], compression: str | None, cycle: int,
                    skip_framing: bool = True, expected: dict[str, int] | None = None,
                    parallel: int = 0, block: int = SERIALIZED_BLOCK,
                    keyed: bool = False) -> tf.data.Dataset:
    """`read_records` for consumers that need only the serialized records (the
    tabular pipeline): the same records in the same order and the same
    framing-damage contract, at a cost per record close to the stock reader's.

    Small, many records pay for read_records' per-record work (enumerate,
    `ignore_errors`, the (shard, index) triple). So each uncompressed shard is
    first walked once with the native library (C++, CRC-checked, remembered per
    path, size and mtime: `_intact`); an intact shard holding the records the
    manifest lists is then read by the stock `TFRecordDataset` alone, and only
    a damaged one (or any shard, when compressed or without the native library)
    takes the tolerant reader: `ignore_errors`, its (records, bytes) counted
    once per `block` records, then read_records' report and resynchronised rest.
    An intact shard's stock read absorbs TF's `DataLossError` and the shard is
    walked again when its read ends (C++, ~0.2 CPU-us per record): a shard
    damaged after the build-time walk is then reported and resynchronised as
    the tolerant reader would (`_damaged_since_walk`), never silently short.

    `keyed`: elements are `(key, serialized)`, key = shard id * KEY_SHIFT +
    record index in the shard (what names a record that fails later; ~1.4
    CPU-us per record through a shuffle). `parallel`: 1 reads the open shards
    in line (no reader threads; the same order): page-cached small records
    cost ~1.4 CPU-us each that way vs ~3 through the parallel interleave.
    """
    from tfpipe.pipeline._errors import new_iteration, report_framing

    cycle, expected, policy, resync = _reader_setup(files, compression, cycle, skip_framing,
                                                    expected)
    wants = [int(expected.get(f, -1)) for f in files]
    _, _, miscount = _shard_notes(files)
    intact = [resync and _intact(f, w, *_stamp(f)) for f, w in zip(files, wants)]
    ids = tf.data.Dataset.from_tensor_slices(
        (tf.range(len(files), dtype=tf.int32), tf.constant(files),
         tf.constant(wants, tf.int64), tf.constant(intact), tf.constant(miscount)))
    with tf.init_scope():  # shard id -> [records, bytes] the fast reader delivered
        stopped = tf.lookup.experimental.MutableHashTable(
            key_dtype=tf.int64, value_dtype=tf.int64,
            default_value=tf.constant([0, 0], tf.int64))

    @tf.autograph.experimental.do_not_convert  # as read_records' one_file
    def one_file(shard_id: tf.Tensor, path: tf.Tensor, want: tf.Tensor, ok: tf.Tensor,
                 note: tf.Tensor) -> tf.data.Dataset:
        base = tf.cast(shard_id, tf.int64) * KEY_SHIFT

        def out(ds: tf.data.Dataset) -> tf.data.Dataset:
            """records in shard order (index 0, 1, ...) as this reader's elements"""
            if not keyed:
                return ds
            return tf.data.Dataset.zip((tf.data.Dataset.range(base, base + KEY_SHIFT), ds))

        def rest_out(ds: tf.data.Dataset) -> tf.data.Dataset:
            """_after_damage's (shard, index, record) as this reader's elements"""
            return ds.map(lambda s, i, r: (base + i, r) if keyed else r)

        fast = tf.data.TFRecordDataset(path, compression_type=compression or "")
        # Intact at build time, but it may be damaged by the time it is read:
        # the stock reader's DataLossError is absorbed and the shard walked again
        # once its read ends (C++, page-cached), and only a walk that finds
        # damage reports it and resynchronises (_damaged_since_walk)
        checked = out(fast.ignore_errors()).concatenate(
            tf.data.Dataset.from_tensors(shard_id).flat_map(
                lambda sid: rest_out(_damaged_since_walk(sid, path, want, compression, policy,
                                                         report_framing, note))))
        if all(intact):
            return checked
        key = new_iteration()  # this read of this shard (read_records' `stopped`)

        @tf.autograph.experimental.do_not_convert
        def reset(k: tf.Tensor) -> tf.Tensor:
            # before the shard's first block (also after an abandoned iteration)
            with tf.control_dependencies([stopped.insert(k, tf.zeros([2], tf.int64))]):
                return tf.identity(k)

        @tf.autograph.experimental.do_not_convert
        def count(*elem: tf.Tensor) -> Any:
            records = elem[-1]
            size = tf.reduce_sum(tf.cast(tf.strings.length(records), tf.int64) + 16)
            add = tf.stack([tf.size(records, out_type=tf.int64), size])
            with tf.control_dependencies([stopped.insert(key, stopped.lookup(key) + add)]):
                done = tuple(tf.identity(e) for e in elem)
            return done if keyed else done[0]

        nothing = (tf.constant(0, tf.int64), tf.constant(b"")) if keyed else tf.constant(b"")
        start = tf.data.Dataset.from_tensors(key).map(reset).flat_map(
            lambda _: tf.data.Dataset.from_tensors(nothing).take(0))
        head = out(fast.ignore_errors(log_warning=True)).batch(block).map(count).unbatch()
        rest = tf.data.Dataset.from_tensors(shard_id).flat_map(
            lambda sid: rest_out(_after_damage(sid, path, want, _take(stopped, key), compression,
                                               resync, policy, report_framing, note)))
        tolerant = start.concatenate(head).concatenate(rest)
        if not any(intact):
            return tolerant
        # one of the two, by the shard's walk: take(0) never pulls from its input
        on = tf.where(ok, tf.constant(-1, tf.int64), 0)
        return checked.take(on).concatenate(tolerant.take(-1 - on))

    # deterministic, block_length 1: read_records' order exactly
    if cycle == 1 or parallel == 1:
        return ids.interleave(one_file, cycle_length=cycle, block_length=1)
    return ids.interleave(one_file, cycle_length=cycle, block_length=1,
                          num_parallel_calls=parallel or cycle, deterministic=True)


def _damaged_since_walk(shard_id: tf.Tensor, path: tf.Tensor, want: tf.Tensor,
                        compression: str | None, policy: str,
                        report_framing: Callable[..., tf.Tensor], note: tf.Tensor
                        ) -> tf.data.Dataset:
    """After the stock read of a shard the build-time walk found intact: nothing
    when a fresh walk finds no damage; else what the stock reader delivered is
    the records before the first damaged frame (it stops there), and the report
    and resynchronised rest are read_records' (`_after_damage`: (shard, index,
    record) elements)."""
    from tfpipe.native.tfrecord import walk

    w = walk(path, 0, 0)
    damaged = tf.size(w.finding_offsets) > 0
    offset = tf.cond(damaged, lambda: w.finding_offsets[0], lambda: tf.constant(0, tf.int64))
    before = tf.reduce_sum(tf.where(w.segment_starts < offset, w.segment_counts, 0))
    # the report and the rest only for a damaged shard: take(0) never opens its input
    rest = tf.data.Dataset.from_tensors(tf.stack([before, offset])).flat_map(
        lambda stopped: _after_damage(shard_id, path, want, stopped, compression, True, policy,
                                      report_framing, note))
    return rest.take(tf.where(damaged, tf.constant(-1, tf.int64), 0))


@functools.lru_cache(maxsize=4096)
def _intact(path: str, want: int, size: int, mtime: int) -> bool:
    """No framing damage in the uncompressed shard `path` (native walk) and, when
    the manifest lists `want` >= 0 records, exactly that many in it."""
    from tfpipe.native.tfrecord import walk

    with tf.init_scope():  # eager even when called while a function is traced
        w = walk(path, 0, 0)
        records = int(tf.reduce_sum(w.segment_counts))
        return int(tf.size(w.finding_offsets)) == 0 and (want < 0 or records == want)
