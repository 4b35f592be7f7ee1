"""A synthetic click-through-rate (CTR) table, deterministic from a seed, streamed in chunks.

Columns (one row = one ad impression):

| column | type | how it is drawn |
|---|---|---|
| `user_id` | int64 | Zipf(0.9) popularity over `num_users`, ids a seeded permutation of 1..U |
| `item_id` | int64 | Zipf(1.05) popularity over `num_items`, ids a seeded permutation of 1..I |
| `timestamp` | int64 | epoch seconds over `weeks` weeks from 2026-01-05 UTC; a daily cycle (peak ~20h, trough ~4h) and busier weekends |
| `price` | float64 | the item's lognormal list price (per-category median) times a small lognormal discount, in cents |
| `category` | string | fixed per item, 12 categories of unequal size |
| `device` | string | mobile / desktop / tablet; 2% null |
| `user_age` | int64 | per user, 18..80; 5% of rows null |
| `position` | int64 | ad slot 1..10, geometric |
| `label` | int64 | Bernoulli(logistic(hour + log price + category + user x category affinity + position)) |

`world_seed` (default: `seed`) draws the users and items (ids, categories,
prices, tastes); `seed` the impressions. Two tables with the same world seed
and different seeds are two samples of one distribution (drift tests, a
"next week" table for `tfpipe drift`).

The table depends only on (`rows`, `seed`, `world_seed`, `num_users`, `num_items`, `weeks`):
rows are drawn in fixed blocks of 65,536 from a generator keyed by (seed, block),
so any `chunk_rows` gives the same rows and 20 M rows never sit in memory.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

CATEGORIES = ("electronics", "fashion", "home", "beauty", "sports", "toys", "books",
              "grocery", "garden", "auto", "music", "travel")
DEVICES = ("mobile", "desktop", "tablet")
START_EPOCH = 1_767_571_200  # 2026-01-05 00:00:00 UTC, a Monday
_BLOCK = 65_536
# Per-category median list price (currency units) and click propensity.
_PRICE_MEDIAN = np.array([180, 45, 60, 25, 70, 30, 15, 8, 40, 90, 20, 400], dtype=np.float64)
_CAT_EFFECT = np.array([0.2, 0.4, 0.0, 0.3, 0.1, 0.35, -0.2, -0.3, -0.1, -0.25, 0.15, -0.4])
_CAT_SIZE = np.array([10, 14, 10, 8, 7, 6, 9, 12, 5, 4, 6, 3], dtype=np.float64)
# Relative traffic per hour of day (UTC): low at night, peak in the evening.
_HOURLY = 1.0 + 0.8 * np.sin((np.arange(24) - 14) / 24 * 2 * np.pi) \
    + 0.5 * np.exp(-0.5 * ((np.arange(24) - 20) / 2.0) ** 2)


def ctr_schema() -> Any:
    """The Arrow schema of the CTR table."""
    import pyarrow as pa

    return pa.schema([("user_id", pa.int64()), ("item_id", pa.int64()),
                      ("timestamp", pa.int64()), ("price", pa.float64()),
                      ("category", pa.string()), ("device", pa.string()),
                      ("user_age", pa.int64()), ("position", pa.int64()),
                      ("label", pa.int64())])


def _zipf_cdf(n: int, s: float) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** s
    cdf = np.cumsum(w)
    return cdf / cdf[-1]


class _World:
    """Users and items: drawn once from the seed, O(users + items) memory."""

    def __init__(self, seed: int, num_users: int, num_items: int) -> None:
        rng = np.random.default_rng([seed, 0x5EED, 1])
        self.user_cdf = _zipf_cdf(num_users, 0.9)
        self.item_cdf = _zipf_cdf(num_items, 1.05)
        self.user_ids = rng.permutation(num_users).astype(np.int64) + 1
        self.item_ids = rng.permutation(num_items).astype(np.int64) + 1
        self.item_cat = rng.choice(len(CATEGORIES), size=num_items, p=_CAT_SIZE / _CAT_SIZE.sum())
        self.item_price = np.exp(np.log(_PRICE_MEDIAN[self.item_cat])
                                 + rng.normal(0.0, 0.6, num_items))
        self.user_age = rng.integers(18, 81, num_users)
        self.user_bias = rng.normal(0.0, 0.5, num_users)
        # Each user likes one category more than the others.
        self.user_fav = rng.integers(0, len(CATEGORIES), num_users)
        hours = _HOURLY / _HOURLY.sum()
        self.hour_cdf = np.cumsum(hours)
        self.hour_effect = 0.4 * (_HOURLY - _HOURLY.mean()) / _HOURLY.std()


def _block(world: _World, seed: int, index: int, n: int, weeks: int) -> dict[str, Any]:
    rng = np.random.default_rng([seed, 0x5EED, 2, index])
    u = np.minimum(np.searchsorted(world.user_cdf, rng.random(n)), len(world.user_cdf) - 1)
    i = np.minimum(np.searchsorted(world.item_cdf, rng.random(n)), len(world.item_cdf) - 1)
    days = weeks * 7
    # Weekends (Sat, Sun) get 30% more traffic.
    day_w = np.array([1.3 if d % 7 in (5, 6) else 1.0 for d in range(days)])
    day = np.minimum(np.searchsorted(np.cumsum(day_w) / day_w.sum(), rng.random(n)), days - 1)
    hour = np.minimum(np.searchsorted(world.hour_cdf, rng.random(n)), 23)
    ts = START_EPOCH + day * 86_400 + hour * 3_600 + rng.integers(0, 3_600, n)
    cat = world.item_cat[i]
    price = np.round(world.item_price[i] * np.exp(rng.normal(-0.05, 0.1, n)), 2)
    position = np.minimum(rng.geometric(0.35, n), 10)
    logit = (-2.2 + world.hour_effect[hour] - 0.25 * (np.log(price) - 3.5) + _CAT_EFFECT[cat]
             + world.user_bias[u] + 0.8 * (world.user_fav[u] == cat) - 0.15 * (position - 1))
    label = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    device = rng.choice(len(DEVICES), size=n, p=[0.62, 0.3, 0.08])
    device_null = rng.random(n) < 0.02
    age_null = rng.random(n) < 0.05
    return {"user_id": world.user_ids[u], "item_id": world.item_ids[i], "timestamp": ts,
            "price": price, "category": cat, "device": device, "device_null": device_null,
            "user_age": world.user_age[u], "age_null": age_null, "position": position,
            "label": label}


def ctr_batches(rows: int, *, seed: int = 0, chunk_rows: int = _BLOCK,
                num_users: int | None = None, num_items: int | None = None,
                weeks: int = 4, world_seed: int | None = None) -> Iterator[Any]:
    """Yield the CTR table as pyarrow RecordBatches of at most `chunk_rows` rows."""
    import pyarrow as pa

    if rows < 0 or chunk_rows < 1:
        raise ValueError(f"rows must be >= 0 and chunk_rows >= 1, got {rows}, {chunk_rows}")
    num_users = num_users or max(100, min(2_000_000, rows // 20))
    num_items = num_items or max(50, min(500_000, rows // 100))
    world = _World(seed if world_seed is None else world_seed, num_users, num_items)
    schema = ctr_schema()
    cats = pa.array(CATEGORIES)
    devs = pa.array(DEVICES)
    pending: list[Any] = []
    pending_rows = 0
    for index in range(math.ceil(rows / _BLOCK)):
        n = min(_BLOCK, rows - index * _BLOCK)
        b = _block(world, seed, index, n, weeks)
        batch = pa.record_batch([
            pa.array(b["user_id"]), pa.array(b["item_id"]), pa.array(b["timestamp"]),
            pa.array(b["price"]),
            cats.take(pa.array(b["category"])),
            devs.take(pa.array(b["device"], mask=b["device_null"])),
            pa.array(b["user_age"], mask=b["age_null"]),
            pa.array(b["position"]), pa.array(b["label"])], schema=schema)
        pending.append(batch)
        pending_rows += n
        while pending_rows >= chunk_rows:
            table = pa.Table.from_batches(pending, schema)
            yield from table.slice(0, chunk_rows).combine_chunks().to_batches()
            rest = table.slice(chunk_rows)
            pending, pending_rows = rest.combine_chunks().to_batches(), rest.num_rows
    if pending_rows:
        yield from pa.Table.from_batches(pending, schema).combine_chunks().to_batches()


def ctr_table(rows: int, *, seed: int = 0, **kwargs: Any) -> Any:
    """The whole CTR table in memory (small sizes: tests, examples)."""
    import pyarrow as pa

    return pa.Table.from_batches(list(ctr_batches(rows, seed=seed, **kwargs)), ctr_schema())


def make_ctr_table(path: str | os.PathLike[str], rows: int, *, seed: int = 0,
                   chunk_rows: int = 1 << 20, **kwargs: Any) -> Path:
    """Write the CTR table to `path` (.parquet/.pq or .csv by suffix), chunk by chunk."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv"):
        raise ValueError(f"{path}: suffix must be .parquet, .pq or .csv")
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    schema = ctr_schema()
    writer: Any = (pacsv.CSVWriter(temp, schema) if suffix == ".csv"
                   else pq.ParquetWriter(temp, schema))
    try:
        for batch in ctr_batches(rows, seed=seed, chunk_rows=chunk_rows, **kwargs):
            writer.write_batch(batch) if suffix == ".csv" else writer.write_batch(
                batch, row_group_size=chunk_rows)
    finally:
        writer.close()
    os.replace(temp, path)
    return path
