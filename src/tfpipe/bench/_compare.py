"""tfpipe against the naive baseline, in alternating rounds; one result as CSV."""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfpipe.bench._measure import Result, measure
from tfpipe.bench._sweep import CSV_METRICS


@dataclass
class BaselineComparison:
    """Rounds of (tfpipe, naive) measured back to back; round i pairs ours[i] with
    theirs[i], so machine drift hits both sides of a ratio alike."""

    ours: list[Result]
    theirs: list[Result]
    not_reproduced: list[str] = field(default_factory=list)
    kind: str = "naive"
    label: str = "naive: cv2 in py_function"  # the baseline's row name in a table

    @property
    def best(self) -> Result:
        return max(self.ours, key=lambda r: r.elements_per_s)

    @property
    def baseline_best(self) -> Result:
        return max(self.theirs, key=lambda r: r.elements_per_s)

    @property
    def speedup_range(self) -> tuple[float, float]:
        """(lowest, highest) per-round ratio of tfpipe's to the baseline's elements/s."""
        ratios = [o.elements_per_s / max(t.elements_per_s, 1e-12)
                  for o, t in zip(self.ours, self.theirs)]
        return min(ratios), max(ratios)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "result": self.baseline_best.to_dict(),
                "speedup_range": list(self.speedup_range), "rounds": len(self.ours),
                "not_reproduced": list(self.not_reproduced)}


def compare_naive(config: Any, overrides: Sequence[str] = (), *, split: str = "train",
                  steps: int = 20, warmup: int = 3, rounds: int = 2,
                  first: Result | None = None,
                  progress: Callable[[str], None] | None = None) -> BaselineComparison:
    """Measure `config`'s pipeline and the naive baseline (cv2 in tf.py_function,
    reading the same shards) alternately for `rounds` rounds.

    `first`: a measurement of tfpipe's pipeline already made with the same
    steps/warm-up, used as round 1's tfpipe side (it was measured just before).
    """
    from tfpipe.bench._build import build_from, resolve_config
    from tfpipe.bench.baselines import naive_from_config

    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    cfg = resolve_config(config, list(overrides))
    from tfpipe.pipeline import settings

    if settings(cfg).features is not None:  # a table: per-record parse (bench/_tabular.py)
        from tfpipe.bench import _tabular

        naive, not_reproduced, label = _tabular.naive(cfg, split), [], _tabular.LABEL_NAIVE
    else:
        naive, spec = naive_from_config(cfg, split=split)
        not_reproduced, label = list(spec.not_reproduced), BaselineComparison.label
    ours: list[Result] = []
    theirs: list[Result] = []
    for i in range(rounds):
        if progress:
            progress(f"round {i + 1}/{rounds}: tfpipe, then naive")
        ours.append(first if i == 0 and first is not None else
                    measure(build_from(cfg, split=split), warmup=warmup, steps=steps))
        theirs.append(measure(naive, warmup=warmup, steps=steps))
    return BaselineComparison(ours, theirs, not_reproduced, label=label)


def write_result_csv(path: str | Path, result: Result) -> Path:
    """One measurement as a CSV row under the CSV_METRICS header (as a sweep's columns)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    d = result.to_dict()
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_METRICS)
        w.writeheader()
        w.writerow({k: d[k] for k in CSV_METRICS})
    return p
