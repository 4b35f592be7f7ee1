"""`check(dataset)`: run every rule over a dataset's graph."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import tensorflow as tf

from tfpipe.doctor import _rules, _tabular_rules  # noqa: F401  (registers the rules)
from tfpipe.doctor._core import RULES, SEVERITY_RANK, Context, Finding
from tfpipe.doctor._graph import PipelineGraph


def _host_cpus() -> int:
    # TF sizes its inter-op/runner pools from the schedulable cores it sees
    # (affinity mask), not from a cgroup CPU quota.
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check(dataset: tf.data.Dataset, *, batch_size_hint: int | None = None,
          ram_budget_bytes: int | None = None, cpus: int | None = None,
          ignore: Iterable[str] = (), host_cpus: int | None = None,
          locations: Mapping[str, str] | None = None, config: Any = None) -> list[Finding]:
    """Find known tf.data anti-patterns in `dataset` (any `tf.data.Dataset`).

    Reads the dataset's serialized graph; nothing is iterated. Findings come
    most severe first, then in pipeline order.

    batch_size_hint: the batch size when batching happens outside the dataset.
    ram_budget_bytes: what an in-memory cache may use; default the dataset's
        Options.autotune.ram_budget, else half of `tfpipe.system.available_memory_bytes()`.
    cpus: CPUs this process may use; default `tfpipe.system.available_cpus()`.
    host_cpus: CPUs TensorFlow sizes its thread pools from; default the affinity mask.
    ignore: rule ids to silence.
    config: the tfpipe config `dataset` was built from; a tabular one (a `features:`
        section) also gets the tabular rules, which read its statistics.
    locations: function name -> "file:line", to point findings at the source.
        A stateful random op built in this process is located at its own call
        (`file:line` from the op's traceback) whether or not this is given.
    """
    from tfpipe import system

    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"doctor.check needs a tf.data.Dataset, got {type(dataset).__name__}")
    unknown = sorted(set(ignore) - set(RULES))
    if unknown:
        raise ValueError(f"unknown doctor rule id(s) {unknown}; known: {sorted(RULES)}")
    from tfpipe.pipeline import one_epoch_view

    # a tfpipe train dataset runs each epoch inside a flat_map; read the epoch itself
    dataset = one_epoch_view(dataset) or dataset
    options = dataset.options()
    if ram_budget_bytes is None:
        ram_budget_bytes = options.autotune.ram_budget or system.available_memory_bytes() // 2
    graph, unreadable = _readable_graph(dataset)
    from tfpipe.doctor import _ops
    from tfpipe.doctor._sources import op_call_sites

    ctx = Context(
        sites=op_call_sites(dataset, _ops.STATEFUL_RANDOM_OPS),
        graph=graph,
        unreadable=unreadable,
        options=options,
        batch_size_hint=batch_size_hint,
        ram_budget_bytes=int(ram_budget_bytes),
        cpus=int(cpus or system.available_cpus()),
        host_cpus=int(host_cpus or _host_cpus()),
        locations=dict(locations or {}),
        tabular=_tabular_source(config),
    )
    skip = set(ignore)
    findings: list[Finding] = []
    for rule_id, spec in RULES.items():
        if rule_id not in skip:
            findings.extend(spec.check(ctx))
    order = {n.label: i for i, n in enumerate(ctx.graph.chain)}
    findings.sort(key=lambda f: (-SEVERITY_RANK[f.severity], order.get(f.op, len(order)), f.rule))
    return _dedupe(findings)


def _tabular_source(config: Any) -> Any:
    if config is None or getattr(config, "features", None) is None:
        return None
    from tfpipe.pipeline import tabular_source

    return tabular_source(config)


def _readable_graph(dataset: tf.data.Dataset) -> tuple[PipelineGraph, list[str]]:
    """The graph of `dataset`, or of the longest prefix of it that tf.data can serialize.

    A few transformations (prefetch_to_device, copy_to_device, some experimental
    ones) refuse serialization; doctor then checks what comes before them.
    """
    skipped: list[str] = []
    current = dataset
    while True:
        try:
            return PipelineGraph.from_dataset(current), skipped
        except (tf.errors.OpError, ValueError) as exc:
            inputs = current._inputs() if hasattr(current, "_inputs") else []  # noqa: SLF001
            if not inputs:
                raise ValueError(
                    f"tf.data cannot serialize this dataset's graph, so doctor cannot read it: "
                    f"{exc}") from exc
            skipped.append(type(current).__name__.lstrip("_"))
            current = inputs[0]


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple] = set()
    out = []
    for f in findings:
        key = (f.rule, f.op, f.function, f.call_path, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def check_config(config: Any, split: str = "train", **kwargs: Any) -> list[Finding]:
    """Build `tfpipe.build_pipeline(config, split)` and check it.

    `config` is whatever build_pipeline takes (a loaded config, preset name or
    YAML path resolved by `tfpipe.load_config` first when it is a string).
    """
    from tfpipe.pipeline import build_pipeline

    if isinstance(config, (str, Path)):
        from tfpipe.config import load_config

        config = load_config(str(config))
    if kwargs.get("batch_size_hint") is None:
        try:
            kwargs["batch_size_hint"] = int(config.pipeline.batch_size)
        except (AttributeError, TypeError, ValueError):
            kwargs.pop("batch_size_hint", None)
    return check(build_pipeline(config, split=split), config=config, **kwargs)


def worst(findings: Iterable[Finding]) -> str | None:
    """The highest severity among `findings` (None when there are none)."""
    ranked = sorted(findings, key=lambda f: -SEVERITY_RANK[f.severity])
    return ranked[0].severity if ranked else None


def locate_functions(source: str | os.PathLike[str]) -> dict[str, str]:
    """Function name -> "file:line" for every def in a Python file (methods as Cls.meth too).

    Parses the file, never imports it. A name defined twice maps to its first
    definition; lambdas are not listed (tf.data names them all "lambda").
    """
    path = Path(source)
    tree = ast.parse(path.read_text(), filename=str(path))
    found: dict[str, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                where = f"{path}:{child.lineno}"
                found.setdefault(child.name, where)
                if prefix:
                    found.setdefault(f"{prefix}.{child.name}", where)
                visit(child, "")
            elif isinstance(child, ast.ClassDef):
                visit(child, child.name)
            else:
                visit(child, prefix)

    visit(tree, "")
    return found
