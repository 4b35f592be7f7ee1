"""CSV and Parquet tables: one record per row, columns keep their names.

Values are stored by the rules of `_table_normalize` (integers int64, floats
float32 with the narrowing reported or float64 kept exactly, timestamps int64
epoch, strings bytes, nulls inside lists per `list_nulls`): every batch the
converter reads goes through `normalize_batch` first, and the rows are encoded
from the normalized batch. A column that holds nulls becomes a var-length
feature (a null is an empty list) so no readable value is invented; the image
and label columns are required instead: a null there makes a bad row.

The table may be a URL of a filesystem TensorFlow knows (gs://, ram://): it is
read through `tf.io.gfile` as a seekable file, Parquet row group by row group.

The table is streamed, never held whole (docs/convert.md "Tables"): one pass in
batches finds the schema's nulls, the labels and each row's size (vectorized in
Arrow, the sizes spilled to a file); the plan streams over those (`TableRows.
plan_shards`) into a file of row indices per shard; a shard reads only its rows,
row group by row group (Parquet) or batch by batch from a temporary Arrow IPC
copy written during that pass (CSV, which has no random access), and encodes
them column by column (`tfpipe.records.ColumnarEncoder`). Peak memory is about
one shard's rows, not the table; the records, manifest and statistics are
byte-identical to reading the whole table at once
(tests/convert/test_table_streaming.py).
"""

from __future__ import annotations

import io
import math
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tfpipe.convert._plan import RECORD_OVERHEAD_BYTES, Item, Plan, ShardPlan, unit_hash
from tfpipe.convert._table_normalize import (NormalizePlan, NormalizeReport,
                                             check_integer_text, make_plan, normalize_batch,
                                             whole)
from tfpipe.convert._source import (IMAGE_KEYS, Enumeration, Source, file_size,
                                    image_values, read_image)
from tfpipe.records import FeatureSpec, Schema, classification_schema
from tfpipe.errors import InputError


# Rows per streamed batch and per plan-hashing chunk: a few MB of Arrow at a time.
BATCH_ROWS = 65_536
# Bytes per CSV block: pyarrow's default, so the streaming reader infers types from
# the same first block as pyarrow.csv.read_csv (tests shrink it).
CSV_BLOCK_BYTES = 1 << 20
# Bytes of Parquet read per column at a time (pyarrow's buffered stream).
PARQUET_BUFFER_BYTES = 1 << 20


def _unreadable(path: Path, fmt: str, exc: Exception) -> InputError:
    return InputError(f"{path}: cannot read as {fmt}: {exc}")


def is_url(path: str | os.PathLike[str]) -> bool:
    return "://" in os.fspath(path)


class _GFileReader(io.RawIOBase):
    """A seekable binary file over tf.io.gfile (TF's GFile lacks what pyarrow checks,
    e.g. `closed`): pyarrow reads only the ranges it needs through it."""

    def __init__(self, path: str) -> None:
        import tensorflow as tf

        super().__init__()
        self._f = tf.io.gfile.GFile(path, "rb")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._f.read(size)

    def readinto(self, buffer: Any) -> int:
        data = self._f.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        self._f.seek(offset, whence)
        return self._f.tell()

    def tell(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        if not self.closed:
            self._f.close()
        super().close()


def _open(path: str) -> Any:
    """What pyarrow reads: a local path, or a seekable file over tf.io.gfile for a URL
    (pyarrow then reads only the ranges it needs: Parquet footers and row groups)."""
    if not is_url(path):
        return path
    import pyarrow as pa

    return pa.PythonFile(_GFileReader(path), mode="r")


def _csv_reader(path: str | Path, schema: Any = None) -> Any:
    import pyarrow.csv as pacsv

    convert = (None if schema is None
               else pacsv.ConvertOptions(column_types={f.name: f.type for f in schema}))
    return pacsv.open_csv(_open(os.fspath(path)),
                          read_options=pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES),
                          convert_options=convert)


def _parquet(path: str) -> Any:
    import pyarrow.parquet as pq

    source = _open(path)
    # A local file without pre-buffering: with it pyarrow keeps the column chunks of
    # every row group read so far (~50 B/row on a Criteo-shaped table), so memory grew
    # with rows; a 1 MiB read buffer per column reads as fast and holds one row
    # group's pages. A URL keeps pyarrow's coalesced range reads (latency).
    pf = (pq.ParquetFile(source) if is_url(path) else
          pq.ParquetFile(source, pre_buffer=False, buffer_size=PARQUET_BUFFER_BYTES))
    pf._tfpipe_source = source  # a URL's file object lives as long as the reader
    return pf


