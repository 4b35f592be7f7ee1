"""The value rules of the table converter: Arrow columns -> the types a record stores.

`make_plan(arrow_schema, ...)` decides, per column, how its values are stored;
`normalize_batch(batch, plan)` converts one Arrow RecordBatch accordingly and
reports what the conversion changed; `plan.finalize(report)` and
`feature_specs(plan, report)` turn the scan's report into the dataset schema.
Every encoder of table rows (the row-by-row path in table.py, the columnar
encoder) consumes these normalized batches, so the rules live here only.

A normalized batch holds, per column, one of: int64, float32, binary, or a
list / fixed_size_list of those; a null scalar stays null (written as an empty
feature list). The rules (docs/convert.md "Tables"):

- integers and booleans -> int64. A uint64 value above 2**63 - 1 is an error
  naming the row and column; so is a CSV integer column with a value beyond
  int64 (pyarrow would read the whole column as float64).
- float64 and decimals -> float32, each column's largest absolute and relative
  error reported; `keep_float64` columns are stored exactly instead, as the
  float64 bit pattern in an int64 (encoding "float64_bits": `tf.bitcast` reads
  it back). A finite value beyond float32's range is an error naming the row.
- strings, binary -> bytes; in a CSV an empty field is null, as in a Parquet
  written from the same DataFrame (a CSV cannot tell "" from a missing value).
- timestamps and dates -> int64 epoch (UTC) in `time_unit` (default seconds,
  what the `time` transform reads; encoding "timestamp_<unit>"), times of day
  and durations -> int64 in `time_unit` ("time_of_day_<unit>", "duration_<unit>").
  Flooring to a coarser unit is reported like float narrowing.
- a null inside a list follows `list_nulls`: drop-element (default: the list
  keeps its other values; a fixed-size list that lost one becomes var-length),
  drop-row (the row is a bad row, listed in the manifest) or error.

What an encoder may rely on (the contract with the columnar encoder): with the
finalized plan (`TableSource.plan`), every batch has the plan's columns in plan
order, each of type `output_type(col)` (the same in every batch); a scalar's
feature holds its one value, or no value when it is null (the schema calls such
a column var-length: `FeatureSpec.kind`); a list's feature holds its values (a
null list: none); the values are exactly the ones to write (float32 already
rounded, bytes as stored). `TableSource.normalized_batches(rows)` yields them for
any ascending rows; the rows of a shard are `ShardPlan.items.rows` (plan order).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tfpipe.errors import ConfigError, InputError

LIST_NULLS = ("drop-element", "drop-row", "error")
TIME_UNITS = ("s", "ms", "us", "ns")
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
INT64_MAX = (1 << 63) - 1
FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class ColumnPlan:
    """How one column is stored. `convert` names the value rule (see `_scalar`)."""

    name: str
    dtype: str  # int64 | float32 | string: the record dtype
    convert: str  # int | uint64 | bool | float | float64 | float64_bits | string | binary
    #               | time | null | whole_float (a label of whole floats)
    list: str | None = None  # None (scalar) | "var" | "fixed"
    list_size: int = 0
    encoding: str | None = None  # recorded in the schema: float64_bits, timestamp_s, ...
    source_unit: str = ""  # time columns: the Arrow unit ("day" for date32)
    empty_is_null: bool = False  # CSV strings


@dataclass(frozen=True)
class NormalizePlan:
    """Per-column rules plus the policies; small and picklable (travels to workers)."""

    columns: tuple[ColumnPlan, ...]
    list_nulls: str = "drop-element"
    time_unit: str = "s"
    where: str = "table"  # names the table in errors

    def column(self, name: str) -> ColumnPlan:
        return next(c for c in self.columns if c.name == name)

    def finalize(self, report: NormalizeReport) -> NormalizePlan:
        """After the scan: a fixed-size list column that lost a null element is var-length."""
        dropping = self.list_nulls == "drop-element"
        cols = tuple(replace(c, list="var", list_size=0)
                     if c.list == "fixed" and dropping and report.list_nulls.get(c.name) else c
                     for c in self.columns)
        return replace(self, columns=cols)

    def with_whole_label(self, name: str) -> NormalizePlan:
        """The label column `name` holds whole floats (pandas' int column with a NaN):
        stored as int64 class indices."""
        cols = tuple(replace(c, dtype="int64", convert="whole_float", encoding=None)
                     if c.name == name else c for c in self.columns)
        return replace(self, columns=cols)


@dataclass
class Narrowing:
    """What storing a column in fewer bits changed: rows whose value changed and the
    largest absolute / relative error (time columns: in seconds)."""

    rows: int = 0
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0

    def merge(self, other: Narrowing) -> None:
        self.rows += other.rows
        self.max_abs_error = max(self.max_abs_error, other.max_abs_error)
        self.max_rel_error = max(self.max_rel_error, other.max_rel_error)

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "max_abs_error": self.max_abs_error,
                "max_rel_error": self.max_rel_error}


@dataclass
class NormalizeReport:
    """What normalizing some batches found, mergeable over batches.

    nulls: top-level nulls per column (after normalization: a CSV's "" counts);
    list_nulls: null elements per column (dropped under drop-element);
    list_null_rows: under drop-row, the table rows holding one (bad rows) -> column;
    narrowed: float64 -> float32 and time-flooring errors per column.
    """

    rows: int = 0
    nulls: dict[str, int] = field(default_factory=dict)
    list_nulls: dict[str, int] = field(default_factory=dict)
    list_null_rows: dict[int, str] = field(default_factory=dict)
    narrowed: dict[str, Narrowing] = field(default_factory=dict)

    def merge(self, other: NormalizeReport) -> None:
        self.rows += other.rows
        for k, v in other.nulls.items():
            self.nulls[k] = self.nulls.get(k, 0) + v
        for k, v in other.list_nulls.items():
            self.list_nulls[k] = self.list_nulls.get(k, 0) + v
        for row, col in other.list_null_rows.items():
            self.list_null_rows.setdefault(row, col)
        for k, n in other.narrowed.items():
            self.narrowed.setdefault(k, Narrowing()).merge(n)

    def to_json(self, plan: NormalizePlan) -> dict[str, Any]:
        """The manifest's record of it (source.normalized): only what happened."""
        out: dict[str, Any] = {}
        if self.list_nulls:
            key = ("list_null_elements_dropped" if plan.list_nulls == "drop-element"
                   else "list_null_elements")
            out[key] = dict(sorted(self.list_nulls.items()))
        if self.list_null_rows and plan.list_nulls == "drop-row":
            counts: dict[str, int] = {}
            for col in self.list_null_rows.values():
                counts[col] = counts.get(col, 0) + 1
            out["list_null_rows_dropped"] = dict(sorted(counts.items()))
        narrowed = {k: v.to_json() for k, v in sorted(self.narrowed.items()) if v.rows}
        if narrowed:
            out["narrowed"] = narrowed
        return out


# ----------------------------------------------------------------------------- plan
def parse_keep_float64(value: Any) -> tuple[str, ...] | str:
    """keep_float64 as given on the command line ("a,b" or "all"), a list, or None."""
    if value is None:
        return ()
    if isinstance(value, str):
        if value.strip() == "all":
            return "all"
        value = [v.strip() for v in value.split(",") if v.strip()]
    return tuple(value)


def _is_list(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _scalar_rule(name: str, t: Any, keep64: bool, time_unit: str, csv: bool,
                 original: Any) -> ColumnPlan:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        return ColumnPlan(name, "int64", "bool")
    if pa.types.is_integer(t):
        return ColumnPlan(name, "int64", "uint64" if t == pa.uint64() else "int")
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        wide = t == pa.float64() or pa.types.is_decimal(t)
        if keep64:
            return ColumnPlan(name, "int64", "float64_bits", encoding="float64_bits")
        return ColumnPlan(name, "float32", "float64" if wide else "float")
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return ColumnPlan(name, "string", "string", empty_is_null=csv)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return ColumnPlan(name, "string", "binary", empty_is_null=csv)
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        unit = "day" if pa.types.is_date32(t) else "ms" if pa.types.is_date64(t) else t.unit
        return ColumnPlan(name, "int64", "time", encoding=f"timestamp_{time_unit}",
                          source_unit=unit)
    if pa.types.is_time(t) or pa.types.is_duration(t):
        what = "time_of_day" if pa.types.is_time(t) else "duration"
        return ColumnPlan(name, "int64", "time", encoding=f"{what}_{time_unit}",
                          source_unit=t.unit)
    if pa.types.is_null(t):
        return ColumnPlan(name, "string", "null")
    raise InputError(f"column {name!r}: type {original} is not supported (use integers, "
                     "floats, booleans, strings, binary, dates, timestamps or lists of them)")


def make_plan(schema: Any, *, list_nulls: str = "drop-element",
              keep_float64: tuple[str, ...] | str = (), time_unit: str = "s",
              csv: bool = False, where: str = "table") -> NormalizePlan:
    """The rules for a table with Arrow `schema`. keep_float64: column names, or "all"."""
    import pyarrow as pa

    if list_nulls not in LIST_NULLS:
        raise ConfigError(f"list_nulls must be one of {', '.join(LIST_NULLS)}, "
                          f"got {list_nulls!r}")
    if time_unit not in TIME_UNITS:
        raise ConfigError(f"time_unit must be one of {', '.join(TIME_UNITS)}, got {time_unit!r}")
    names = list(schema.names)
    if keep_float64 != "all":
        unknown = [c for c in keep_float64 if c not in names]
        if unknown:
            raise ConfigError(f"keep_float64: {', '.join(map(repr, unknown))} not a column of "
                              f"{where}; columns are {', '.join(names)}")
    cols = []
    for f in schema:
        keep = keep_float64 == "all" or f.name in keep_float64
        t = f.type
        if pa.types.is_dictionary(t):
            t = t.value_type
        if _is_list(t):
            inner = t.value_type
            if pa.types.is_dictionary(inner):
                inner = inner.value_type
            if _is_list(inner):
                raise InputError(f"{where}: column {f.name!r}: type {f.type} is a list of "
                                 "lists, which a record cannot hold; flatten it")
            rule = _scalar_rule(f.name, inner, keep, time_unit, False, f.type)
            fixed = pa.types.is_fixed_size_list(t)
            cols.append(replace(rule, list="fixed" if fixed else "var",
                                list_size=t.list_size if fixed else 0))
        else:
            cols.append(_scalar_rule(f.name, t, keep, time_unit, csv, f.type))
    if keep_float64 != "all":
        wrong = [c.name for c in cols if c.name in keep_float64 and c.convert != "float64_bits"]
        if wrong:
            raise ConfigError(f"keep_float64: column(s) {', '.join(map(repr, wrong))} of {where} "
                              "hold no floats")
    return NormalizePlan(tuple(cols), list_nulls, time_unit, where)


def output_type(col: ColumnPlan) -> Any:
    """The Arrow type of `col` in a normalized batch."""
    import pyarrow as pa

    value = {"int64": pa.int64(), "float32": pa.float32(), "string": pa.binary()}[col.dtype]
    if col.list == "fixed":
        return pa.list_(value, col.list_size)
    if col.list == "var":
        return pa.list_(value)
    return value


def output_schema(plan: NormalizePlan) -> Any:
    import pyarrow as pa

    return pa.schema([pa.field(c.name, output_type(c)) for c in plan.columns])


# ----------------------------------------------------------------------------- values
def _where(plan: NormalizePlan, name: str, row: int) -> str:
    return f"{plan.where} row {row}, column {name!r}"


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _valid(arr: Any) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _int64_with_nulls(values: np.ndarray, valid: np.ndarray) -> Any:
    import pyarrow as pa

    return pa.array(values.astype(np.int64, copy=False),
                    mask=None if valid.all() else ~valid, type=pa.int64())


def _scalar(arr: Any, col: ColumnPlan, plan: NormalizePlan, rows: np.ndarray,
            report: NormalizeReport) -> Any:
    """One flat (non-list) array converted by `col`'s rule. rows[i]: the table row of
    arr[i] (for errors); narrowing is added to `report`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    kind = col.convert
    if kind in ("int", "bool"):
        return arr.cast(pa.int64())
    if kind == "uint64":
        x = arr.to_numpy(zero_copy_only=False) if arr.null_count == 0 else \
            pc.fill_null(arr, 0).to_numpy(zero_copy_only=False)
        over = x > INT64_MAX
        if over.any():
            i = _first(over)
            raise InputError(f"{_where(plan, col.name, int(rows[i]))}: {int(x[i])} is beyond "
                             f"int64 (max {INT64_MAX}); records store integers as int64: "
                             "fix the value, or store the column as text")
        return arr.cast(pa.int64())
    if kind == "whole_float":
        return arr.cast(pa.int64())  # the scan checked every value is whole
    if kind in ("float", "float64", "float64_bits"):
        if pa.types.is_decimal(arr.type):
            arr = arr.cast(pa.float64())
        if kind == "float":
            return arr.cast(pa.float32())
        arr = arr.cast(pa.float64())
        valid = _valid(arr)
        x = pc.fill_null(arr, 0.0).to_numpy(zero_copy_only=False)
        if kind == "float64_bits":
            return _int64_with_nulls(x.view(np.int64), valid)
        with np.errstate(over="ignore", invalid="ignore"):
            y = x.astype(np.float32)
            over = np.isinf(y) & np.isfinite(x)
            if over.any():
                i = _first(over)
                raise InputError(f"{_where(plan, col.name, int(rows[i]))}: {x[i]!r} is beyond "
                                 f"float32 (max {FLOAT32_MAX:.6g}); keep the column's precision "
                                 f"with --keep-float64 {col.name}")
            err = np.abs(y.astype(np.float64) - x)
            err[~np.isfinite(err)] = 0.0  # NaN and inf stay what they are
        changed = err > 0
        if changed.any():
            n = report.narrowed.setdefault(col.name, Narrowing())
            rel = err[changed] / np.abs(x[changed])
            n.merge(Narrowing(int(changed.sum()), float(err.max()), float(rel.max())))
        return pa.array(y, mask=None if valid.all() else ~valid, type=pa.float32())
    if kind in ("string", "binary"):
        if pa.types.is_fixed_size_binary(arr.type):
            arr = pa.array(arr.to_pylist(), pa.binary())
        elif pa.types.is_large_string(arr.type):
            arr = arr.cast(pa.large_binary())
        if not pa.types.is_binary(arr.type):
            arr = arr.cast(pa.binary())
        if col.empty_is_null:
            empty = pc.equal(pc.binary_length(arr), 0)
            if pc.any(empty).as_py():
                arr = pc.if_else(empty, pa.scalar(None, pa.binary()), arr)
        return arr
    if kind == "null":
        return pa.nulls(len(arr), pa.binary())
    if kind == "time":
        return _time(arr, col, plan, rows, report)
    raise AssertionError(kind)


def _time(arr: Any, col: ColumnPlan, plan: NormalizePlan, rows: np.ndarray,
          report: NormalizeReport) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    valid = _valid(arr)
    storage = pa.int32() if col.source_unit == "day" or arr.type.bit_width == 32 else pa.int64()
    x = pc.fill_null(arr.cast(storage), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    src = 86_400 if col.source_unit == "day" else None
    target = _PER_SECOND[plan.time_unit]
    if src is not None:  # days -> seconds -> target
        return _int64_with_nulls(x * 86_400 * target, valid)
    per = _PER_SECOND[col.source_unit]
    if per == target:
        return _int64_with_nulls(x, valid)
    if per < target:  # a finer unit: exact unless it overflows
        factor = target // per
        limit = INT64_MAX // factor
        over = valid & (np.abs(x) > limit)
        if over.any():
            row = int(rows[_first(over)])
            raise InputError(f"{_where(plan, col.name, row)}: cannot be stored in unit "
                             f"{plan.time_unit!r} without overflowing int64; use a coarser "
                             "--time-unit")
        return _int64_with_nulls(x * factor, valid)
    factor = per // target
    y = np.floor_divide(x, factor)
    rest = np.where(valid, x - y * factor, 0)
    if rest.any():
        seconds = rest.astype(np.float64) / per
        n = report.narrowed.setdefault(col.name, Narrowing())
        n.merge(Narrowing(int((rest != 0).sum()), float(seconds.max()), 0.0))
    return _int64_with_nulls(y, valid)


def _list(arr: Any, col: ColumnPlan, plan: NormalizePlan, first_row: int,
          report: NormalizeReport) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    n = len(arr)
    valid = _valid(arr)
    # Only the values of valid lists: a null list's slots (fixed-size lists keep
    # them) are not elements.
    sizes = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False) \
        .astype(np.int64)
    parents = np.repeat(np.arange(n), sizes)
    flat = pc.list_flatten(arr)  # skips null lists
    if pa.types.is_dictionary(flat.type):
        flat = flat.dictionary_decode()
    inner_valid = _valid(flat)
    scalar_col = replace(col, list=None)
    values = _scalar(flat, scalar_col, plan, parents + first_row, report)
    if not inner_valid.all():
        holes = ~inner_valid
        rows_with = np.unique(parents[holes])
        if plan.list_nulls == "error":
            raise InputError(f"{_where(plan, col.name, first_row + int(rows_with[0]))}: a null "
                             "inside a list; choose --list-nulls drop-element (drop the null "
                             "values) or drop-row (skip such rows)")
        report.list_nulls[col.name] = report.list_nulls.get(col.name, 0) + int(holes.sum())
        if plan.list_nulls == "drop-row":
            # the rows are bad rows, never encoded: their values stay as they are
            for r in rows_with.tolist():
                report.list_null_rows.setdefault(first_row + r, col.name)
        else:
            values = values.filter(pa.array(inner_valid))
            sizes = np.bincount(parents[inner_valid], minlength=n).astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    if col.list == "fixed" and (sizes[valid] == col.list_size).all():
        out = pa.FixedSizeListArray.from_arrays(
            _pad_fixed(values, sizes, valid, col.list_size), col.list_size)
        if not valid.all():
            out = pc.if_else(pa.array(valid), out, pa.scalar(None, out.type))
        return out
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values,
                                    mask=None if valid.all() else pa.array(~valid))


def _pad_fixed(values: Any, sizes: np.ndarray, valid: np.ndarray, size: int) -> Any:
    """Values of a fixed-size list array whose null lists hold no values: zeros in their
    slots (masked by the list's own null)."""
    import pyarrow as pa

    if valid.all():
        return values
    pieces, at = [], 0
    zero = pa.nulls(size, values.type)
    for ok, k in zip(valid.tolist(), sizes.tolist()):
        if ok:
            pieces.append(values.slice(at, k))
            at += k
        else:
            pieces.append(zero)
    return pa.concat_arrays(pieces) if pieces else values


def normalize_batch(batch: Any, plan: NormalizePlan, *, first_row: int = 0
                    ) -> tuple[Any, NormalizeReport]:
    """`batch` (an Arrow RecordBatch of the planned table) in stored types, and what
    changed. first_row: the table row of the batch's first row (errors name rows).

    Raises InputError naming the row and column for a value that cannot be stored
    (an integer beyond int64, a float beyond float32, a list null under "error").
    """
    import pyarrow as pa

    report = NormalizeReport(rows=batch.num_rows)
    arrays = []
    for col in plan.columns:
        arr = batch.column(batch.schema.get_field_index(col.name))
        if col.list is None:
            rows = np.arange(first_row, first_row + len(arr))
            out = _scalar(arr, col, plan, rows, report)
        else:
            out = _list(arr, col, plan, first_row, report)
        want = output_type(col)
        # a fixed-size list that lost a null element is var-length in this batch; only
        # during the scan: the finalized plan makes such a column var in every batch
        if out.type != want and not (col.list == "fixed" and pa.types.is_list(out.type)):
            out = out.cast(want)
        report.nulls[col.name] = out.null_count
        arrays.append(out)
    return pa.RecordBatch.from_arrays(arrays, names=[c.name for c in plan.columns]), report


def check_integer_text(plan: NormalizePlan, name: str, texts: Any, first_row: int = 0) -> None:
    """A CSV column pyarrow read as float64 because a value is beyond int64: if every
    value is integer text, name the first out-of-range row (instead of storing every
    row as a float)."""
    import pyarrow.compute as pc

    present = texts.drop_null()
    if len(present) == 0 or not pc.all(pc.match_substring_regex(
            present, r"^\s*[+-]?\d+\s*$")).as_py():
        return
    for i, v in enumerate(texts.to_pylist()):
        if v is not None and not -(1 << 63) <= int(v) <= INT64_MAX:
            raise InputError(f"{_where(plan, name, first_row + i)}: {v.strip()} is beyond int64 "
                             f"[{-(1 << 63)}, {INT64_MAX}]; records store integers as int64: fix "
                             "the value, or give ids that large as text in a Parquet file (a "
                             "CSV column of digits is read as numbers)")


def whole(values: np.ndarray) -> bool:
    """Every value a whole, non-negative number (a class index)."""
    return bool(np.all(np.isfinite(values)) and np.all(values == np.floor(values))
                and (len(values) == 0 or values.min() >= 0))
