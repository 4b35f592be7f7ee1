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
    items = shard.items
    if hasattr(items, "row_set"):  # a planned shard: its rows unsorted, as filed
        return np.asarray(items.row_set(), dtype=np.int64)
    return np.asarray(items.rows if hasattr(items, "rows")
                      else [item.payload[0] for item in items], dtype=np.int64)


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


class StreamedStatistics:
    """`local_statistics`, computed on the batches the plan's partitioning pass reads
    (`table._PlanFiles.watchers`) instead of a pass of its own: the same batches
    (normalized, table order, BATCH_ROWS rows), the same train rows, so the same
    bytes. A thread consumes them while that pass writes the shards' copies, so
    the two share both cores. `result()` falls back to `local_statistics` when no
    pass fed it (a plan without partitioned shards, an earlier partitioning)."""

    _END, _ABORT = object(), object()

    def __init__(self, source: TableSource, plan: Plan, *, top_k: int = 10_000,
                 num_quantiles: int = 100) -> None:
        import queue

        self.source, self.plan, self.top_k, self.num_quantiles = (source, plan, top_k,
                                                                  num_quantiles)
        self._queue: Any = queue.Queue(maxsize=2)  # ~2 batches of Arrow in flight
        self._thread: Any = None
        self._stats: Statistics | None = None
        self._error: BaseException | None = None
        files = {id(getattr(s.items, "_files", None)): getattr(s.items, "_files", None)
                 for s in plan.shards}
        self._files = next(iter(files.values())) if len(files) == 1 else None
        if self._files is None or not plan.shards:
            return
        self._train = np.zeros(len(plan.shards) + 1, dtype=bool)  # by gid + 1 (0: no shard)
        for shard in plan.shards:
            if shard.split == STATS_SPLIT:
                self._train[shard.items._gid + 1] = True
        self._bits = set(source.float64_bits_columns)
        self._files.watchers.append(self)

    def batch(self, batch: Any, gid: np.ndarray) -> None:
        if self._thread is None:
            import threading

            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name="tfpipe-statistics")
            self._thread.start()
        self._queue.put((batch, gid))

    def end(self, ok: bool) -> None:
        if self._thread is not None:
            self._queue.put(self._END if ok else self._ABORT)

    def _batches(self) -> Any:
        import pyarrow as pa

        from tfpipe.convert.table import _bits_as_float64

        while True:
            got = self._queue.get()
            if got is self._END:
                return
            if got is self._ABORT:
                raise _Aborted
            batch, gid = got
            if self._bits:
                batch = _bits_as_float64(batch, self._bits)  # as stats_batches gives
            yield batch.filter(pa.array(self._train[gid + 1]))

    def _run(self) -> None:
        try:
            self._stats = compute_statistics(self._batches(), columns=stats_columns(self.source),
                                             top_k=self.top_k,
                                             num_quantiles=self.num_quantiles,
                                             split=STATS_SPLIT)
        except BaseException as exc:  # noqa: BLE001 - handed to result()
            self._error = exc
            # let the pass finish: it blocks on a full queue otherwise
            while self._queue.get() not in (self._END, self._ABORT):
                pass

    def result(self) -> Statistics:
        if self._files is not None and self in self._files.watchers:
            self._files.watchers.remove(self)
        if self._thread is None:
            return local_statistics(self.source, self.plan, top_k=self.top_k,
                                    num_quantiles=self.num_quantiles)
        self._thread.join()
        if isinstance(self._error, _Aborted):  # the pass failed; its error was raised there
            return local_statistics(self.source, self.plan, top_k=self.top_k,
                                    num_quantiles=self.num_quantiles)
        if self._error is not None:
            raise self._error
        assert self._stats is not None
        return dataclasses.replace(self._stats, source=self.source.display)


class _Aborted(Exception):
    """The partitioning pass stopped before the last batch."""


def attach_statistics(out: str | os.PathLike[str], stats: Statistics) -> Manifest:
    """Write statistics.json beside the manifest, then record its hash in the manifest."""
    out = Path(out)
    write_statistics(stats, out)
    manifest = Manifest.load(out)
    manifest.settings["statistics"] = {"file": STATISTICS_FILE, "sha256": stats.sha256,
                                       "split": stats.split}
    manifest.save(out)
    return manifest
