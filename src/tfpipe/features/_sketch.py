"""Mergeable, bounded-memory accumulators behind `compute_statistics` (and the Beam combiner).

Every accumulator has `add(...)`, `merge(other)` and a result; merging is what
lets the Beam runner combine per-bundle partial results into the same
statistics as one local pass.

- Moments: count / min / max exactly; mean and M2 merged with Chan et al.'s
  parallel update (numerically stable; the merged float may differ from a
  one-pass result in the last bits only).
- Quantiles: a deterministic compactor sketch (the MRL / KLL family with one
  capacity `k` per level and alternating offsets, no randomness). Level h holds
  values of weight 2^h; when a level exceeds k values it is sorted and every
  other value moves up with twice the weight. One compaction at level h moves
  any rank by at most 2^h, so the sketch keeps the exact sum of those as its
  guaranteed rank error (`rank_error`): each reported quantile's rank is within
  it of the requested rank (typically ~0.1% of n for 20 M values at k=4096,
  the measured error far below). Below k values nothing is compacted and the
  quantiles equal numpy.quantile(..., method="inverted_cdf") exactly.
- Frequencies: exact counts (pyarrow hash aggregation) while a column has at
  most `max_exact` distinct values; beyond, a Misra-Gries summary of
  `max_exact` counters (mergeable form, Agarwal et al. 2012): every count is a
  lower bound, at most `error` below the true count, with error <= n/(max_exact+1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

DEFAULT_SKETCH_K = 4096
DEFAULT_MAX_EXACT = 1_000_000


@dataclass
class QuantileSketch:
    k: int = DEFAULT_SKETCH_K
    levels: list[np.ndarray] = field(default_factory=list)
    parity: list[int] = field(default_factory=list)
    rank_error: int = 0

    def add(self, values: np.ndarray) -> None:
        if values.size == 0:
            return
        self._ensure(1)
        self.levels[0] = np.concatenate([self.levels[0], values.astype(np.float64)])
        self._compress()

    def merge(self, other: QuantileSketch) -> None:
        self._ensure(len(other.levels))
        for h, level in enumerate(other.levels):
            self.levels[h] = np.concatenate([self.levels[h], level])
        self.rank_error += other.rank_error
        self._compress()

    def _ensure(self, n: int) -> None:
        while len(self.levels) < n:
            self.levels.append(np.empty(0, np.float64))
            self.parity.append(0)

    def _compress(self) -> None:
        h = 0
        while h < len(self.levels):
            buf = self.levels[h]
            if buf.size > self.k:
                buf = np.sort(buf, kind="stable")
                keep = buf[-1:] if buf.size % 2 else buf[:0]
                even = buf[:buf.size - keep.size]
                # Alternate which half moves up, so the errors of successive
                # compactions at one level tend to cancel (deterministically).
                up = even[self.parity[h]::2]
                self.parity[h] ^= 1
                self.levels[h] = keep.copy()
                self._ensure(h + 2)
                self.levels[h + 1] = np.concatenate([self.levels[h + 1], up])
                self.rank_error += 1 << h
            h += 1

    def weighted(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted values, their weights)."""
        if not self.levels:
            return np.empty(0), np.empty(0, np.int64)
        values = np.concatenate(self.levels)
        weights = np.concatenate([np.full(lv.size, 1 << h, np.int64)
                                  for h, lv in enumerate(self.levels)])
        order = np.argsort(values, kind="stable")
        return values[order], weights[order]

    def quantiles(self, num_quantiles: int) -> tuple[float, ...]:
        """Boundaries at k/Q, k=1..Q-1: the smallest value whose weighted CDF reaches k/Q."""
        values, weights = self.weighted()
        if values.size == 0:
            return ()
        cum = np.cumsum(weights)
        n = int(cum[-1])
        # The same target as numpy's inverted_cdf (n * p in float), so exact
        # small columns agree with numpy.quantile bit for bit.
        targets = n * (np.arange(1, num_quantiles) / num_quantiles)
        idx = np.searchsorted(cum, targets, side="left")
        return tuple(float(v) for v in values[np.minimum(idx, values.size - 1)])

    def histogram(self, boundaries: tuple[float, ...]) -> tuple[int, ...]:
        """Weight per bin [q_{i-1}, q_i): len(boundaries)+1 bins; sums to the count exactly."""
        values, weights = self.weighted()
        bins = np.searchsorted(np.asarray(boundaries, np.float64), values, side="right")
        return tuple(int(c) for c in np.bincount(bins, weights=weights,
                                                 minlength=len(boundaries) + 1).astype(np.int64))


@dataclass
class NumericAccumulator:
    count: int = 0
    missing: int = 0
    min: float = float("inf")
    max: float = float("-inf")
    mean: float = 0.0
    m2: float = 0.0
    sketch: QuantileSketch = field(default_factory=QuantileSketch)

    def add(self, values: np.ndarray, missing: int) -> None:
        self.missing += int(missing)
        if values.size == 0:
            return
        values = values.astype(np.float64)
        mean = float(np.mean(values))
        m2 = float(np.sum((values - mean) ** 2))
        self._combine(values.size, mean, m2, float(values.min()), float(values.max()))
        self.sketch.add(values)

    def _combine(self, n: int, mean: float, m2: float, lo: float, hi: float) -> None:
        # Chan, Golub & LeVeque's pairwise update of (n, mean, M2).
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self.m2 = self.m2 + m2 + delta * delta * (self.count * n / total)
        self.count = total
        self.min = min(self.min, lo)
        self.max = max(self.max, hi)

    def merge(self, other: NumericAccumulator) -> None:
        self.missing += other.missing
        if other.count:
            self._combine(other.count, other.mean, other.m2, other.min, other.max)
            self.sketch.merge(other.sketch)

    def result(self, num_quantiles: int) -> Any:
        from tfpipe.features._stats import NumericStats

        if self.count == 0:
            nan = float("nan")
            return NumericStats(0, self.missing, nan, nan, nan, nan, (), (0,), 0)
        qs = self.sketch.quantiles(num_quantiles)
        std = float(np.sqrt(max(self.m2, 0.0) / self.count))
        return NumericStats(self.count, self.missing, self.min, self.max, self.mean, std,
                            qs, self.sketch.histogram(qs), self.sketch.rank_error)