def _csv_schema(path: str | Path) -> Any:
    """The column types pyarrow.csv.read_csv gives, one column in memory at a time.

    The streaming reader fixes the types from the first block; read_csv widens
    a column when a later block needs it (int -> float -> string). Only then is
    this slower path taken, so the types, and the output, stay read_csv's.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = _csv_reader(path).schema.names
    fields = []
    for name in names:
        column = pacsv.read_csv(_open(os.fspath(path)), convert_options=pacsv.ConvertOptions(
            include_columns=[name]))
        fields.append(column.schema.field(0))
    return pa.schema(fields)


def _approx_sizes(arr: Any, top: bool = True) -> np.ndarray:
    """Per-row `_approx_size` of an Arrow array, vectorized: the bytes of strings and
    binary (characters for text), 8 for any other value, lists summed; a null is 0
    at the top (not counted) and 8 inside a list (as `_approx_size(None)`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    t = arr.type
    n = len(arr)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        base = pc.fill_null(pc.utf8_length(arr), 0).to_numpy(zero_copy_only=False)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        base = pc.fill_null(pc.binary_length(arr), 0).to_numpy(zero_copy_only=False)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        parents = pc.list_parent_indices(arr).to_numpy(zero_copy_only=False)
        inner = _approx_sizes(pc.list_flatten(arr), top=False)
        base = np.bincount(parents, weights=inner, minlength=n)
    else:
        base = np.full(n, 8)
    if arr.null_count == 0:
        return base.astype(np.int64)
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return np.where(valid, base, 0 if top else 8).astype(np.int64)


def _as_bytes(value: Any) -> bytes:
    """A raw string/binary cell (image paths) as bytes."""
    return value if isinstance(value, bytes) else str(value).encode()


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def _approx_size(value: Any) -> int:
    if isinstance(value, (bytes, str)):
        return len(value)
    if isinstance(value, (list, tuple)):
        return sum(_approx_size(v) for v in value)
    return 8


class _RowReader:
    """Random access to a table's rows by index, a block at a time (picklable, small).

    Parquet: the row groups of the source file (each streamed in batches).
    CSV: the record batches of the Arrow IPC copy made while scanning.
    Rows come out normalized by `plan` (`normalize_batch`): what every encoder reads.
    """

    def __init__(self, path: str, kind: str, offsets: np.ndarray, columns: list[str],
                 plan: NormalizePlan | None, display: str, image_column: str | None) -> None:
        self.path, self.kind, self.offsets = path, kind, offsets  # offsets: block starts + end
        self.columns, self.plan, self.display = columns, plan, display
        self.image_column = image_column

    def _blocks(self, wanted: dict[int, np.ndarray]) -> Iterator[Any]:
        """Batches holding the rows `wanted[block]` (local indices, sorted), in block order."""
        if self.kind == "ipc":
            import pyarrow as pa

            with pa.OSFile(self.path, "rb") as f:
                reader = pa.ipc.open_file(f)
                for block, local in sorted(wanted.items()):
                    yield reader.get_batch(block).take(local)
            return
        pf = _parquet(self.path)
        for block, local in sorted(wanted.items()):
            start = 0
            for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=[block],
                                         use_threads=False):
                lo, hi = np.searchsorted(local, [start, start + batch.num_rows])
                if hi > lo:
                    yield batch.take(local[lo:hi] - start)
                start += batch.num_rows

    def normalized(self, rows: np.ndarray) -> Iterator[Any]:
        """Normalized batches of `rows` (ascending table row indices), in that order."""
        if len(rows) == 0:
            return
        block_of = np.searchsorted(self.offsets, rows, side="right") - 1
        wanted: dict[int, np.ndarray] = {}  # block -> its rows' local indices, ascending
        for part in np.split(np.arange(len(rows)), np.flatnonzero(np.diff(block_of)) + 1):
            block = int(block_of[part[0]])
            wanted[block] = rows[part] - self.offsets[block]
        for batch in self._blocks(wanted):
            # first_row only names rows in errors, and the scan already raised any
            yield normalize_batch(batch, self.plan)[0]

    def _gathered(self, rows: np.ndarray) -> tuple[Any, np.ndarray]:
        """(Arrow table holding `rows`, position in it of each of `rows`)."""
        import pyarrow as pa

        order = np.argsort(rows, kind="stable")
        ascending = rows[order].astype(np.int64)
        # One shard's rows in Arrow, chunked as read (no combined copy).
        table = pa.Table.from_batches(list(self.normalized(ascending)))
        at = np.empty(len(rows), dtype=np.int64)  # position in `table` of rows[k]
        at[order] = np.arange(len(rows))
        return table, at

    def batches(self, rows: np.ndarray, chunk: int | None = None) -> Iterator[Any]:
        """RecordBatches of `rows` (table row indices), in that order, at most `chunk`
        (default BATCH_ROWS) rows each."""
        if len(rows) == 0:
            return
        chunk = chunk or BATCH_ROWS
        table, at = self._gathered(rows)
        for start in range(0, len(rows), chunk):
            yield from table.take(at[start:start + chunk]).to_batches()

    def items(self, rows: np.ndarray, sizes: np.ndarray) -> Iterator[Item]:
        """The Items of `rows` (table row indices), in that order: what enumerating the
        whole table in memory gave for them (key, size, [index, payload], name)."""
        if len(rows) == 0:
            return
        table, at = self._gathered(rows)
        for start in range(0, len(rows), 4096):
            part = table.take(at[start:start + 4096]).to_pylist()
            indices = rows[start:start + 4096].tolist()
            part_sizes = sizes[start:start + 4096].tolist()
            for index, size, row in zip(indices, part_sizes, part):
                yield self._item(index, size, row)

    def batch_items(self, batch: Any, rows: np.ndarray, sizes: np.ndarray) -> list[Item]:
        """The Items of a batch of these rows (`rows`: their table indices)."""
        return [self._item(index, size, row) for index, size, row in
                zip(rows.tolist(), sizes.tolist(), batch.to_pylist())]

    def all_batches(self, chunk: int) -> Iterator[Any]:
        """The whole table in row order, normalized, `chunk` rows at most per batch."""
        if self.kind == "ipc":
            import pyarrow as pa

            with pa.OSFile(self.path, "rb") as f:
                reader = pa.ipc.open_file(f)
                for i in range(reader.num_record_batches):
                    batch = reader.get_batch(i)
                    for start in range(0, batch.num_rows, chunk):
                        yield normalize_batch(batch.slice(start, chunk), self.plan)[0]
            return
        # Threads: this pass (partitioning, statistics) runs before any worker does.
        for batch in _parquet(self.path).iter_batches(batch_size=chunk, use_threads=True):
            yield normalize_batch(batch, self.plan)[0]

    def _item(self, index: int, size: int, row: dict[str, Any]) -> Item:
        name = f"{self.display} row {index}"
        if self.image_column is not None:
            name = f"{name} ({_text(row[self.image_column])})"
        # The payload is the normalized row (bytes, ints, floats, lists, None): it
        # travels to the worker and hashes into the plan, so --resume notices an
        # edited table.
        return Item(f"row:{index}", size, [index, row], name)


def _digest_batch(batch: Any) -> Any:
    """A normalized batch as the plan digest sees its payloads (`_RowReader._item`:
    the row's Python values): float32 as the float64 Python gives for them, which
    `columnar.json_rows` writes as Python's repr does."""
    import pyarrow as pa

    arrays = []
    for arr in batch.columns:
        t = arr.type
        if pa.types.is_float32(t):
            arr = arr.cast(pa.float64())
        elif pa.types.is_fixed_size_list(t) and pa.types.is_float32(t.value_type):
            arr = arr.cast(pa.list_(pa.float64(), t.list_size))
        elif pa.types.is_list(t) and pa.types.is_float32(t.value_type):
            arr = arr.cast(pa.list_(pa.float64()))
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _payload_batch(items: Sequence[Item], plan: NormalizePlan) -> Any:
    """The rows of Items (normalized rows as payloads, as the Beam runner's plan
    files carry them) back as a normalized batch: the columnar encoder's input."""
    import pyarrow as pa

    from tfpipe.convert._table_normalize import output_schema

    return pa.RecordBatch.from_pylist([item.payload[1] for item in items],
                                      schema=output_schema(plan))


