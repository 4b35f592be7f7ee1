"""Stage-by-stage bottleneck report.

`tfpipe.pipeline.build_stages` returns the pipeline cut after each stage
(read, parse, decode, geometry, batch, pixel, compose): prefix k holds stages
1..k. Measuring every prefix gives a per-element time t_k; the cost of stage k
is estimated as t_k - t_{k-1}.

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

# Prefixes that end after `batch` yield batches; the earlier ones single elements.
_BATCHED_STAGES = ("batch", "pixel", "compose")


@dataclass(frozen=True)
class Stage:
    name: str
    result: Result
    elements_per_s: float
    us_per_element: float     # 1e6 / elements_per_s of this prefix
    added_us: float           # max(0, this prefix - previous prefix), per element
    share: float              # added_us / sum(added_us)


@dataclass
class StageReport:
    stages: list[Stage] = field(default_factory=list)

    @property
    def slowest(self) -> Stage:
        return max(self.stages, key=lambda s: s.added_us)

    def summary(self) -> str:
        s = self.slowest
        return (f"slowest stage: {s.name} (~{s.share:.0%} of the per-element time, "
                f"+{s.added_us:,.0f} us/element); end to end "
                f"{self.stages[-1].elements_per_s:,.1f} elements/s")

    def to_dict(self) -> dict[str, Any]:
        return {
            "stages": [{"name": s.name, "elements_per_s": s.elements_per_s,
                        "us_per_element": s.us_per_element, "added_us": s.added_us,
                        "share": s.share} for s in self.stages],
            "slowest": self.slowest.name,
            "summary": self.summary(),
        }


def report_from_datasets(stages: Sequence[tuple[str, Any]], *, steps: int = 20,
                         warmup: int = 3, batch_size: int | None = None) -> StageReport:
    """Measure each (name, prefix dataset) for `steps` batches' worth of elements.

    Unbatched prefixes are followed by a map to a constant and a batch of
    `batch_size`, so Python's per-`next()` overhead is paid per batch as for the
    full pipeline (tf.data runs every upstream map whether or not its output is
    used). Every prefix is repeated (`measure(repeat=True)`).
    """
    import tensorflow as tf

    if not stages:
        raise ValueError("no stages to measure")
    measured: list[tuple[str, Result]] = []
    for name, ds in stages:
        batched = name.split(":")[0] in _BATCHED_STAGES
        if not batched:
            ds = ds.map(lambda *e: tf.zeros([], tf.int8)).batch(batch_size or 1)
        r = measure(ds, warmup=warmup, steps=steps, batched=True)
        measured.append((name, r))
    out = StageReport()
    prev_us = 0.0
    per_el = [1e6 / max(r.elements_per_s, 1e-9) for _, r in measured]
    added = []
    for us in per_el:
        added.append(max(0.0, us - prev_us))
        prev_us = us
    total = sum(added) or 1.0
    for (name, r), us, add in zip(measured, per_el, added):
        out.stages.append(Stage(name, r, r.elements_per_s, us, add, add / total))
    return out


def stage_report(config: Any, steps: int = 20, *, warmup: int = 3,
                 overrides: Sequence[str] = (), split: str = "train", epoch: int = 0) -> StageReport:
    """Throughput of each prefix of the `config` pipeline; names the slowest stage."""
    from tfpipe.bench._build import resolve_config
    from tfpipe.pipeline import build_stages

    cfg = resolve_config(config, overrides)
    stages = build_stages(cfg, split=split, epoch=epoch)
    from tfpipe.pipeline import settings

    batch_size = settings(cfg).batch_size
    return report_from_datasets(stages, steps=steps, warmup=warmup, batch_size=batch_size)
