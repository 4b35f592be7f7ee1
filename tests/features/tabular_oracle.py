"""NumPy-built Statistics (the oracle's statistics, independent of compute_statistics)
and NumPy definitions of every transform (docs/tabular.md, "Transforms")."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from tfpipe.features import CategoricalStats, ColumnStats, NumericStats, Statistics

Q = 20  # stored quantile bins: boundaries at k/20


def column_stats(name: str, values: list[Any], dtype: str) -> ColumnStats:
    present = [v for v in values if v is not None]
    numeric = categorical = None
    if dtype in ("int64", "float32"):
        x = np.array(present, np.float64)
        qs = tuple(float(np.quantile(x, k / Q, method="inverted_cdf")) for k in range(1, Q))
        hist = np.bincount(np.searchsorted(np.array(qs), x, side="right"), minlength=Q)
        numeric = NumericStats(len(x), len(values) - len(x), float(x.min()), float(x.max()),
                               float(x.mean()), float(x.std()), qs, tuple(int(h) for h in hist))
    if dtype in ("int64", "string"):
        counts = Counter(present)
        vocab = tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        categorical = CategoricalStats(len(present), len(values) - len(present), len(counts),
                                       True, vocab, 0)
    return ColumnStats(name, dtype, numeric, categorical)


def statistics(table: dict[str, tuple[list[Any], str]]) -> Statistics:
    cols = {n: column_stats(n, v, dt) for n, (v, dt) in table.items()}
    rows = len(next(iter(table.values()))[0])
    return Statistics(cols, rows, "train", "by-hand", {"num_quantiles": Q})
