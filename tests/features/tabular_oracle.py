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


# ------------------------------------------------------------ a converted CTR table
CTR_FEATURES = {
    "label": "label",
    "columns": {
        "price": {"transform": "log1p"},
        "price_z": {"transform": "normalize", "column": "price"},
        "price_bucket": {"transform": "bucketize", "column": "price", "num_buckets": 10},
        "category": {"transform": "vocabulary"},
        "device": {"transform": "vocabulary"},
        "user": {"transform": "embedding_id", "column": "user_id", "top_k": 300,
                 "embedding_dim": 8},
        "item": {"transform": "hash", "column": "item_id", "num_bins": 512},
        "age": {"transform": "normalize", "column": "user_age", "missing_indicator": True},
        "hour": {"transform": "time", "column": "timestamp", "part": "hour_cyclic"},
        "dow": {"transform": "time", "column": "timestamp", "part": "day_of_week"},
        "user_x_category": {"transform": "cross", "columns": ["user_id", "category"],
                            "num_bins": 256},
        "position": {"transform": "passthrough"},
    },
}


def make_ctr_dataset(root, rows: int = 1000, seed: int = 3) -> tuple[str, str]:
    """CTR table (tabstats' generator) -> parquet -> `convert(..., stats=True)` (train/val;
    statistics of the train split beside the manifest); returns (table, dataset dir)."""
    import os

    from tfpipe.convert import convert
    from tfpipe.features import make_ctr_table

    table = make_ctr_table(os.path.join(root, "ctr.parquet"), rows, seed=seed)
    out = os.path.join(root, "ctr")
    convert(str(table), out, split="train=0.8,val=0.2", progress=False, workers=1,
            shard_size=64 << 10, stats=True, stats_quantiles=20)
    return str(table), out
