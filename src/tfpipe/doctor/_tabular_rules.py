"""Doctor rules for tabular configs: what a `features:` section does to the data,
read from the statistics the transforms are built from (no graph needed).

They run when `check` is given the config (`check_config`, `tfpipe doctor CONFIG`)
and it has a `features:` section; a finding's op is the config key it is about.
docs/doctor.md documents each rule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from tfpipe.doctor._core import Context, Finding, rule

# A lookup whose kept vocabulary covers less than this share of the train values
# sends most rows to the OOV index: the feature says little.
MIN_COVERAGE = 0.5
# min_max's range is (max - min): an outlier this many times the central 1..99%
# range beyond it squeezes the bulk of the values into a sliver near one end.
OUTLIER_RANGES = 10.0
_DEFAULT_BINS = 1024  # hash / cross num_bins (tfpipe.features.PARAMS)
#: the rules below, which read a tabular config's statistics instead of the graph
TABULAR_RULES = ("stale-statistics", "vocabulary-coverage", "hash-collisions",
                 "min-max-outlier")


def _at(f: Finding, name: str) -> Finding:
    return dataclasses.replace(f, op=f"features.columns.{name}")


def _column(ctx: Context, name: str) -> Any:
    stats = ctx.tabular.statistics
    return None if stats is None else stats.columns.get(name)


@rule("stale-statistics", "error", "statistics that are not the dataset's own")
def stale_statistics(ctx: Context) -> Iterator[Finding]:
    t = ctx.tabular
    if t is None or t.statistics is None or t.manifest_sha256 is None:
        return
    if t.statistics.sha256 != t.manifest_sha256:
        yield ctx.finding(
            "stale-statistics", None,
            f"{t.statistics_path} (sha256 {t.statistics.sha256[:12]}) is not the statistics "
            f"the dataset's manifest records ({t.manifest_sha256[:12]}): every transform "
            "(vocabularies, means, quantile buckets) is built from other data than it reads.",
            "Recompute them with the data (tfpipe convert TABLE OUT --stats) or point "
            "features.statistics at the file of this conversion.")


@rule("vocabulary-coverage", "warning", "a vocabulary that covers few of the values")
def vocabulary_coverage(ctx: Context) -> Iterator[Finding]:
    if ctx.tabular is None:
        return
    for spec in ctx.tabular.specs:
        if spec.kind not in ("vocabulary", "embedding_id"):
            continue
        col = _column(ctx, spec.columns[0])
        cat = None if col is None else col.categorical
        if cat is None or not cat.count:
            continue
        min_freq = spec.params.get("min_frequency", 1)
        kept = [f for _, f in cat.vocabulary if f >= min_freq][:spec.params.get("top_k")]
        cover = sum(kept) / cat.count
        if cover < MIN_COVERAGE:
            yield _at(ctx.finding(
                "vocabulary-coverage", None,
                f"{spec.name} ({spec.kind} of {spec.columns[0]!r}) keeps {len(kept):,} of "
                f"{cat.num_unique:,} values, covering {cover:.1%} of the train rows: the rest "
                "share the OOV index, so the feature cannot tell them apart.",
                "Raise top_k (or lower min_frequency), or use hash with num_bins of about the "
                "number of distinct values for a long-tailed ID."), spec.name)


@rule("hash-collisions", "info", "more distinct values than hash bins")
def hash_collisions(ctx: Context) -> Iterator[Finding]:
    if ctx.tabular is None:
        return
    for spec in ctx.tabular.specs:
        if spec.kind not in ("hash", "cross"):
            continue
        cols = [_column(ctx, c) for c in spec.columns]
        if any(c is None or c.categorical is None for c in cols):
            continue
        distinct = 1
        for c in cols:
            distinct *= c.categorical.num_unique
        distinct = min(distinct, min(c.categorical.count for c in cols))  # at most the rows
        bins = int(spec.params.get("num_bins", _DEFAULT_BINS)) - 1  # bin 0: missing
        if distinct > bins:
            what = ("distinct values" if spec.kind == "hash" else
                    "combinations (at most, bounded by the rows)")
            yield _at(ctx.finding(
                "hash-collisions", None,
                f"{spec.name} ({spec.kind} of {', '.join(spec.columns)}): {distinct:,} train "
                f"{what} into {bins:,} bins: at least {distinct - bins:,} share a bin with "
                "another (the model cannot tell them apart).",
                "Fine when deliberate (hashing bounds memory); else raise num_bins toward the "
                "number of distinct values."), spec.name)


@rule("min-max-outlier", "warning", "min_max scaling dominated by an outlier")
def min_max_outlier(ctx: Context) -> Iterator[Finding]:
    if ctx.tabular is None:
        return
    for spec in ctx.tabular.specs:
        if spec.kind != "min_max":
            continue
        col = _column(ctx, spec.columns[0])
        num = None if col is None else col.numeric
        if num is None or len(num.quantiles) < 3:
            continue
        lo, hi = num.quantiles[0], num.quantiles[-1]
        central = hi - lo
        tail = max(num.max - hi, lo - num.min)
        if central > 0 and tail > OUTLIER_RANGES * central:
            share = central / (num.max - num.min)
            yield _at(ctx.finding(
                "min-max-outlier", None,
                f"{spec.name} (min_max of {spec.columns[0]!r}): the range [{num.min:g}, "
                f"{num.max:g}] is set by outliers; the central values "
                f"[{lo:g}, {hi:g}] land in {share:.1%} of [0, 1].",
                "Use normalize, log1p (long tails) or clip with lower_quantile / "
                "upper_quantile before scaling."), spec.name)
