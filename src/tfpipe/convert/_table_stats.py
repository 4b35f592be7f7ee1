"""Statistics at conversion (`convert(..., stats=True)`): the train split of a table.

The rows counted are exactly those the deterministic plan put in train shards
(bad rows excluded), whatever the runner. Locally the table file is streamed in
chunks through `tfpipe.features.compute_statistics` with the plan's train mask;
on Beam (`_beam_stats`) the same accumulators are built per chunk of planned
rows on the workers and merged with a combiner. `statistics.json` is written
after the shards and the manifest, which then records its hash.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

from tfpipe.convert._plan import Plan
from tfpipe.convert.table import TableSource
from tfpipe.errors import ConfigError
from tfpipe.features import (STATISTICS_FILE, Statistics, compute_statistics,
                             write_statistics)
from tfpipe.records import Manifest

STATS_SPLIT = "train"


def check_stats_request(source: Any, ratios: dict[str, float]) -> None:
    if not isinstance(source, TableSource):
        raise ConfigError(f"stats: statistics are computed for csv and parquet tables, not "
                          f"{source.kind!r} sources")
    if STATS_SPLIT not in ratios:
        raise ConfigError(f"stats: statistics are computed on the {STATS_SPLIT!r} split, but "
                          f"--split has only {', '.join(ratios)}; name one split 'train'")


def _shard_rows(shard: Any) -> np.ndarray:
    # A table's shards carry their row indices (TableRows.rows): no row is read here.
    return np.asarray(shard.items.rows if hasattr(shard.items, "rows")
                      else [item.payload[0] for item in shard.items], dtype=np.int64)


def train_rows(plan: Plan) -> np.ndarray:
    """Sorted row indices of the table that the plan's train shards hold."""
    parts = [_shard_rows(shard) for shard in plan.shards if shard.split == STATS_SPLIT]
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


def stats_columns(source: TableSource) -> list[str]:
    # The image column holds file paths, not a feature: it gets no statistics.
    return [c for c in source.columns if c != source.image_column]


def local_statistics(source: TableSource, plan: Plan, *, top_k: int = 10_000,
                     num_quantiles: int = 100) -> Statistics:
    """Stream the table's normalized batches (the values the records hold: a CSV's
    empty field missing, timestamps int64), counting the plan's train rows only."""
    mask = np.zeros(source.num_rows, dtype=bool)
    for shard in plan.shards:  # a shard at a time: no array of every train row
        if shard.split == STATS_SPLIT:
            mask[_shard_rows(shard)] = True
    stats = compute_statistics(source.stats_batches(), columns=stats_columns(source),
                               top_k=top_k, num_quantiles=num_quantiles,
                               select=lambda start, stop: mask[start:stop],
                               split=STATS_SPLIT)
    # the file's name, as compute_statistics records it for a path
    return dataclasses.replace(stats, source=source.display)


def attach_statistics(out: str | os.PathLike[str], stats: Statistics) -> Manifest:
    """Write statistics.json beside the manifest, then record its hash in the manifest."""
    out = Path(out)
    write_statistics(stats, out)
    manifest = Manifest.load(out)
    manifest.settings["statistics"] = {"file": STATISTICS_FILE, "sha256": stats.sha256,
                                       "split": stats.split}
    manifest.save(out)
    return manifest