@dataclass
class FrequencyAccumulator:
    """Value counts: exact up to `max_exact` distinct values, then Misra-Gries."""

    max_exact: int = DEFAULT_MAX_EXACT
    count: int = 0
    missing: int = 0
    values: Any = None  # pyarrow Array (int64 or binary), distinct
    counts: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    exact: bool = True
    error: int = 0  # Misra-Gries: total decrement, the bound on every undercount
    unique_lower_bound: int = 0
    # Chunks' (values, counts) not yet absorbed: absorbing one re-aggregates every
    # distinct value held, so chunks wait and are absorbed together (`_flush`).
    pending: list[tuple[Any, np.ndarray]] = field(default_factory=list)
    pending_size: int = 0

    def add(self, values: Any, missing: int) -> None:
        """values: a pyarrow Array without nulls (int64 or binary)."""
        import pyarrow.compute as pc

        self.missing += int(missing)
        if len(values) == 0:
            return
        self.count += len(values)
        vc = pc.value_counts(values)
        self._defer(vc.field("values"), vc.field("counts").to_numpy().astype(np.int64))

    def merge(self, other: FrequencyAccumulator) -> None:
        other._flush()
        self.count += other.count
        self.missing += other.missing
        self.error += other.error
        self.exact = self.exact and other.exact
        self.unique_lower_bound = max(self.unique_lower_bound, other.unique_lower_bound)
        if other.values is not None:
            self._defer(other.values, other.counts)
        self._flush()

    def _defer(self, values: Any, counts: np.ndarray) -> None:
        self.pending.append((values, counts))
        self.pending_size += len(values)
        # Absorbing re-aggregates every value held: wait until the chunks hold about
        # as many, so each value held is re-aggregated O(1) times per doubling.
        held = 0 if self.values is None else len(self.values)
        if self.pending_size >= max(held, 1 << 16):
            self._flush()

    def _flush(self) -> None:
        """Absorb the pending chunks. At once when the result cannot differ from
        absorbing them one by one: while every distinct value seen fits in
        `max_exact`, no step compacts and the counts are exact sums whatever the
        grouping. Else (the union passes `max_exact`, or counts are already
        approximate) one by one from the state before, as `add` did chunk by chunk."""
        import pyarrow as pa

        if not self.pending:
            return
        pending, self.pending, self.pending_size = self.pending, [], 0
        if len(pending) > 1 and self.exact:
            before = (self.values, self.counts, self.unique_lower_bound)
            table = pa.table({"v": pa.concat_arrays([v for v, _ in pending]),
                              "c": np.concatenate([c for _, c in pending])})
            table = table.group_by("v").aggregate([("c", "sum")])
            self._absorb(table.column("v").combine_chunks(),
                         table.column("c_sum").to_numpy().astype(np.int64))
            if self.exact:
                return
            self.values, self.counts, self.unique_lower_bound = before
            self.exact, self.error = True, 0  # exact counts carry no error
        for values, counts in pending:
            self._absorb(values, counts)

    def _absorb(self, values: Any, counts: np.ndarray) -> None:
        import pyarrow as pa

        if self.values is not None:
            table = pa.table({"v": pa.concat_arrays([self.values, values]),
                              "c": np.concatenate([self.counts, counts])})
            table = table.group_by("v").aggregate([("c", "sum")])
            values, counts = table.column("v").combine_chunks(), \
                table.column("c_sum").to_numpy().astype(np.int64)
        self.unique_lower_bound = max(self.unique_lower_bound, len(values))
        if len(values) > self.max_exact:
            # Misra-Gries reduction: subtract the (max_exact+1)-th largest count
            # from every counter and drop those that reach zero.
            cut = int(np.partition(counts, len(counts) - self.max_exact - 1)
                      [len(counts) - self.max_exact - 1])
            keep = counts > cut
            values = values.filter(pa.array(keep))
            counts = counts[keep] - cut
            self.error += cut
            self.exact = False
        self.values, self.counts = values, counts

    def result(self, top_k: int, decode: bool) -> Any:
        import pyarrow as pa

        from tfpipe.features._stats import CategoricalStats

        self._flush()

        vocab: list[tuple[str | int, int]] = []
        if self.values is not None and len(self.values):
            table = pa.table({"v": self.values, "c": self.counts}).sort_by(
                [("c", "descending"), ("v", "ascending")]).slice(0, top_k)
            for v, c in zip(table.column("v").to_pylist(), table.column("c").to_pylist()):
                vocab.append((v.decode("utf-8", "replace") if decode else int(v), int(c)))
        listed = sum(c for _, c in vocab)
        return CategoricalStats(self.count, self.missing,
                                len(self.values) if self.exact and self.values is not None
                                else self.unique_lower_bound,
                                self.exact, tuple(vocab), self.count - listed, self.error)
