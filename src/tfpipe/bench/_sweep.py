"""Parameter sweeps: build one pipeline per setting, measure all in one process.

Every point of the grid is measured `repeats` times, in rounds (all points once,
then all points again), so slow drift of a shared machine spreads over every
point instead of penalising the last ones. The row reports the median and the
range over the repeats; the recommendation says when the best point's range
overlaps the runner-up's, i.e. the difference is within noise.
"""

from __future__ import annotations

import csv
import itertools
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfpipe.bench._measure import Result, measure

#: Metric columns written after the swept keys (fixed order), then the spread.
CSV_METRICS = ["elements_per_s", "batches_per_s", "mb_per_s", "p50_ms", "p90_ms",
               "peak_rss_mb", "cpu_util"]
CSV_SPREAD = ["elements_per_s_min", "elements_per_s_max", "repeats"]


@dataclass
class SweepRow:
    """One setting of the swept keys and its measurements over the repeats."""

    setting: dict[str, Any]
    results: list[Result]

    def _median(self, attr: str) -> float:
        return float(statistics.median(getattr(r, attr) for r in self.results))

    @property
    def elements_per_s(self) -> float:
        return self._median("elements_per_s")

    @property
    def spread(self) -> tuple[float, float]:
        values = [r.elements_per_s for r in self.results]
        return min(values), max(values)

    def as_row(self) -> dict[str, Any]:
        row: dict[str, Any] = dict(self.setting)
        for name in CSV_METRICS:
            row[name] = self._median(name)
        row["elements_per_s_min"], row["elements_per_s_max"] = self.spread
        row["repeats"] = len(self.results)
        return row


@dataclass
class SweepResult:
    keys: list[str]
    rows: list[SweepRow] = field(default_factory=list)

    def best(self) -> SweepRow:
        return max(self.rows, key=lambda r: r.elements_per_s)

    def recommendation(self) -> str:
        """The fastest setting, and whether it is distinguishable from the runner-up."""
        ranked = sorted(self.rows, key=lambda r: r.elements_per_s, reverse=True)
        best = ranked[0]
        text = (f"best: {format_setting(best.setting)} at {best.elements_per_s:,.1f} elements/s "
                f"(range {best.spread[0]:,.1f}-{best.spread[1]:,.1f} over {len(best.results)} runs)")
        if len(ranked) > 1:
            second = ranked[1]
            if best.spread[0] <= second.spread[1]:
                text += (f"; within noise of {format_setting(second.setting)} "
                         f"({second.elements_per_s:,.1f}, range {second.spread[0]:,.1f}-"
                         f"{second.spread[1]:,.1f}): ranges overlap, either is fine")
            else:
                gain = best.elements_per_s / max(second.elements_per_s, 1e-9)
                text += f"; {gain:.2f}x the runner-up {format_setting(second.setting)}, ranges do not overlap"
        return text

    def table(self) -> list[dict[str, Any]]:
        return [r.as_row() for r in self.rows]

    def write_csv(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.keys + CSV_METRICS + CSV_SPREAD)
            writer.writeheader()
            for row in self.table():
                writer.writerow(row)
        return path

    def plot(self, path: str | Path, title: str | None = None) -> Path:
        """Bar per setting (median elements/s) with the min-max range as error bar."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        labels = [format_setting(r.setting, short=True) for r in self.rows]
        med = [r.elements_per_s for r in self.rows]
        lo = [m - r.spread[0] for m, r in zip(med, self.rows)]
        hi = [r.spread[1] - m for m, r in zip(med, self.rows)]
        best = self.rows.index(self.best())
        colors = ["tab:orange" if i == best else "tab:blue" for i in range(len(self.rows))]
        width = max(6.0, 0.55 * len(labels) + 2)
        fig, ax = plt.subplots(figsize=(width, 4.2), dpi=90)
        ax.bar(range(len(labels)), med, yerr=[lo, hi], capsize=3, color=colors)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel("elements/s\n(median; bar: min-max)", fontsize=9)
        ax.set_title(title or f"sweep over {', '.join(self.keys)}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, format="png")
        plt.close(fig)
        return path


def format_setting(setting: Mapping[str, Any], short: bool = False) -> str:
    parts = []
    for k, v in setting.items():
        name = k.rsplit(".", 1)[-1] if short else k
        parts.append(f"{name}={v}")
    return ", ".join(parts)


def grid_points(grid: Mapping[str, Sequence[Any]], mode: str = "product") -> list[dict[str, Any]]:
    """Settings to measure. `product`: the cartesian product of every key's values.
    `one_at_a_time`: vary one key, the others at their first value."""
    if not grid:
        raise ValueError("sweep grid is empty: give at least one key with values")
    for key, values in grid.items():
        if not values:
            raise ValueError(f"sweep key {key!r} has no values")
    keys = list(grid)
    if mode == "product":
        return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]
    if mode == "one_at_a_time":
        base = {k: grid[k][0] for k in keys}
        points = [dict(base)]
        for k in keys:
            for v in list(grid[k])[1:]:
                points.append({**base, k: v})
        return points
    raise ValueError(f"sweep mode must be 'product' or 'one_at_a_time', got {mode!r}")


def sweep_builder(builder: Callable[[dict[str, Any]], Any], grid: Mapping[str, Sequence[Any]],
                  *, steps: int = 30, warmup: int = 5, repeats: int = 2,
                  mode: str = "product",
                  progress: Callable[[str], None] | None = None) -> SweepResult:
    """Measure `builder(setting)` for every setting of `grid`, `repeats` rounds."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    points = grid_points(grid, mode)
    result = SweepResult(keys=list(grid), rows=[SweepRow(p, []) for p in points])
    for round_index in range(repeats):
        for row in result.rows:
            dataset = builder(dict(row.setting))
            r = measure(dataset, warmup=warmup, steps=steps)
            row.results.append(r)
            if progress:
                progress(f"round {round_index + 1}/{repeats} {format_setting(row.setting)}: "
                         f"{r.elements_per_s:,.1f} elements/s")
            del dataset
    return result


def sweep(config: Any, grid: Mapping[str, Sequence[Any]], *, steps: int = 30, warmup: int = 5,
          repeats: int = 2, mode: str = "product", overrides: Sequence[str] = (),
          split: str = "train",
          progress: Callable[[str], None] | None = None) -> SweepResult:
    """Sweep config keys of the `build_pipeline(config)` pipeline.

    `config`: preset name or YAML path; each point is `load_config(config,
    overrides + [key=value ...])`, so every value goes through the same
    validation as `--set` on the command line.
    """
    from tfpipe.bench._build import build_from

    def builder(setting: dict[str, Any]) -> Any:
        extra = [f"{k}={_format_value(v)}" for k, v in setting.items()]
        return build_from(config, list(overrides) + extra, split=split)

    return sweep_builder(builder, grid, steps=steps, warmup=warmup, repeats=repeats,
                         mode=mode, progress=progress)


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_format_value(v) for v in value) + "]"
    return str(value)


def parse_sweep_option(text: str) -> tuple[str, list[Any]]:
    """`key=v1,v2,...` -> (key, [values]); ints become ints, the rest stays text."""
    if "=" not in text:
        raise ValueError(f"--sweep expects key=v1,v2,..., got {text!r}")
    key, _, values = text.partition("=")
    out: list[Any] = []
    for v in values.split(","):
        v = v.strip()
        if not v:
            continue
        try:
            out.append(int(v))
        except ValueError:
            try:
                out.append(float(v))
            except ValueError:
                out.append(v)
    if not out:
        raise ValueError(f"--sweep {key.strip()!r} has no values")
    return key.strip(), out
