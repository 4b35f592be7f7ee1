"""Tabular features: statistics at conversion, feature transforms built from them, drift.

Statistics (`compute_statistics`, `Statistics`, `read_statistics`) use pyarrow and
NumPy only. See docs/tabular.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from tfpipe.features._compute import TableAccumulator, column_dtype, compute_statistics
from tfpipe.features._drift import (ColumnDrift, DriftReport, DriftThresholds, TransformHealth,
                                    drift, js_divergence, load_drift_config, psi)
from tfpipe.features._stats import (STATISTICS_FILE, STATISTICS_VERSION, CategoricalStats,
                                    ColumnStats, NumericStats, Statistics)
from tfpipe.features._stats_io import read_statistics, write_statistics
from tfpipe.features.synthetic import CATEGORIES, ctr_batches, ctr_schema, ctr_table, make_ctr_table
# transforms: TransformSpec needs no TensorFlow; the layers load on first use
from tfpipe.features._spec import (INDICATOR_SUFFIX, KINDS, MISSING_SUFFIX, TIME_PARTS,
                                   TransformSpec)

_LAZY: dict[str, tuple[str, str]] = {
    n: ("tfpipe.features._transforms", n) for n in (
        "FeatureTransforms", "OutputInfo", "PARAMS", "build_transforms", "log1p_f32")
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'tfpipe.features' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


__all__ = ["TableAccumulator", "column_dtype", "compute_statistics", "STATISTICS_FILE", "STATISTICS_VERSION", "CategoricalStats", "ColumnStats",
           "NumericStats", "Statistics", "read_statistics", "write_statistics",
           # drift
           "ColumnDrift", "DriftReport", "DriftThresholds", "TransformHealth", "drift",
           "js_divergence", "load_drift_config", "psi",
           # synthetic CTR table
           "CATEGORIES", "ctr_batches", "ctr_schema", "ctr_table", "make_ctr_table",
           # transforms
           "INDICATOR_SUFFIX", "KINDS", "MISSING_SUFFIX", "TIME_PARTS", "FeatureTransforms",
           "OutputInfo", "PARAMS", "TransformSpec", "build_transforms", "log1p_f32"]
