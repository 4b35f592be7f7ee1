"""compute_statistics: one streaming pass over a table in chunks, bounded memory.

Memory is O(chunk_rows) for the chunk being read plus, per column, the quantile
sketch (about k * log2(n / k) floats) and the value counts (at most
`max_exact_unique` distinct values), whatever the number of rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tfpipe.errors import ConfigError, InputError
from tfpipe.features._sketch import (DEFAULT_MAX_EXACT, DEFAULT_SKETCH_K,
                                     FrequencyAccumulator, NumericAccumulator, QuantileSketch)
from tfpipe.features._stats import ColumnStats, Statistics

# Row selector: given a chunk's row range [start, stop) in the table, the rows to keep.
Select = Callable[[int, int], np.ndarray]


def column_dtype(arrow_type: Any) -> str | None:
    """The record dtype statistics are computed for: int64 | float32 | string; None = skipped.

    The same mapping as the table converter: integers and booleans -> int64,
    floats and decimals -> float32, strings and binary -> string. Lists,
    dates/times and nulls get no statistics (listed under settings['skipped_columns']).
    """
    import pyarrow as pa

    t = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return "int64"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "float32"
    if (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)):
        return "string"
    return None


def numeric_values(array: Any, dtype: str) -> tuple[np.ndarray, int]:
    """(non-missing values as float64, missing count) of a numeric column chunk.

    float32 columns: the value the record holds (float32), then NaN counts as missing.
    """
    import pyarrow as pa

    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if dtype == "int64":
        present = array.cast(pa.int64()).drop_null()
        return present.to_numpy(zero_copy_only=False).astype(np.float64), \
            len(array) - len(present)
    values = array.cast(pa.float64()).drop_null()
    x = values.to_numpy(zero_copy_only=False).astype(np.float32).astype(np.float64)
    nan = np.isnan(x)
    missing = len(array) - len(values) + int(nan.sum())
    return (x[~nan] if nan.any() else x), missing


def string_values(array: Any) -> tuple[Any, int]:
    """(non-missing values as a binary Arrow array, missing count) of a string column chunk."""
    import pyarrow as pa

    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if not (pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)):
        array = array.cast(pa.large_binary() if pa.types.is_large_string(array.type)
                           else pa.binary())
    array = array.cast(pa.binary())
    present = array.drop_null()
    return present, len(array) - len(present)


@dataclass
class ColumnAccumulator:
    name: str
    dtype: str
    numeric: NumericAccumulator | None
    frequency: FrequencyAccumulator | None

    @classmethod
    def create(cls, name: str, dtype: str, sketch_k: int, max_exact: int) -> ColumnAccumulator:
        numeric = (NumericAccumulator(sketch=QuantileSketch(sketch_k))
                   if dtype in ("int64", "float32") else None)
        freq = FrequencyAccumulator(max_exact) if dtype in ("int64", "string") else None
        return cls(name, dtype, numeric, freq)

    def add(self, array: Any) -> None:
        """One chunk of the column (a pyarrow Array, nulls allowed)."""
        import pyarrow as pa

        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        if self.dtype == "string":
            present, missing = string_values(array)
            self.frequency.add(present, missing)
            return
        values, missing = numeric_values(array, self.dtype)
        self.numeric.add(values, missing)
        if self.dtype == "int64":
            self.frequency.add(array.cast(pa.int64()).drop_null(), missing)

    def merge(self, other: ColumnAccumulator) -> None:
        if self.numeric is not None:
            self.numeric.merge(other.numeric)
        if self.frequency is not None:
            self.frequency.merge(other.frequency)

    def result(self, top_k: int, num_quantiles: int) -> ColumnStats:
        return ColumnStats(
            self.name, self.dtype,
            None if self.numeric is None else self.numeric.result(num_quantiles),
            None if self.frequency is None
            else self.frequency.result(top_k, decode=self.dtype == "string"))


@dataclass
class TableAccumulator:
    """Mergeable partial statistics of a table: what one chunk, bundle or file adds."""

    columns: dict[str, ColumnAccumulator]
    skipped: dict[str, str] = field(default_factory=dict)  # column -> arrow type
    num_rows: int = 0

    @classmethod
    def for_schema(cls, schema: Any, columns: Iterable[str] | None = None, *,
                   sketch_k: int = DEFAULT_SKETCH_K,
                   max_exact_unique: int = DEFAULT_MAX_EXACT) -> TableAccumulator:
        names = list(schema.names)
        wanted = names if columns is None else list(columns)
        unknown = [c for c in wanted if c not in names]
        if unknown:
            raise ConfigError(f"columns: {', '.join(map(repr, unknown))} not in the table; "
                              f"columns are {', '.join(names)}")
        accs: dict[str, ColumnAccumulator] = {}
        skipped: dict[str, str] = {}
        for name in wanted:
            dtype = column_dtype(schema.field(name).type)
            if dtype is None:
                skipped[name] = str(schema.field(name).type)
            else:
                accs[name] = ColumnAccumulator.create(name, dtype, sketch_k, max_exact_unique)
        return cls(accs, skipped)

    def add_batch(self, batch: Any) -> None:
        self.num_rows += batch.num_rows
        for name, acc in self.columns.items():
            acc.add(batch.column(name))

    def merge(self, other: TableAccumulator) -> TableAccumulator:
        self.num_rows += other.num_rows
        for name, acc in self.columns.items():
            acc.merge(other.columns[name])
        return self

    def result(self, *, top_k: int, num_quantiles: int, split: str, source: str,
               settings: dict[str, Any]) -> Statistics:
        cols = {name: acc.result(top_k, num_quantiles) for name, acc in self.columns.items()}
        settings = dict(settings)
        if self.skipped:
            settings["skipped_columns"] = dict(self.skipped)
        return Statistics(cols, self.num_rows, split, source, settings)


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
    return value


def iter_batches(source: Any, chunk_rows: int, columns: list[str] | None = None,
                 column_types: Any = None) -> tuple[Any, Iterator[Any], str]:
    """(schema, RecordBatch iterator, display name) of a path, Table, RecordBatch or iterable.

    column_types (a pyarrow Schema) fixes the CSV column types: the streaming
    reader otherwise infers them from the first block only.
    """
    import pyarrow as pa

    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        suffix = path.suffix.lower()
        if not path.is_file():
            raise InputError(f"{path}: no such file")
        try:
            if suffix == ".csv":
                import pyarrow.csv as pacsv

                # block_size bounds what the streaming reader holds at once.
                types = ({f.name: f.type for f in column_types}
                         if column_types is not None else None)
                reader = pacsv.open_csv(path, read_options=pacsv.ReadOptions(
                    block_size=max(1 << 20, min(chunk_rows * 64, 1 << 28))),
                    convert_options=pacsv.ConvertOptions(include_columns=columns,
                                                         column_types=types))
                return reader.schema, _rechunk(reader, chunk_rows), path.name
            if suffix in (".parquet", ".pq"):
                import pyarrow.parquet as pq

                pf = pq.ParquetFile(path)
                schema = pf.schema_arrow
                if columns is not None:
                    schema = pa.schema([schema.field(c) for c in columns if c in schema.names])
                return (schema, pf.iter_batches(batch_size=chunk_rows, columns=columns),
                        path.name)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"{path}: cannot read as a table: {exc}") from None
        raise InputError(f"{path}: statistics read .csv, .parquet or .pq files")
    if isinstance(source, pa.Table):
        return source.schema, iter(source.to_batches(max_chunksize=chunk_rows)), "table"
    if isinstance(source, pa.RecordBatch):
        return source.schema, iter([source]), "table"
    it = iter(source)
    try:
        first = next(it)
    except StopIteration:
        raise InputError("compute_statistics: the batch iterable is empty") from None

    def chain() -> Iterator[Any]:
        yield first
        yield from it

    return first.schema, chain(), "batches"


def _reading(batches: Iterator[Any], name: str) -> Iterator[Any]:
    """Batches, with a read error mid-file as an InputError naming the file."""
    import pyarrow as pa

    try:
        yield from batches
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{name}: cannot read as a table: {exc}") from None


def _rechunk(reader: Any, chunk_rows: int) -> Iterator[Any]:
    for batch in reader:
        for start in range(0, batch.num_rows, chunk_rows):
            yield batch.slice(start, chunk_rows)


def compute_statistics(source: Any, *, columns: Iterable[str] | None = None,
                       top_k: int = 10_000, num_quantiles: int = 100,
                       chunk_rows: int = 1_000_000, split: str = "train",
                       select: Select | None = None, sketch_k: int = DEFAULT_SKETCH_K,
                       max_exact_unique: int = DEFAULT_MAX_EXACT,
                       column_types: Any = None) -> Statistics:
    """Per-column statistics of `source`, streaming in chunks of `chunk_rows` rows.

    source: a .csv / .parquet path, a pyarrow Table or RecordBatch, or an
    iterable of RecordBatches. Integers get numeric and categorical
    statistics, floats numeric, strings categorical (see docs/tabular.md for
    the approximation bounds). `select(start, stop)` returns the boolean mask
    of the rows of [start, stop) to count (the converter passes its train
    split); `split` is recorded as given. `column_types` (a pyarrow Schema)
    fixes the types of a CSV's columns (default: inferred from its first block).
    """
    _check_int("top_k", top_k, 1)
    _check_int("num_quantiles", num_quantiles, 2)
    _check_int("chunk_rows", chunk_rows, 1)
    _check_int("sketch_k", sketch_k, 2)
    _check_int("max_exact_unique", max_exact_unique, top_k)
    wanted = None if columns is None else list(columns)
    schema, batches, name = iter_batches(source, chunk_rows, wanted, column_types)
    acc = TableAccumulator.for_schema(schema, wanted, sketch_k=sketch_k,
                                      max_exact_unique=max_exact_unique)
    import pyarrow as pa

    start = 0
    for batch in _reading(batches, name):
        stop = start + batch.num_rows
        if select is not None:
            mask = np.asarray(select(start, stop), dtype=bool)
            if mask.shape != (batch.num_rows,):
                raise ValueError(f"select({start}, {stop}) returned shape {mask.shape}")
            batch = batch.filter(pa.array(mask))
        acc.add_batch(batch)
        start = stop
    return acc.result(top_k=top_k, num_quantiles=num_quantiles, split=split, source=name,
                      settings=statistics_settings(top_k, num_quantiles, chunk_rows,
                                                   sketch_k, max_exact_unique))


def statistics_settings(top_k: int, num_quantiles: int, chunk_rows: int, sketch_k: int,
                        max_exact_unique: int) -> dict[str, Any]:
    return {"top_k": top_k, "num_quantiles": num_quantiles, "chunk_rows": chunk_rows,
            "sketch_k": sketch_k, "max_exact_unique": max_exact_unique}
