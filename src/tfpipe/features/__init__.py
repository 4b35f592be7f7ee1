"""Tabular features: statistics at conversion, feature transforms built from them, drift.

Statistics (`compute_statistics`, `Statistics`, `read_statistics`) use pyarrow and
NumPy only. See docs/tabular.md.
"""

from __future__ import annotations

from tfpipe.features._compute import TableAccumulator, column_dtype, compute_statistics
from tfpipe.features._stats import (STATISTICS_FILE, STATISTICS_VERSION, CategoricalStats,
                                    ColumnStats, NumericStats, Statistics)
from tfpipe.features._stats_io import read_statistics, write_statistics
from tfpipe.features.synthetic import CATEGORIES, ctr_batches, ctr_schema, ctr_table, make_ctr_table

__all__ = ["TableAccumulator", "column_dtype", "compute_statistics", "STATISTICS_FILE", "STATISTICS_VERSION", "CategoricalStats", "ColumnStats",
           "NumericStats", "Statistics", "read_statistics", "write_statistics",
           # synthetic CTR table
           "CATEGORIES", "ctr_batches", "ctr_schema", "ctr_table", "make_ctr_table"]
