"""Stage-by-stage bottleneck report.

`tfpipe.pipeline.build_stages` returns the pipeline cut after each stage, in
`tfpipe.pipeline.STAGES` order (read, parse, decode, geometry, batch, pixel,
compose): prefix k holds stages 1..k. Measuring every prefix gives a
per-element time t_k; the cost of stage k is estimated as t_k - t_{k-1}.
"End to end" is measured separately on `build_pipeline` itself (its
`tf.data.Options` and prefetch included): what a training loop gets.

This is an approximation: stages run in parallel (parallel maps, prefetch), so
a prefix's time is that of its slowest part rather than the sum of its parts,
and a cheap stage behind an expensive one can look free. The increments are
clamped at 0 and shares are of their sum. The ranking is what to act on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tfpipe.bench._measure import Result, measure

# The prefix named "batch" and every prefix after it yield batches; the ones
# before it single elements. Decided by position, so a stage order with the
# batched pixel stage after `batch` (or an older one with it before) is read right.
BATCH_STAGE = "batch"


@dataclass(frozen=True)
class Stage:
    name: str
    result: Result
    elements_per_s: float
    us_per_element: float     # 1e6 / elements_per_s of this prefix
    added_us: float           # max(0, this prefix - previous prefix), per element
    share: float              # added_us / sum(added_us)
    batched: bool = False     # the prefix yields batches (elements = batch rows)


@dataclass
class StageReport:
    stages: list[Stage] = field(default_factory=list)
    end_to_end: Result | None = None   # build_pipeline itself, when measured

    @property
    def slowest(self) -> Stage:
        return max(self.stages, key=lambda s: s.added_us)

    def summary(self) -> str:
        s = self.slowest
        if self.end_to_end is not None:
            e2e = f"end to end (build_pipeline) {self.end_to_end.elements_per_s:,.1f} elements/s"
        else:
            last = self.stages[-1]
            e2e = f"last prefix ({last.name}) {last.elements_per_s:,.1f} elements/s"
        return (f"slowest stage: {s.name} (~{s.share:.0%} of the per-element time, "
                f"+{s.added_us:,.0f} us/element); {e2e}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "stages": [{"name": s.name, "elements_per_s": s.elements_per_s,
                        "us_per_element": s.us_per_element, "added_us": s.added_us,
                        "share": s.share, "batched": s.batched,
                        "elements": s.result.elements} for s in self.stages],
            "end_to_end": None if self.end_to_end is None else self.end_to_end.to_dict(),
            "slowest": self.slowest.name,
            "summary": self.summary(),
        }


def report_from_datasets(stages: Sequence[tuple[str, Any]], *, steps: int = 20,
                         warmup: int = 3, batch_size: int | None = None,
                         end_to_end: Any = None, rounds: int = 1) -> StageReport:
    """Measure each (name, prefix dataset) for `steps` batches' worth of elements.

    Prefixes before the one named "batch" yield single elements: they are followed
    by a map to a constant and a batch of `batch_size`, so Python's per-`next()`
    overhead is paid per batch as for the full pipeline (tf.data runs every
    upstream map whether or not its output is used). "batch" and every later
    prefix are measured as batches. Every prefix is repeated
    (`measure(repeat=True)`). `end_to_end`, when given, is the full pipeline as
    the user gets it, measured the same way and reported apart from the shares.

    `rounds` > 1 measures every prefix (and end to end) once per round, in turn,
    and keeps each one's fastest round: on a shared machine a prefix measured
    while another process ran looks slower than it is, and since every later
    prefix contains the slow stage, such a hiccup would otherwise show up as a
    large increment of a cheap stage.
    """
    import tensorflow as tf

    if not stages:
        raise ValueError("no stages to measure")
    names = [name.split(":")[0] for name, _ in stages]
    first_batched = names.index(BATCH_STAGE) if BATCH_STAGE in names else len(names)
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    prepared = []
    for k, (name, ds) in enumerate(stages):
        batched = k >= first_batched
        if not batched:
            ds = ds.map(lambda *e: tf.zeros([], tf.int8)).batch(batch_size or 1)
        prepared.append((name, ds, batched))
    if end_to_end is not None:
        prepared.append(("", end_to_end, True))
    best: list[Result | None] = [None] * len(prepared)
    for _ in range(rounds):
        for i, (_, ds, _) in enumerate(prepared):
            r = measure(ds, warmup=warmup, steps=steps, batched=True)
            if best[i] is None or r.elements_per_s > best[i].elements_per_s:
                best[i] = r
    out = StageReport()
    if end_to_end is not None:
        out.end_to_end = best.pop()
        prepared.pop()
    measured = [(name, r, batched) for (name, _, batched), r in zip(prepared, best)]
    prev_us = 0.0
    per_el = [1e6 / max(r.elements_per_s, 1e-9) for _, r, _ in measured]
    added = []
    for us in per_el:
        added.append(max(0.0, us - prev_us))
        prev_us = us
    total = sum(added) or 1.0
    for (name, r, batched), us, add in zip(measured, per_el, added):
        out.stages.append(Stage(name, r, r.elements_per_s, us, add, add / total, batched))
    return out


def stage_report(config: Any, steps: int = 20, *, warmup: int = 3,
                 overrides: Sequence[str] = (), split: str = "train", epoch: int = 0,
                 rounds: int = 2) -> StageReport:
    """Throughput of each prefix of the `config` pipeline and of `build_pipeline`
    itself; names the slowest stage.

    Every prefix runs under the pipeline's own `tf.data.Options` (private thread
    pool, determinism, autotune budget: `tfpipe.pipeline.options`), so the
    prefixes and the end-to-end figure share one threading set-up. Each is
    measured `rounds` times, in turn, and its fastest round kept.
    """
    from tfpipe.bench._build import resolve_config
    from tfpipe.pipeline import build_pipeline, build_stages, options, settings

    cfg = resolve_config(config, overrides)
    s = settings(cfg)
    opts = options(s)
    if s.features is not None:  # a table: read, batch, parse, transforms (bench/_tabular.py)
        from tfpipe.bench import _tabular

        stages = _tabular.stages(cfg, split)
    else:
        stages = [(name, ds.with_options(opts))
                  for name, ds in build_stages(cfg, split=split, epoch=epoch)]
    e2e = build_pipeline(cfg, split=split, epoch=epoch)
    return report_from_datasets(stages, steps=steps, warmup=warmup, batch_size=s.batch_size,
                                end_to_end=e2e, rounds=rounds)
