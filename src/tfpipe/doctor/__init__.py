"""Find known anti-patterns in any `tf.data.Dataset` by reading its graph.

    from tfpipe import doctor
    for f in doctor.check(ds):
        print(f.severity, f.rule, f.function, f.message)

Rules are listed in `RULES` (id -> Rule) and documented in docs/doctor.md;
silence one with `check(ds, ignore=["rule-id"])`.
"""

from tfpipe.doctor._check import check, check_config, locate_functions, worst
from tfpipe.doctor._core import RULES, SEVERITY_RANK, Finding, Rule
from tfpipe.doctor._graph import PipelineGraph, function_display_name
from tfpipe.doctor._tabular_rules import TABULAR_RULES
from tfpipe.doctor._target import TargetError, load_target

__all__ = [
    "RULES", "SEVERITY_RANK", "TABULAR_RULES", "Finding", "PipelineGraph", "Rule",
    "TargetError", "check",
    "check_config", "function_display_name", "load_target", "locate_functions", "worst",
]
