"""Measure input pipelines: throughput, stage bottlenecks, sweeps, input-boundness.

`measure(dataset)` works on any `tf.data.Dataset`; the rest builds pipelines from a
tfpipe config. `tfpipe.bench.baselines` holds deliberately slow reference pipelines
(Python inside `tf.py_function`, ...) to compare against; `tfpipe.bench.check` the
pre-flight checklist behind `tfpipe check`.
"""

from __future__ import annotations

from tfpipe.bench._compare import BaselineComparison, compare_naive, write_result_csv
from tfpipe.bench._build import build_from, resolve_config
from tfpipe.bench._measure import Result, element_nbytes, measure
from tfpipe.bench._sweep import (CSV_METRICS, SweepResult, SweepRow, grid_points,
                                 parse_sweep_option, sweep, sweep_builder)

__all__ = ["Result", "measure", "element_nbytes", "SweepResult", "SweepRow", "CSV_METRICS",
           "BaselineComparison", "compare_naive", "write_result_csv",
           "grid_points", "parse_sweep_option", "sweep", "sweep_builder",
           "stage_report", "StageReport", "input_bound", "InputBoundResult",
           "trace_to_tensorboard", "write_scalars", "build_from", "resolve_config"]


def __getattr__(name: str):  # lazy: these pull in the pipeline / Keras
    if name in ("stage_report", "StageReport"):
        from tfpipe.bench import _stages

        return getattr(_stages, name)
    if name in ("input_bound", "InputBoundResult"):
        from tfpipe.bench import _input_bound

        return getattr(_input_bound, name)
    if name in ("trace_to_tensorboard", "write_scalars"):
        from tfpipe.bench import _tensorboard

        return getattr(_tensorboard, name)
    raise AttributeError(f"module 'tfpipe.bench' has no attribute {name!r}")