class TableRows(Sequence[Item]):
    """Items of some table rows, in a given order, read only when iterated.

    `rows` are table row indices; `sizes` their estimated encoded bytes. Both the
    enumeration (good rows, table order) and every planned shard (plan order) are
    one of these: a shard pickles to a worker as two small arrays, and its rows are
    read when the worker writes it (or the plan's digest hashes it).
    """

    def __init__(self, reader: _RowReader, rows: np.ndarray, sizes: np.ndarray) -> None:
        self.reader, self.rows, self.sizes = reader, rows, sizes

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Item]:
        return self.reader.items(self.rows, self.sizes)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return TableRows(self.reader, self.rows[index], self.sizes[index])
        i = range(len(self.rows))[index]
        return next(self.reader.items(self.rows[i:i + 1], self.sizes[i:i + 1]))

    def digest_into(self, h: Any) -> None:
        """Feed `h` what `ShardPlan.digest` hashes for these rows (the canonical JSON
        of each Item's key and payload, a line each), built from Arrow a batch at a
        time in C (`tfpipe.records.columnar.json_rows`) where it can be."""
        from tfpipe.convert._plan import canonical_json
        from tfpipe.records import columnar

        for batch, rows, sizes in self.plan_batches():
            stored = _digest_batch(batch)
            # ~1.5 KB of JSON a row: _JSON_ROWS rows at a time keeps the buffer small
            try:
                first = columnar.json_rows(stored.slice(0, _JSON_ROWS), rows[:_JSON_ROWS])
            except TypeError:  # pragma: no cover - normalized batches are always taken
                first = None
            if first is None:
                for item in self.reader.batch_items(batch, rows, sizes):
                    h.update(canonical_json([item.key, item.payload]).encode())
                    h.update(b"\n")
                continue
            h.update(first)
            for lo in range(_JSON_ROWS, len(rows), _JSON_ROWS):
                h.update(columnar.json_rows(stored.slice(lo, _JSON_ROWS),  # type: ignore[arg-type]
                                            rows[lo:lo + _JSON_ROWS]))

    def plan_batches(self) -> Iterator[tuple[Any, np.ndarray, np.ndarray]]:
        """(RecordBatch, row indices, sizes) of these rows, in order, a batch at a time."""
        rows, sizes = self.arrays()
        start = 0
        for batch in self.reader.batches(rows):
            n = batch.num_rows
            yield batch, rows[start:start + n], sizes[start:start + n]
            start += n

    @property
    def total_size(self) -> int:
        return int(self.sizes.sum())

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(row indices, sizes), in order, in memory (one shard's worth)."""
        return self.rows, self.sizes

    def chunks(self, step: int = 1 << 20) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(row indices, sizes) in order, at most `step` rows at a time."""
        rows, sizes = self.arrays()
        for start in range(0, len(rows), step):
            yield (np.asarray(rows[start:start + step], np.int64),
                   np.asarray(sizes[start:start + step], np.int64))

    def plan_shards(self, ratios: dict[str, float], seed: int, shard_size: int) -> Plan:
        """`_plan.plan_shards` over these rows, streaming: the same splits, order and cuts.

        Each row's split and order hash are `unit_hash` of its key, as there; a split
        is ordered by (hash, key text) and cut into `count` contiguous runs. Nothing
        per row stays in memory: a first pass counts each split's rows and bytes and
        a histogram of its order hashes (65536 buckets), which places every cut in a
        bucket; a second pass (reusing the first's hashes) sends each row's index,
        size and order hash to its shard's file (rows of a bucket holding a cut are
        ranked exactly, in memory: ~n/65536 rows per cut). A shard sorts its own rows when read (`_SpilledRows`), from its
        own copy of them (`_PlanFiles.partition`).
        """
        names = list(ratios)
        # the cumulative edges as _plan.assign_split adds them (float by float)
        acc, cum = 0.0, []
        for name in names:
            acc += ratios[name]
            cum.append(acc)
        edges = np.asarray(cum)
        nsplit, nb = len(names), _BUCKETS

        def hashed(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            u = _unit_hashes(seed, "split", rows)
            o = _unit_hashes(seed, "order", rows)
            # u < edge picks the first split whose cumulative edge is above u
            split = np.minimum(np.searchsorted(edges, u, side="right"), nsplit - 1)
            bucket = np.minimum((o * nb).astype(np.int64), nb - 1)
            return split, o, bucket

        counts = np.zeros(nsplit, np.int64)
        totals = np.zeros(nsplit, np.int64)
        hist = np.zeros(nsplit * nb, np.int64)
        # The first pass's hashes (10 bytes a row on disk) serve the second: sha256
        # per row and domain is most of the plan's CPU.
        cache: Any = tempfile.TemporaryFile(prefix="tfpipe-plan-hashes-")
        for rows, sizes in self.chunks():
            split, o, bucket = hashed(rows)
            o.tofile(cache)
            split.astype(np.int16).tofile(cache)
            counts += np.bincount(split, minlength=nsplit)
            for k in range(nsplit):
                totals[k] += int(sizes[split == k].sum())
            hist += np.bincount(split * nb + bucket, minlength=nsplit * nb)
        hist = hist.reshape(nsplit, nb)
        plan = Plan(splits=names)
        files = _PlanFiles()
        cuts: list[np.ndarray] = []  # per split: first rank of shards 1..count-1
        first_gid = np.zeros(nsplit, np.int64)  # global shard id of each split's shard 0
        shard_of_bucket = np.zeros((nsplit, nb), np.int64)
        exact = np.zeros((nsplit, nb), dtype=bool)  # buckets holding a cut
        starts = np.cumsum(hist, axis=1) - hist  # first rank in each bucket
        gid = 0
        for k, split_name in enumerate(names):
            n = int(counts[k])
            count = (min(n, max(1, math.ceil((int(totals[k]) + RECORD_OVERHEAD_BYTES * n)
                                              / shard_size))) if n else 0)
            cut = np.asarray([j * n // count for j in range(1, count)], np.int64)
            cuts.append(cut)
            first_gid[k] = gid
            shard_of_bucket[k] = np.searchsorted(cut, starts[k], side="right")
            inside = np.searchsorted(np.cumsum(hist[k]), cut, side="right")  # bucket of rank
            for b, r in zip(inside.tolist(), cut.tolist()):
                if r != starts[k, b]:
                    exact[k, b] = True
            for j in range(count):
                lo, hi = j * n // count, (j + 1) * n // count
                rows_of_shard = _SpilledRows(self.reader, files, gid + j, hi - lo, seed)
                plan.shards.append(ShardPlan(split_name, j, count,
                                             rows_of_shard))  # type: ignore[arg-type]
            gid += count
        held: list[tuple[np.ndarray, ...]] = []  # rows of the buckets holding a cut
        cache.seek(0)
        for rows, sizes in self.chunks():
            o = np.fromfile(cache, np.float64, len(rows))
            split = np.fromfile(cache, np.int16, len(rows)).astype(np.int64)
            bucket = np.minimum((o * nb).astype(np.int64), nb - 1)
            near = exact[split, bucket]
            if near.any():
                held.append((split[near], o[near], bucket[near], rows[near], sizes[near]))
            far = ~near
            gids = first_gid[split[far]] + shard_of_bucket[split[far], bucket[far]]
            files.append(gids, rows[far], sizes[far], o[far])
            files.note_rows(rows[far], gids)
        cache.close()
        if held:
            split, o, bucket, rows, sizes = (np.concatenate(p) for p in zip(*held))
            for k in range(nsplit):
                mine = np.flatnonzero(split == k)
                if len(mine) == 0:
                    continue
                members = mine[np.argsort(o[mine], kind="stable")]
                _break_ties(members, o, rows)
                b = bucket[members]
                # rank = the bucket's first rank + the position inside the bucket
                first = np.searchsorted(b, b, side="left")
                rank = starts[k, b] + (np.arange(len(members)) - first)
                shard = np.searchsorted(cuts[k], rank, side="right")
                files.append(first_gid[k] + shard, rows[members], sizes[members], o[members])
                files.note_rows(rows[members], first_gid[k] + shard)
        files.close_rows(int(self.reader.offsets[-1]))
        return plan


def _bits_as_float64(batch: Any, names: set[str]) -> Any:
    """`batch` with the int64 columns `names` (float64 bit patterns) as float64."""
    import pyarrow as pa

    arrays = []
    for field, arr in zip(batch.schema, batch.columns):
        if field.name in names and arr.type == pa.int64():
            arr = pa.Array.from_buffers(pa.float64(), len(arr), arr.buffers(),
                                        null_count=arr.null_count, offset=arr.offset)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


_BUCKETS = 1 << 16
_JSON_ROWS = 8192


def _unit_hashes(seed: int, domain: str, rows: np.ndarray) -> np.ndarray:
    """`unit_hash(seed, domain, f"row:{i}")` of each row index (C when built)."""
    from tfpipe.records import columnar

    out = columnar.unit_hashes(f"{seed}:{domain}:row:", rows)
    if out is None:
        out = np.fromiter((unit_hash(seed, domain, f"row:{i}") for i in rows.tolist()),
                          np.float64, len(rows))
    return out


class _PlanFiles:
    """Each planned shard's row indices and sizes, appended to a file per shard, in a
    temporary directory removed when the plan (every shard holding this) is gone.

    Before the first shard is read, one pass over the table copies each shard's rows
    (Arrow IPC, in table order) into the shard's own file (`partition`): a shard's
    rows are spread over the whole table by the seeded order, so reading them from
    the table would read every row group once per shard (twice: digest and write).
    The copy needs about the table's Arrow size on disk, under `$TMPDIR`.
    """

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="tfpipe-plan-")
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.dir, True)
        self._gid_file: Any = open(os.path.join(self.dir, "gid.i32"), "w+b")
        # Told every batch the partitioning pass reads (`batch(normalized, gid)`, table
        # order, BATCH_ROWS rows) and `end(ok)`: statistics ride on that pass instead
        # of reading the table once more (`_table_stats.StreamedStatistics`).
        self.watchers: list[Any] = []

    def __getstate__(self) -> dict[str, Any]:
        return {"dir": self.dir}  # workers read the files; only the planner removes them

    def note_rows(self, rows: np.ndarray, gids: np.ndarray) -> None:
        """Record the shard of these rows (gid + 1 per table row; 0: not planned)."""
        if len(rows) == 0:
            return
        order = np.argsort(rows, kind="stable")
        rows, gids = rows[order], gids[order]
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        if hi - lo <= 4 * len(rows):  # a dense run: read, fill in, write back
            fd = self._gid_file.fileno()
            part = np.zeros(hi - lo, np.int32)
            old = np.frombuffer(os.pread(fd, 4 * (hi - lo), 4 * lo), np.int32)
            part[:len(old)] = old
            part[rows - lo] = gids + 1
            os.pwrite(self._gid_file.fileno(), part.tobytes(), 4 * lo)
            return
        for r, g in zip(rows.tolist(), (gids + 1).astype(np.int32).tolist()):
            os.pwrite(self._gid_file.fileno(), np.int32(g).tobytes(), 4 * r)

    def close_rows(self, num_rows: int) -> None:
        self._gid_file.truncate(4 * num_rows)
        self._gid_file.close()

    def _shard_path(self, gid: int) -> str:
        return os.path.join(self.dir, f"{gid}.arrows")

    def partition(self, reader: _RowReader) -> None:
        """Copy every shard's rows out of the table, once (any process, any thread)."""
        import fcntl
        import pyarrow as pa

        done = os.path.join(self.dir, "partitioned")
        if os.path.exists(done):
            return
        ran = ok = False
        watchers = list(getattr(self, "watchers", ()))  # a worker's copy has none
        with _PARTITION_LOCK, open(os.path.join(self.dir, ".lock"), "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if os.path.exists(done):
                    return
                start, ran = 0, True
                with open(os.path.join(self.dir, "gid.i32"), "rb") as g:
                    # BATCH_ROWS: the batches statistics read (and a few MB at a time)
                    for batch in reader.all_batches(BATCH_ROWS):
                        n = batch.num_rows
                        gid = np.fromfile(g, np.int32, n).astype(np.int64) - 1
                        for watcher in watchers:
                            watcher.batch(batch, gid)
                        # plain arrays: each copy holds rows of many batches
                        batch = pa.RecordBatch.from_arrays(
                            [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c
                             for c in batch.columns], names=batch.schema.names)
                        batch = batch.append_column(
                            _ROW, pa.array(np.arange(start, start + n, dtype=np.int64)))
                        order = np.argsort(gid, kind="stable")
                        gid = gid[order]
                        grouped = batch.take(order)  # one gather; each shard a slice
                        bounds = np.flatnonzero(np.diff(gid)) + 1
                        for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), n]):
                            if gid[lo] < 0:
                                continue  # a bad row: in no shard
                            sink = pa.BufferOutputStream()
                            with pa.ipc.new_stream(sink, batch.schema) as w:
                                w.write_batch(grouped.slice(lo, hi - lo))
                            data = sink.getvalue()
                            with open(self._shard_path(int(gid[lo])), "ab") as f:
                                f.write(data)
                            with open(self._shard_path(int(gid[lo])) + ".len", "ab") as f:
                                f.write(np.int64(data.size).tobytes())
                        start += n
                open(done, "wb").close()
                ok = True
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
                for watcher in watchers if ran else ():
                    watcher.end(ok)  # only the pass that read the table tells

    def shard_table(self, gid: int) -> Any:
        """The rows of shard `gid` (with their index in column `_ROW`), table order."""
        import pyarrow as pa

        path = self._shard_path(gid)
        if not os.path.exists(path):
            return None
        lengths = np.fromfile(path + ".len", np.int64)
        with pa.memory_map(path) as source:
            buf = source.read_buffer()
        tables, pos = [], 0
        for length in lengths.tolist():
            tables.append(pa.ipc.open_stream(buf.slice(pos, length)).read_all())
            pos += length
        return pa.concat_tables(tables)

    def ordered_path(self, gid: int) -> str:
        """Shard `gid`'s rows in plan order (Arrow IPC file), once a reader sorted them."""
        return os.path.join(self.dir, f"{gid}.ordered.arrow")

    def drop_partitioned(self, gid: int) -> None:
        for path in (self._shard_path(gid), self._shard_path(gid) + ".len"):
            try:
                os.remove(path)
            except FileNotFoundError:
                pass

    def path(self, gid: int) -> str:
        return os.path.join(self.dir, f"{gid}.i64")

    def append(self, gid: np.ndarray, rows: np.ndarray, sizes: np.ndarray,
               order_hash: np.ndarray) -> None:
        """Append (row, size, order hash) to the files of shards `gid`, keeping their order."""
        if len(gid) == 0:
            return
        order = np.argsort(gid, kind="stable")
        bits = np.ascontiguousarray(order_hash[order], np.float64).view(np.int64)
        gid, pairs = gid[order], np.stack([rows[order], sizes[order], bits],
                                          axis=1).astype(np.int64)
        bounds = np.flatnonzero(np.diff(gid)) + 1
        for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(gid)]):
            with open(self.path(int(gid[lo])), "ab") as f:
                pairs[lo:hi].tofile(f)

    def load(self, gid: int) -> tuple[np.ndarray, np.ndarray]:
        rows, sizes, _ = self.load_hashed(gid)
        return rows, sizes

    def load_hashed(self, gid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row indices, sizes, order hashes) of shard `gid`, as planned (unsorted)."""
        path = self.path(gid)
        triples = (np.fromfile(path, np.int64).reshape(-1, 3) if os.path.exists(path)
                   else np.zeros((0, 3), np.int64))
        return (triples[:, 0], triples[:, 1],
                np.ascontiguousarray(triples[:, 2]).view(np.float64))


class _SpilledRows(TableRows):
    """One planned shard's rows: their indices and sizes wait in a file (a few bytes
    per row on disk) and are sorted into plan order when read."""

    def __init__(self, reader: _RowReader, files: _PlanFiles, gid: int, count: int,
                 seed: int) -> None:
        self.reader, self._files, self._gid, self._count, self._seed = (reader, files, gid,
                                                                         count, seed)

    def __len__(self) -> int:
        return self._count

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        rows, sizes, o = self._files.load_hashed(self._gid)
        if len(rows) != self._count:  # pragma: no cover - a removed or damaged plan file
            raise InputError(f"the plan file {self._files.path(self._gid)} holds {len(rows)} "
                             f"rows, not {self._count}; rerun the conversion")
        members = np.argsort(o, kind="stable")
        _break_ties(members, o, rows)
        return rows[members], sizes[members]

    @property  # type: ignore[override]
    def rows(self) -> np.ndarray:
        return self.arrays()[0]

    @property  # type: ignore[override]
    def sizes(self) -> np.ndarray:
        return self.arrays()[1]

    def row_set(self) -> np.ndarray:
        """The shard's row indices in no particular order (no hashing, no sort)."""
        return self._files.load(self._gid)[0]

    def plan_batches(self) -> Iterator[tuple[Any, np.ndarray, np.ndarray]]:
        """From the shard's own copy of its rows, in plan order: the first reader (the
        plan digest) sorts the partitioned copy (`_PlanFiles.partition`) into it once,
        so the shard's writer reads it straight through (no second sort and gather)."""
        import pyarrow as pa

        path = self._files.ordered_path(self._gid)
        if not os.path.exists(path):
            self._write_ordered(path)
        # Read, not memory-mapped: a mapping keeps every page read in the process's
        # RSS until it closes; this holds one batch at a time.
        with pa.OSFile(path, "rb") as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                batch = reader.get_batch(i)
                n = batch.num_columns - 2  # the rows' index and size come last
                rows = batch.column(n).to_numpy()
                sizes = batch.column(n + 1).to_numpy()
                yield (pa.RecordBatch.from_arrays(batch.columns[:n],
                                                  names=batch.schema.names[:n]), rows, sizes)

    def release(self) -> None:
        """Remove the shard's ordered copy (its shard is written; nothing reads it
        again), so the copies' disk is freed shard by shard, not at the end."""
        try:
            os.remove(self._files.ordered_path(self._gid))
        except FileNotFoundError:
            pass

    def _write_ordered(self, path: str) -> None:
        import pyarrow as pa

        self._files.partition(self.reader)
        table = self._files.shard_table(self._gid)
        rows_f, sizes_f, o_f = self._files.load_hashed(self._gid)
        if table is None or table.num_rows != self._count:  # pragma: no cover - damaged
            raise InputError(f"the plan files in {self._files.dir} do not hold the "
                             f"{self._count} rows of a shard; rerun the conversion")
        rows = table.column(_ROW).to_numpy()
        # the copy holds the rows in table order: find each one's planned entry
        by_row = np.argsort(rows_f, kind="stable")
        at = by_row[np.searchsorted(rows_f[by_row], rows)]
        o = o_f[at]
        members = np.argsort(o, kind="stable")
        _break_ties(members, o, rows)
        rows = rows[members]
        sizes = sizes_f[at[members]]
        table = table.drop_columns([_ROW])
        schema = table.schema.append(pa.field(_ROW, pa.int64())).append(
            pa.field(_SIZE, pa.int64()))
        temp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
        with pa.OSFile(temp, "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            for lo in range(0, len(rows), BATCH_ROWS):
                part = table.take(members[lo:lo + BATCH_ROWS]).combine_chunks()
                columns = [c.chunk(0) if c.num_chunks else pa.array([], c.type)
                           for c in part.columns]
                writer.write_batch(pa.RecordBatch.from_arrays(
                    [*columns, pa.array(rows[lo:lo + BATCH_ROWS]),
                     pa.array(sizes[lo:lo + BATCH_ROWS].astype(np.int64))], schema=schema))
        os.replace(temp, path)
        self._files.drop_partitioned(self._gid)  # the ordered copy replaces it (disk)

    def __iter__(self) -> Iterator[Item]:
        for batch, rows, sizes in self.plan_batches():
            yield from self.reader.batch_items(batch, rows, sizes)

    def __getitem__(self, index: Any) -> Any:
        rows, sizes = self.arrays()
        return TableRows(self.reader, rows, sizes)[index]


_ROW = "__tfpipe_row__"
_SIZE = "__tfpipe_size__"
_PARTITION_LOCK = threading.Lock()  # the digest threads share one partitioning pass


class _AllRows(TableRows):
    """Every row of the table but the bad ones, in table order, without an array of
    them: sizes are read from the scan's file a chunk at a time."""

    def __init__(self, reader: _RowReader, num_rows: int, bad: np.ndarray,
                 sizes_path: str) -> None:
        self.reader, self._num_rows, self._bad, self._sizes_path = (reader, num_rows, bad,
                                                                    sizes_path)

    def __len__(self) -> int:
        return self._num_rows - len(self._bad)

    def chunks(self, step: int = 1 << 20) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        with open(self._sizes_path, "rb") as f:
            for start in range(0, self._num_rows, step):
                sizes = np.fromfile(f, np.int64, min(step, self._num_rows - start))
                rows = np.arange(start, start + len(sizes), dtype=np.int64)
                bad = self._bad[(self._bad >= start) & (self._bad < start + len(sizes))]
                if len(bad):
                    keep = np.ones(len(rows), bool)
                    keep[bad - start] = False
                    rows, sizes = rows[keep], sizes[keep]
                yield rows, sizes

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        parts = list(self.chunks())
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return (np.concatenate([r for r, _ in parts]), np.concatenate([z for _, z in parts]))

    @property  # type: ignore[override]
    def rows(self) -> np.ndarray:
        return self.arrays()[0]

    @property  # type: ignore[override]
    def sizes(self) -> np.ndarray:
        return self.arrays()[1]

    @property
    def total_size(self) -> int:
        return int(sum(int(z.sum()) for _, z in self.chunks()))

    def __iter__(self) -> Iterator[Item]:
        for rows, sizes in self.chunks(BATCH_ROWS):
            yield from self.reader.items(rows, sizes)

    def __getitem__(self, index: Any) -> Any:
        rows, sizes = self.arrays()
        return TableRows(self.reader, rows, sizes)[index]


def _compact(values: np.ndarray) -> np.ndarray:
    """int32 when every value fits (row indices, row sizes): the plan costs ~4 bytes
    less per row and field, which is most of its memory on a 20 M-row table."""
    if len(values) == 0 or (values.min() >= -(1 << 31) and values.max() < (1 << 31)):
        return values.astype(np.int32)
    return values


def _break_ties(members: np.ndarray, order_hash: np.ndarray, rows: np.ndarray) -> None:
    """Within runs of equal hashes, order by the key text ('row:10' < 'row:9'), in place."""
    h = order_hash[members]
    same = np.flatnonzero(h[1:] == h[:-1])  # h[i] == h[i + 1]
    k = 0
    while k < len(same):
        start, stop = int(same[k]), int(same[k]) + 2
        k += 1
        while k < len(same) and same[k] == stop - 1:
            stop, k = stop + 1, k + 1
        members[start:stop] = sorted(members[start:stop].tolist(),
                                     key=lambda m: f"row:{rows[m]}")


class TableSource(Source):
    """Rows of a CSV or Parquet file; `image_column` paths are embedded as image/encoded.

    list_nulls, keep_float64 and time_unit are `_table_normalize.make_plan`'s policies.
    """

    def __init__(self, path: str | os.PathLike[str], fmt: str, *,
                 image_column: str | None = None, label_column: str | None = None,
                 list_nulls: str = "drop-element",
                 keep_float64: Sequence[str] | str = (), time_unit: str = "s",
                 rows_per_record: int = 1) -> None:
        from tfpipe.convert._table_pack import check_rows_per_record

        self.kind = fmt
        self.rows_per_record = check_rows_per_record(rows_per_record)  # >1: packed layout
        raw = os.fspath(path)
        self.path = raw.rstrip("/") if is_url(raw) else str(Path(raw).resolve())
        self.display = self.path.rsplit("/", 1)[-1] if is_url(raw) else Path(raw).name
        if is_url(raw) and image_column is not None:
            raise InputError(f"{raw}: --image-column reads image files beside the table, "
                             "which must be local; copy the table and its images to a local "
                             "path (a URL table is converted without images)")
        self.image_column = image_column
        self.label_column = label_column
        self.list_nulls = list_nulls
        self.keep_float64: tuple[str, ...] | str = (
            "all" if keep_float64 == "all" else tuple(sorted(keep_float64)))
        self.time_unit = time_unit
        schema = self._open_schema()
        self.columns: list[str] = list(schema.names)
        self.arrow_schema = schema  # the file's own types (a CSV's as read_csv gives them)
        for role, column in (("image_column", image_column), ("label_column", label_column)):
            if column is not None and column not in self.columns:
                raise InputError(f"{self.display}: {role} {column!r} is not a column; "
                                 f"columns are {', '.join(self.columns)}")
        if image_column is not None:
            clash = sorted(set(self.columns) & set(classification_schema()))
            if clash:
                raise InputError(f"{self.display}: column(s) {', '.join(clash)} clash with "
                                 "the image keys that --image-column adds; rename them")
        self._scan()  # may widen a CSV column's type (see _csv_schema)
        plan = self.plan
        for col in plan.columns:
            if col.name in (image_column, label_column) and col.list is not None:
                raise InputError(f"{self.display}: column {col.name!r} must hold one value "
                                 "per row")
        self._specs: list[FeatureSpec] = []
        self._dtypes: dict[str, str] = {}
        for col in plan.columns:
            kind = "var" if col.list == "var" else "fixed"
            shape = [col.list_size] if col.list == "fixed" else []
            if (self._report.nulls.get(col.name) and col.name not in (image_column, label_column)
                    and kind == "fixed"):
                # A null cannot be a fixed scalar; var-length keeps the row and the
                # absence (an empty list) readable instead of inventing a value.
                kind, shape = "var", []
            self._dtypes[col.name] = col.dtype
            self._specs.append(FeatureSpec(col.name, col.dtype, shape, kind,
                                           encoding=col.encoding))
        self.class_names = self._class_names()
        if self.rows_per_record > 1:
            from tfpipe.convert._table_pack import check_packable

            check_packable(self.display, [c.name for c in plan.columns if c.list is not None],
                           image_column)

    # ------------------------------------------------------------------ the one scan
    def _open_schema(self) -> Any:
        try:
            if self.kind == "csv":
                return _csv_reader(self.path).schema
            return _parquet(self.path).schema_arrow
        except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid/OSError, TF OpError
            raise _unreadable(self.path, self.kind, exc) from None

    def _make_plan(self, schema: Any) -> NormalizePlan:
        return make_plan(schema, list_nulls=self.list_nulls, keep_float64=self.keep_float64,
                         time_unit=self.time_unit, csv=self.kind == "csv",
                         where=self.display)

    def _scan(self) -> None:
        """Stream the table once: every batch normalized (nulls, narrowing, list nulls,
        values that cannot be stored), label values, row sizes, required nulls;
        a CSV is copied to Arrow IPC on the way for random access by batch."""
        import pyarrow as pa

        if self.kind != "csv":
            try:
                self._scan_batches(None)
            except (pa.ArrowInvalid, OSError) as exc:
                raise _unreadable(self.path, self.kind, exc) from None
            return
        try:
            self._scan_batches(None)
        except pa.ArrowInvalid:
            # A later block needs a wider type than the first block gave (or the
            # file is malformed: _csv_schema then raises the reader's own error).
            try:
                self.arrow_schema = _csv_schema(self.path)
                self._scan_batches(self.arrow_schema)
            except (pa.ArrowInvalid, OSError) as exc:
                raise _unreadable(self.path, self.kind, exc) from None
        except OSError as exc:
            raise _unreadable(self.path, self.kind, exc) from None

    def _scan_batches(self, csv_schema: Any) -> None:
        # Per-row sizes (and a CSV's Arrow copy) go to disk, not memory.
        spill_dir = tempfile.mkdtemp(prefix="tfpipe-table-")
        try:
            if self.kind == "csv":
                self._scan_into(iter(_csv_reader(self.path, csv_schema)),
                                os.path.join(spill_dir, "rows.arrow"), spill_dir)
            else:
                self._scan_into(_parquet(self.path).iter_batches(batch_size=BATCH_ROWS,
                                                                 use_threads=True),
                                None, spill_dir)
        except BaseException:
            shutil.rmtree(spill_dir, ignore_errors=True)
            raise
        # The files live as long as the reader does: the source and every planned
        # shard hold it (workers get pickled copies, without this hook).
        self._cleanup = weakref.finalize(self._reader, shutil.rmtree, spill_dir, True)

    def _scan_into(self, batches: Iterator[Any], spill: str | None, spill_dir: str) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        writer = None
        names = self.columns
        plan = self._make_plan(self.arrow_schema)
        report = NormalizeReport()
        sizes_path = os.path.join(spill_dir, "sizes.i64")
        sizes = open(sizes_path, "wb")
        required_null: dict[int, str] = {}  # row -> first null required column
        labels: set[Any] = set()
        label_col = None if self.label_column is None else plan.column(self.label_column)
        # a float label is collected as read: whole floats become int64 class indices
        raw_label = label_col is not None and label_col.dtype == "float32"
        wide_ints: list[str] = []  # CSV float64 columns holding a value beyond int64
        offsets = [0]
        start = 0
        try:
            for batch in batches:
                if spill is not None:
                    if writer is None:
                        writer = pa.ipc.new_file(spill, batch.schema)
                    writer.write_batch(batch)
                    offsets.append(start + batch.num_rows)
                row_size = np.zeros(batch.num_rows, dtype=np.int64)
                for column in batch.columns:
                    row_size += _approx_sizes(column)  # of the values as read (estimates)
                row_size.tofile(sizes)
                if self.kind == "csv":
                    for name, column in zip(names, batch.columns):
                        if column.type == pa.float64() and name not in wide_ints:
                            top = pc.max(pc.abs(column)).as_py()
                            if top is not None and top >= 2.0 ** 63:
                                wide_ints.append(name)
                normalized, part = normalize_batch(batch, plan, first_row=start)
                report.merge(part)
                for name in (self.image_column, self.label_column):
                    if name is None:
                        continue
                    column = normalized.column(names.index(name))
                    if column.null_count:
                        for r in np.flatnonzero(column.is_null().to_numpy(
                                zero_copy_only=False)).tolist():
                            required_null.setdefault(start + r, name)
                if self.label_column is not None:
                    source = batch if raw_label else normalized
                    labels.update(v for v in pc.unique(source.column(
                        names.index(self.label_column))).to_pylist() if v is not None)
                start += batch.num_rows
        finally:
            sizes.close()
            if writer is not None:
                writer.close()
        for name in wide_ints:
            self._check_wide_ints(plan, name)
        if raw_label:
            values = np.asarray(sorted(labels), dtype=np.float64)
            if whole(values):
                plan = plan.with_whole_label(self.label_column)  # type: ignore[arg-type]
                report.narrowed.pop(self.label_column, None)  # type: ignore[arg-type]
                labels = {int(v) for v in values}
        plan = plan.finalize(report)
        if spill is not None:
            if writer is None:  # no rows: an empty copy with the schema
                pa.ipc.new_file(spill, self.arrow_schema).close()
            reader = _RowReader(spill, "ipc", np.asarray(offsets, np.int64), names, plan,
                                self.display, self.image_column)
        else:
            meta = _parquet(self.path).metadata
            groups = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
            reader = _RowReader(self.path, "parquet",
                                np.concatenate([[0], np.cumsum(groups, dtype=np.int64)]),
                                names, plan, self.display, self.image_column)
        self._reader = reader
        self.plan = plan
        self.num_rows = start
        self._report = report
        self._normalized = report.to_json(plan)  # what settings() records
        self._sizes_path = sizes_path  # int64 per row, read a chunk at a time
        self._required_null = required_null
        self._labels = labels

    def _check_wide_ints(self, plan: NormalizePlan, name: str) -> None:
        """A CSV column of integer text with a value beyond int64 (pyarrow read it as
        float64): an error naming the row, never a float column."""
        import pyarrow as pa
        import pyarrow.csv as pacsv

        texts = pacsv.read_csv(_open(self.path), convert_options=pacsv.ConvertOptions(
            include_columns=[name], column_types={name: pa.string()})).column(0)
        check_integer_text(plan, name, texts.combine_chunks())

    def _class_names(self) -> list[str] | None:
        if self.label_column is None:
            return None
        values = self._labels
        dtype = self._dtypes[self.label_column]
        if dtype == "string":
            return sorted(_text(v) for v in values)
        if dtype == "int64" and self.plan.column(self.label_column).encoding is None:
            ints = [int(v) for v in values]
            if ints and min(ints) < 0:
                raise InputError(f"{self.display}: label column {self.label_column!r} "
                                 f"holds negative labels (min {min(ints)})")
            return [str(i) for i in range(max(ints) + 1)] if ints else []
        raise InputError(f"{self.display}: label column {self.label_column!r} must hold "
                         "integers, whole non-negative floats or strings")

    def _name(self, index: int) -> str:
        return f"{self.display} row {index}"

    def enumerate(self) -> Enumeration:
        out = Enumeration()
        bad: dict[int, tuple[Item, str]] = {}
        for index, column in self._required_null.items():
            bad[index] = (Item(f"row:{index}", 0, None, self._name(index)),
                          f"null in required column {column!r}")
        if self.list_nulls == "drop-row":
            for index, column in self._report.list_null_rows.items():
                if index not in bad:
                    bad[index] = (Item(f"row:{index}", 0, None, self._name(index)),
                                  f"null inside list column {column!r} (list_nulls=drop-row)")
        if self.image_column is None:
            # No per-row arrays in memory: the good rows are all but the bad ones,
            # their sizes read from the scan's file a chunk at a time.
            out.bad = [bad[i] for i in sorted(bad)]
            out.items = _AllRows(self._reader, self.num_rows,  # type: ignore[assignment]
                                 np.asarray(sorted(bad), dtype=np.int64), self._sizes_path)
            return out
        good = np.ones(self.num_rows, dtype=bool)
        good[list(bad)] = False
        sizes = np.fromfile(self._sizes_path, dtype=np.int64)  # + image file sizes
        if self.image_column is not None:
            base = Path(self.path).parent
            start = 0
            for batch in self._column_batches(self.image_column):
                for r, value in enumerate(batch.to_pylist()):
                    index = start + r
                    if value is None or not good[index]:
                        continue
                    rel = _text(_as_bytes(value))
                    fsize = file_size(base / rel)
                    if fsize is None:
                        good[index] = False
                        bad[index] = (Item(f"row:{index}", 0, None, self._name(index)),
                                      f"image file not found: {rel}")
                        continue
                    sizes[index] += fsize
                start += len(batch)
        out.bad = [bad[i] for i in sorted(bad)]
        rows = _compact(np.flatnonzero(good))
        out.items = TableRows(self._reader, rows, _compact(sizes[rows]))  # type: ignore[assignment]
        return out

    def read_rows(self, rows: np.ndarray) -> Iterator[Item]:
        """The Items of table rows `rows`, in that order, read a block at a time
        (their `size` is 0: for callers that want the payloads, e.g. Beam statistics)."""
        rows = np.asarray(rows, dtype=np.int64)
        return self._reader.items(rows, np.zeros(len(rows), dtype=np.int64))

    def normalized_batches(self, rows: np.ndarray | None = None) -> Iterator[Any]:
        """Normalized Arrow batches of `rows` (ascending; default every row), table order:
        the values the records hold, for a columnar encoder or statistics."""
        if rows is None:  # streamed, no array of every row index
            yield from self._reader.all_batches(BATCH_ROWS)
            return
        rows = np.asarray(rows, dtype=np.int64)
        for start in range(0, len(rows), BATCH_ROWS * 4):
            yield from self._reader.normalized(rows[start:start + BATCH_ROWS * 4])

    @property
    def float64_bits_columns(self) -> list[str]:
        return [c.name for c in self.plan.columns if c.encoding == "float64_bits"]

    def stats_batches(self) -> Iterator[Any]:
        """Every row, normalized, in table order, as statistics see the values: what the
        records hold, but a float64_bits column as its float64 values."""
        bits = set(self.float64_bits_columns)
        for batch in self.normalized_batches():
            if bits:
                batch = _bits_as_float64(batch, bits)
            yield batch

    @property
    def stats_schema(self) -> Any:
        """The Arrow schema of `stats_batches`."""
        import pyarrow as pa

        from tfpipe.convert._table_normalize import output_schema

        schema = output_schema(self.plan)
        for name in self.float64_bits_columns:
            i = schema.get_field_index(name)
            t = schema.field(i).type
            t = pa.float64() if t == pa.int64() else (
                pa.list_(pa.float64(), t.list_size) if pa.types.is_fixed_size_list(t)
                else pa.list_(pa.float64()))
            schema = schema.set(i, pa.field(name, t))
        return schema

    def _column_batches(self, name: str) -> Iterator[Any]:
        """One column of the table, streamed in row order (from the copy for a CSV)."""
        if self._reader.kind == "ipc":
            import pyarrow as pa

            with pa.OSFile(self._reader.path, "rb") as f:
                reader = pa.ipc.open_file(f)
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i).column(self.columns.index(name))
            return
        for batch in _parquet(self.path).iter_batches(batch_size=BATCH_ROWS, columns=[name]):
            yield batch.column(0)

    def __getstate__(self) -> dict[str, Any]:
        # Workers get rows through the shard plan (row indices), not the scan's arrays.
        state = dict(self.__dict__)
        for name in ("_sizes_path", "_required_null", "_labels", "_cleanup", "_report"):
            state.pop(name, None)
        return state

    def schema(self) -> Schema:
        specs = list(self._specs)
        if self.image_column is not None:
            standard = classification_schema()
            keys = list(IMAGE_KEYS)
            if self.label_column is not None:
                keys += ["image/class/label", "image/class/text"]
            specs += [standard[k] for k in keys]
        if self.rows_per_record > 1:  # the records' schema (tfpipe.records.packed)
            from tfpipe.records.packed import packed_schema

            return packed_schema(Schema(specs))
        return Schema(specs)

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": self.kind, "image_column": self.image_column,
                               "label_column": self.label_column,
                               "list_nulls": self.list_nulls,
                               "keep_float64": (self.keep_float64 if self.keep_float64 == "all"
                                                else list(self.keep_float64)),
                               "time_unit": self.time_unit}
        if self.rows_per_record > 1:  # absent for the row layout: its manifests stay as they were
            out["rows_per_record"] = self.rows_per_record
        if self._normalized:
            out["normalized"] = self._normalized  # what storing the values changed (summary)
        return out

    def encoded_frames(self, shard: ShardPlan, schema: Schema) -> Iterator[tuple[Any, int]] | None:
        """The TFRecord frames of `shard`'s rows, columnar (`tfpipe.records.columnar`):
        (bytes-like, record count) pairs, the bytes `encode_values` + `encode_example`
        give row by row; None when rows need that path (an image column: files to
        read, rows that can go bad). The encoder reads the normalized batches
        (`_table_normalize`: every column already int64, float32, binary or lists of
        those), so every table without images takes it; a batch it still refuses
        (`TypeError`) is encoded row by row in place, the same bytes."""
        if self.image_column is not None:
            return None
        if self.rows_per_record > 1:
            from tfpipe.convert._table_pack import packed_frames

            return packed_frames(self._row_batches(shard), self.rows_per_record, schema)
        from tfpipe.records import ColumnarEncoder

        encoder = ColumnarEncoder(schema)

        def row_by_row(items: Sequence[Item]) -> tuple[bytes, int]:
            from tfpipe.records import encode_example, encode_frame

            return b"".join(encode_frame(encode_example(self.encode_values(it)[0], schema))
                            for it in items), len(items)

        def columnar(batch: Any) -> list[Any] | None:
            try:
                return encoder.frames(batch)
            except TypeError:  # pragma: no cover - the normalized types always fit
                return None

        def frames() -> Iterator[tuple[Any, int]]:
            items = shard.items
            if isinstance(items, TableRows):
                for batch, rows, sizes in items.plan_batches():
                    n = batch.num_rows
                    bufs = columnar(batch)
                    if bufs is None:
                        yield row_by_row(items.reader.batch_items(batch, rows, sizes))
                    else:
                        yield from ((buf, n if k == 0 else 0) for k, buf in enumerate(bufs))
                if isinstance(items, _SpilledRows):
                    items.release()  # written: its copy's disk is free for the next ones
                return
            # Items with payloads (the Beam runner's plan files): columnar too.
            for start in range(0, len(items), BATCH_ROWS):
                part = items[start:start + BATCH_ROWS]
                bufs = columnar(_payload_batch(part, self.plan))
                if bufs is None:
                    yield row_by_row(part)
                else:
                    yield from ((buf, len(part) if k == 0 else 0) for k, buf in enumerate(bufs))

        return frames()

    def _row_batches(self, shard: ShardPlan) -> Iterator[Any]:
        """`shard`'s rows as normalized batches, in plan order."""
        items = shard.items
        if isinstance(items, TableRows):
            for batch, _, _ in items.plan_batches():
                yield batch
            return
        for start in range(0, len(items), BATCH_ROWS):  # Items with payloads (Beam)
            yield _payload_batch(items[start:start + BATCH_ROWS], self.plan)

    def shard_stats(self, shard: ShardPlan) -> dict[str, int]:
        """Counts the manifest records per shard (`settings.shard_stats`): the rows of a
        packed shard (its records are blocks of rows)."""
        return {"rows": len(shard.items)} if self.rows_per_record > 1 else {}

    def encode_values(self, item: Item) -> tuple[dict[str, Any], dict[str, int]]:
        index, row = item.payload
        values: dict[str, Any] = {}
        for spec in self._specs:
            values[spec.name] = [] if row[spec.name] is None else row[spec.name]
        if self.image_column is not None:
            rel = _text(row[self.image_column])
            data, info = read_image(Path(self.path).parent / rel)
            values.update(image_values(data, info, rel, f"row:{index}"))
            if self.label_column is not None:
                label = row[self.label_column]
                if self._dtypes[self.label_column] == "string":
                    text = label
                    values["image/class/label"] = self.class_names.index(_text(label))
                else:
                    values["image/class/label"] = int(label)
                    text = str(int(label)).encode()
                values["image/class/text"] = text
        return values, {}
