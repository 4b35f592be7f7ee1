"""The packed table layout at conversion (`convert(..., rows_per_record=N)`,
docs/tabular.md "Packed layout"): every record holds up to N consecutive rows of
one shard, in the shard's planned row order, column by column.

The plan, split and order of rows are the row layout's; only the framing changes.
Each shard's normalized Arrow batches are cut into blocks of N rows (the last
block of a shard may be short), every column reshaped into one list per block
(`pyarrow.ListArray` from offsets, nulls filled and listed under
`tfpipe/missing/<column>`), and the block batch goes through the same C columnar
encoder as the row layout (`tfpipe.records.ColumnarEncoder`): no per-block Python.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from tfpipe.errors import ConfigError, InputError
from tfpipe.records import VERSION_KEY, Schema
from tfpipe.records.packed import ROWS_KEY, missing_key


def check_rows_per_record(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"rows_per_record must be an int >= 1 (1: one row per record, "
                          f"the default), got {n!r}")
    return n


def check_packable(display: str, list_columns: list[str], image_column: str | None) -> None:
    """The packed layout holds scalar columns of tables without images."""
    if image_column is not None:
        raise InputError(f"{display}: --rows-per-record packs table rows without images; "
                         "a table with --image-column is converted one row per record")
    if list_columns:
        raise InputError(f"{display}: --rows-per-record packs columns of one value per row; "
                         f"column(s) {', '.join(list_columns)} hold lists; convert them one "
                         "row per record (--rows-per-record 1) or drop them from the table")


def _fill(arr: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if not arr.null_count:
        return arr
    t = arr.type
    zero = b"" if (pa.types.is_binary(t) or pa.types.is_large_binary(t)) else (
        "" if (pa.types.is_string(t) or pa.types.is_large_string(t)) else 0)
    return pc.fill_null(arr, pa.scalar(zero, type=t))


def pack_batch(batch: Any, n: int, rows: Schema) -> Any:
    """A normalized RecordBatch of rows -> a RecordBatch of blocks of `n` rows
    (the last one short when the rows do not fill it): the packed record columns."""
    import pyarrow as pa

    m = batch.num_rows
    k = -(-m // n)
    offsets = np.minimum(np.arange(k + 1, dtype=np.int64) * n, m).astype(np.int32)
    off = pa.array(offsets)
    names, arrays = [], []
    for name, spec in rows.items():
        if name == VERSION_KEY:
            continue
        arr = batch.column(batch.schema.get_field_index(name))
        if isinstance(arr, pa.ChunkedArray):  # pragma: no cover - batches hold arrays
            arr = arr.combine_chunks()
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        names.append(name)
        arrays.append(pa.ListArray.from_arrays(off, _fill(arr)))
        if spec.kind == "var":  # nullable: the block-relative indexes of its null rows
            idx = (np.flatnonzero(~np.asarray(arr.is_valid().to_numpy(zero_copy_only=False),
                                              dtype=bool)) if arr.null_count
                   else np.zeros(0, np.int64))
            block = idx // n
            moff = np.concatenate([[0], np.cumsum(np.bincount(block, minlength=k))])
            names.append(missing_key(name))
            arrays.append(pa.ListArray.from_arrays(pa.array(moff.astype(np.int32)),
                                                   pa.array((idx - block * n).astype(np.int64))))
    names.append(ROWS_KEY)
    arrays.append(pa.array(np.diff(offsets).astype(np.int64)))
    return pa.RecordBatch.from_arrays(arrays, names=names)


def blocks_of(batches: Iterator[Any], n: int) -> Iterator[Any]:
    """Row batches regrouped so that each holds whole blocks of `n` rows, but the
    last (the shard's last block may be short): blocks never straddle batches."""
    import pyarrow as pa

    held: list[Any] = []
    count = 0
    for batch in batches:
        held.append(batch)
        count += batch.num_rows
        whole = count // n * n
        if whole:
            table = pa.Table.from_batches(held).combine_chunks()
            yield from table.slice(0, whole).to_batches()
            rest = table.slice(whole)
            held = [b for b in rest.to_batches() if b.num_rows]
            count -= whole
    if count:
        yield from pa.Table.from_batches(held).combine_chunks().to_batches()


def packed_frames(row_batches: Iterator[Any], n: int,
                  schema: Schema) -> Iterator[tuple[Any, int]]:
    """(frames, record count) of a shard's normalized row batches (plan order)
    packed `n` rows to a record: the `encoded_frames` of the packed layout."""
    from tfpipe.records import ColumnarEncoder
    from tfpipe.records.packed import row_schema

    rows = row_schema(schema)
    encoder = ColumnarEncoder(schema)
    for batch in blocks_of(row_batches, n):
        packed = pack_batch(batch, n, rows)
        yield from ((buf, packed.num_rows if i == 0 else 0)
                    for i, buf in enumerate(encoder.frames(packed)))
