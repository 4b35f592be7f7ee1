"""The packed table layout (docs/tabular.md, "Packed layout"): one record holds a
block of up to N consecutive rows of a shard, column by column.

Keys of a packed record: every column under its own name as the list of the block's
values in row order (a null stored as the column's fill value: 0 or b""); for a
nullable column, `tfpipe/missing/<column>`: the block-relative indexes of its null
rows; `tfpipe/rows`: the block's row count. The manifest's schema is that of the
records (every column var-length); `row_schema` gives back the schema of one row.
"""

from __future__ import annotations

from typing import Any

from tfpipe.records.schema import VERSION_KEY, FeatureSpec, Schema

ROWS_KEY = "tfpipe/rows"
MISSING_PREFIX = "tfpipe/missing/"


def missing_key(column: str) -> str:
    return MISSING_PREFIX + column


def packed_schema(rows: Schema) -> Schema:
    """The record schema of the packed layout for the row schema `rows` (scalar
    columns only: the caller refuses list columns, naming them)."""
    specs = []
    for name, spec in rows.items():
        if name == VERSION_KEY:
            continue
        specs.append(FeatureSpec(name, spec.dtype, [], "var", encoding=spec.encoding))
        if spec.kind == "var":
            specs.append(FeatureSpec(missing_key(name), "int64", [], "var"))
    specs.append(FeatureSpec(ROWS_KEY, "int64", [], "fixed"))
    return Schema(specs)


def is_packed(schema: Any) -> bool:
    return ROWS_KEY in schema


def row_schema(schema: Schema) -> Schema:
    """The schema of one row of a packed layout (a column with a missing list is
    nullable: var-length, as the row layout stores it); a row schema unchanged."""
    if not is_packed(schema):
        return schema
    specs = []
    for name, spec in schema.items():
        if name in (VERSION_KEY, ROWS_KEY) or name.startswith(MISSING_PREFIX):
            continue
        kind = "var" if missing_key(name) in schema else "fixed"
        specs.append(FeatureSpec(name, spec.dtype, [], kind, encoding=spec.encoding))
    return Schema(specs)


def shard_rows(manifest: Any, split: str) -> dict[str, int]:
    """Rows per shard file name of a packed split (the manifest's shard_stats), {}
    when the manifest does not record them."""
    stats = (manifest.settings or {}).get("shard_stats") or {}
    return {s.path: int(stats[s.path]["rows"]) for s in manifest.splits[split].shards
            if s.path in stats and "rows" in stats[s.path]}
