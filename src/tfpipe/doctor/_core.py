"""Findings, the rule table and the context every rule reads."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from tfpipe.doctor._graph import DatasetNode, PipelineGraph

Severity = Literal["error", "warning", "info"]
SEVERITY_RANK: dict[str, int] = {"error": 2, "warning": 1, "info": 0}


@dataclass(frozen=True)
class Finding:
    """One anti-pattern found in a pipeline."""

    rule: str                 # stable id, e.g. "python-in-map"; pass it to `ignore` to silence
    severity: Severity
    op: str                   # dataset op, e.g. "ParallelMapDatasetV2 'ParallelMapDatasetV2/_8'"
    function: str | None      # user function's Python name ("my_augment"), when one is involved
    location: str | None      # "file.py:line" of that function, when the target's source is known
    message: str              # what was found and why it matters
    fix: str                  # what to do instead (the tfpipe equivalent where there is one)
    call_path: tuple[str, ...] = ()  # map fn -> helper -> ... where the op actually sits

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["call_path"] = list(self.call_path)
        return d


@dataclass
class Context:
    """What a rule may read: the graph, the dataset's Options and the machine limits."""

    graph: PipelineGraph
    options: Any                      # tf.data.Options of the checked dataset
    batch_size_hint: int | None
    ram_budget_bytes: int
    cpus: int                         # CPUs this process may use (cgroup-aware)
    host_cpus: int                    # CPUs TensorFlow sizes its own pools from
    locations: Mapping[str, str] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)  # outermost transformations not serializable
    # (library function, node) -> the user's line that created the op (`_sources.py`)
    sites: Mapping[tuple[str, str], Any] = field(default_factory=dict)
    # a tabular config's statistics and transform specs (tfpipe.pipeline.TabularSource),
    # None for anything else: the tabular rules read it (doctor/_tabular_rules.py)
    tabular: Any = None
    _ops_cache: dict[str, list] = field(default_factory=dict)

    def function_ops(self, library_name: str) -> list:
        if library_name not in self._ops_cache:
            self._ops_cache[library_name] = self.graph.function_ops(library_name)
        return self._ops_cache[library_name]

    def finding(self, rule: str, node: DatasetNode | None, message: str, fix: str, *,
                function: str | None = None, call_path: tuple[str, ...] = (),
                severity: Severity | None = None, location: str | None = None) -> Finding:
        """`location`: the op's own call site when known; else the def line of the
        innermost function of `call_path` (or of `function`) from `locations`."""
        spec = RULES[rule]
        for name in (call_path[-1] if call_path else None, function):
            if location is None and name and name in self.locations:
                location = self.locations[name]
                break
        return Finding(
            rule=rule,
            severity=severity or spec.severity,
            op=node.label if node is not None else "(pipeline)",
            function=function,
            location=location,
            message=message,
            fix=fix,
            call_path=tuple(call_path),
        )


RuleFn = Callable[[Context], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity        # default severity; a finding may state another one
    title: str
    check: RuleFn


RULES: dict[str, Rule] = {}


def rule(rule_id: str, severity: Severity, title: str) -> Callable[[RuleFn], RuleFn]:
    """Register a rule: one function and one entry here is all a new rule needs."""

    def register(fn: RuleFn) -> RuleFn:
        if rule_id in RULES:
            raise ValueError(f"duplicate doctor rule id {rule_id!r}")
        RULES[rule_id] = Rule(rule_id, severity, title, fn)
        return fn

    return register
