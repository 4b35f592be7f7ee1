"""CSV and Parquet tables: one record per row, columns keep their names.

Types follow the table's Arrow schema: integers -> int64, floats -> float32,
strings/binary -> bytes, booleans -> int64 (0/1), dates and times -> ISO text,
lists of those -> var-length features. A column that holds nulls becomes a
var-length feature (a null is an empty list) so no readable value is invented;
the image and label columns are required instead: a null there makes a bad row.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tfpipe.convert._plan import Item
from tfpipe.convert._source import (IMAGE_KEYS, Enumeration, Source, file_size,
                                    image_values, read_image)
from tfpipe.records import FeatureSpec, Schema, classification_schema
from tfpipe.errors import InputError


def _read_table(path: Path, fmt: str) -> Any:
    import pyarrow as pa

    try:
        if fmt == "csv":
            import pyarrow.csv as pacsv

            return pacsv.read_csv(path)
        import pyarrow.parquet as pq

        return pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path}: cannot read as {fmt}: {exc}") from None


def _feature_type(name: str, arrow_type: Any) -> tuple[str, str, list[int] | None]:
    """(dtype, kind, shape) of a column; kind 'var' for lists."""
    import pyarrow as pa

    t = arrow_type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        inner, _, _ = _feature_type(name, t.value_type)
        if pa.types.is_fixed_size_list(t):
            return inner, "fixed", [t.list_size]
        return inner, "var", None
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return "int64", "fixed", []
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "float32", "fixed", []
    if (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_temporal(t) or pa.types.is_null(t)):
        return "string", "fixed", []
    raise InputError(f"column {name!r}: type {arrow_type} is not supported "
                     "(use integers, floats, booleans, strings, binary, dates or lists of them)")


def _to_feature(value: Any, dtype: str) -> Any:
    """A Python value from Arrow -> what encode_example takes for that dtype."""
    if isinstance(value, (list, tuple)):
        return [_to_feature(v, dtype) for v in value]
    if dtype == "string":
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            return value.encode()
        return (value.isoformat() if hasattr(value, "isoformat") else str(value)).encode()
    if dtype == "int64":
        return int(value)
    return float(value)


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def _approx_size(value: Any) -> int:
    if isinstance(value, (bytes, str)):
        return len(value)
    if isinstance(value, (list, tuple)):
        return sum(_approx_size(v) for v in value)
    return 8


class TableSource(Source):
    """Rows of a CSV or Parquet file; `image_column` paths are embedded as image/encoded."""

    def __init__(self, path: str | os.PathLike[str], fmt: str, *,
                 image_column: str | None = None, label_column: str | None = None) -> None:
        self.kind = fmt
        self.path = str(Path(path).resolve())
        self.display = Path(path).name
        self.image_column = image_column
        self.label_column = label_column
        table = _read_table(Path(self.path), fmt)
        self.columns: list[str] = list(table.column_names)
        self.arrow_schema = table.schema  # statistics read the file with these types
        self.num_rows = table.num_rows
        for role, column in (("image_column", image_column), ("label_column", label_column)):
            if column is not None and column not in self.columns:
                raise InputError(f"{self.display}: {role} {column!r} is not a column; "
                                 f"columns are {', '.join(self.columns)}")
        if image_column is not None:
            clash = sorted(set(self.columns) & set(classification_schema()))
            if clash:
                raise InputError(f"{self.display}: column(s) {', '.join(clash)} clash with "
                                 "the image keys that --image-column adds; rename them")
        self._specs: list[FeatureSpec] = []
        self._dtypes: dict[str, str] = {}
        for name, field in zip(table.column_names, table.schema):
            dtype, kind, shape = _feature_type(name, field.type)
            column = table.column(name)
            required = name in (image_column, label_column)
            if required and kind != "fixed":
                raise InputError(f"{self.display}: column {name!r} must hold one value per row")
            if column.null_count and not required and kind == "fixed":
                # A null cannot be a fixed scalar; var-length keeps the row and the
                # absence (an empty list) readable instead of inventing a value.
                kind, shape = "var", None
            self._dtypes[name] = dtype
            self._specs.append(FeatureSpec(name, dtype, shape or [], kind))
        self._rows: list[dict[str, Any]] = table.to_pylist()
        self.class_names = self._class_names()

    def _class_names(self) -> list[str] | None:
        if self.label_column is None:
            return None
        values = {row[self.label_column] for row in self._rows
                  if row[self.label_column] is not None}
        if self._dtypes[self.label_column] == "string":
            return sorted(_to_feature(v, "string").decode("utf-8", "replace") for v in values)
        if self._dtypes[self.label_column] == "int64":
            ints = [int(v) for v in values]
            if ints and min(ints) < 0:
                raise InputError(f"{self.display}: label column {self.label_column!r} "
                                 f"holds negative labels (min {min(ints)})")
            return [str(i) for i in range(max(ints) + 1)] if ints else []
        raise InputError(f"{self.display}: label column {self.label_column!r} must hold "
                         "integers or strings")

    def _name(self, index: int) -> str:
        return f"{self.display} row {index}"

    def enumerate(self) -> Enumeration:
        out = Enumeration()
        base = Path(self.path).parent
        for index, row in enumerate(self._rows):
            item_name = self._name(index)
            missing = [c for c in (self.image_column, self.label_column)
                       if c is not None and row[c] is None]
            if missing:
                out.bad.append((Item(f"row:{index}", 0, None, item_name),
                                f"null in required column {missing[0]!r}"))
                continue
            size = sum(_approx_size(v) for v in row.values() if v is not None)
            if self.image_column is not None:
                rel = _text(_to_feature(row[self.image_column], "string"))
                fsize = file_size(base / rel)
                if fsize is None:
                    out.bad.append((Item(f"row:{index}", 0, None, item_name),
                                    f"image file not found: {rel}"))
                    continue
                size += fsize
                item_name = f"{item_name} ({rel})"
            # The payload is the row in feature form (bytes, ints, floats, lists):
            # it travels to the worker and hashes into the plan, so --resume notices
            # an edited table.
            payload = {name: (None if row[name] is None
                              else _to_feature(row[name], self._dtypes[name]))
                       for name in self.columns}
            out.items.append(Item(f"row:{index}", size, [index, payload], item_name))
        return out

    def __getstate__(self) -> dict[str, Any]:
        # Workers get rows through the shard plan, not a copy of the whole table.
        state = dict(self.__dict__)
        state["_rows"] = []
        return state

    def schema(self) -> Schema:
        specs = list(self._specs)
        if self.image_column is not None:
            standard = classification_schema()
            keys = list(IMAGE_KEYS)
            if self.label_column is not None:
                keys += ["image/class/label", "image/class/text"]
            specs += [standard[k] for k in keys]
        return Schema(specs)

    def settings(self) -> dict[str, Any]:
        return {"format": self.kind, "image_column": self.image_column,
                "label_column": self.label_column}

    def encode_values(self, item: Item) -> tuple[dict[str, Any], dict[str, int]]:
        index, row = item.payload
        values: dict[str, Any] = {}
        for spec in self._specs:
            values[spec.name] = [] if row[spec.name] is None else row[spec.name]
        if self.image_column is not None:
            rel = _text(_to_feature(row[self.image_column], "string"))
            data, info = read_image(Path(self.path).parent / rel)
            values.update(image_values(data, info, rel, f"row:{index}"))
            if self.label_column is not None:
                label = row[self.label_column]
                if self._dtypes[self.label_column] == "string":
                    text = label
                    values["image/class/label"] = self.class_names.index(
                        text.decode("utf-8", "replace"))
                else:
                    values["image/class/label"] = int(label)
                    text = str(int(label)).encode()
                values["image/class/text"] = text
        return values, {}
