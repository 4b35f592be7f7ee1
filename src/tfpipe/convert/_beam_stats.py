"""Statistics at conversion on Apache Beam: per-chunk accumulators merged by a combiner.

The launcher writes the plan's train rows (their payloads, the values the shard
writer encodes) to chunk files under ``OUT/.tfpipe-stats/``; a Beam step per
chunk builds a `TableAccumulator` from them, ``CombineGlobally`` merges the
accumulators (Chan's merge for the moments, sketch merges for quantiles and
frequencies) and a last step writes the statistics JSON, which the launcher
reads back and removes. Exact fields (counts, min/max, exact vocabularies,
quantiles of columns below the sketch size) equal the local runner's; the
merged mean/std agree to float rounding; sketched quantiles agree within the
sum of both runs' recorded rank errors.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from tfpipe.convert._plan import Plan, canonical_json
from tfpipe.convert._table_stats import STATS_SPLIT, stats_columns, train_rows
from tfpipe.convert.beam import _bytes_hook, _import_beam, run_to_done
from tfpipe.convert.table import TableSource
from tfpipe.errors import InputError
from tfpipe.features import Statistics, TableAccumulator, compute_statistics

STATS_DIR = ".tfpipe-stats"  # under OUT while the statistics pipeline runs
CHUNK_ROWS = 50_000  # rows per Beam element: small enough to spread over workers
RESULT_FILE = "statistics.json"


@dataclass(frozen=True)
class _StatsJob:
    out: str
    template: TableAccumulator  # empty, for the table's columns
    top_k: int
    num_quantiles: int
    split: str
    source: str
    settings: dict[str, Any]


def _chunk_path(out: Path, index: int) -> Path:
    return out / STATS_DIR / f"chunk-{index:05d}.json"


def _arrow_type(dtype: str) -> Any:
    import pyarrow as pa

    # Payload values are in feature form: ints, Python floats, bytes (see table.py).
    return {"int64": pa.int64(), "float32": pa.float64(), "string": pa.binary()}[dtype]


def _accumulate(job: _StatsJob, index: int) -> TableAccumulator:
    """Beam step: the accumulator of one chunk of planned train rows."""
    import pyarrow as pa

    path = _chunk_path(Path(job.out), index)
    try:
        rows = json.loads(path.read_text(), object_hook=_bytes_hook)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the statistics chunk: {exc}") from None
    acc = copy.deepcopy(job.template)
    arrays = [pa.array([row[name] for row in rows], type=_arrow_type(col.dtype))
              for name, col in acc.columns.items()]
    names = list(acc.columns)
    acc.add_batch(pa.RecordBatch.from_arrays(arrays, names=names) if names
                  else pa.RecordBatch.from_pydict({}))
    if not names:
        acc.num_rows = len(rows)
    return acc


def _merge(template: TableAccumulator, accs: Iterable[TableAccumulator]) -> TableAccumulator:
    """The combiner: associative and commutative, so any bundling gives valid statistics."""
    out = copy.deepcopy(template)
    for acc in accs:
        out.merge(acc)
    return out


def _write_result(job: _StatsJob, acc: TableAccumulator) -> None:
    stats = acc.result(top_k=job.top_k, num_quantiles=job.num_quantiles, split=job.split,
                       source=job.source, settings=job.settings)
    path = Path(job.out) / STATS_DIR / RESULT_FILE
    temp = path.with_name(f".{RESULT_FILE}.tmp")
    temp.write_text(stats.to_json())
    temp.replace(path)


def beam_statistics(source: TableSource, plan: Plan, out: str, *, runner: str,
                    flags: list[str], top_k: int = 10_000, num_quantiles: int = 100,
                    chunk_rows: int | None = None) -> Statistics:
    """The train split's statistics, computed by a Beam pipeline over the planned rows."""
    chunk_rows = chunk_rows or CHUNK_ROWS
    beam = _import_beam()
    from apache_beam.options.pipeline_options import PipelineOptions

    out_path = Path(out).resolve()
    work = out_path / STATS_DIR
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    columns = stats_columns(source)
    # The settings and skipped columns the local runner records for the same table.
    reference = compute_statistics(source.stats_schema.empty_table(), columns=columns,
                                   top_k=top_k, num_quantiles=num_quantiles)
    template = TableAccumulator.for_schema(source.stats_schema, columns)
    # Train rows in table order, read a chunk at a time (never all at once).
    train = train_rows(plan)
    bits = source.float64_bits_columns  # statistics of their float64 values
    chunks = 0
    for start in range(0, len(train), chunk_rows):
        rows = [item.payload[1] for item in source.read_rows(train[start:start + chunk_rows])]
        for row in rows:
            for name in bits:
                if isinstance(row[name], int):
                    row[name] = float(np.int64(row[name]).view(np.float64))
        _chunk_path(out_path, chunks).write_text(canonical_json(rows) + "\n")
        chunks += 1
    job = _StatsJob(str(out_path), template, top_k, num_quantiles, STATS_SPLIT,
                    Path(source.path).name, dict(reference.settings))
    pipeline = beam.Pipeline(options=PipelineOptions(list(flags)))
    _ = (pipeline
         | "StatsChunks" >> beam.Create(list(range(chunks)))
         | "SpreadStats" >> beam.Reshuffle()
         | "Accumulate" >> beam.Map(partial(_accumulate, job))
         | "Merge" >> beam.CombineGlobally(partial(_merge, template))
         | "WriteStats" >> beam.Map(partial(_write_result, job)))
    run_to_done(pipeline, runner, "the statistics pipeline")
    try:
        stats = Statistics.from_json((work / RESULT_FILE).read_text())
    except OSError as exc:
        raise InputError(f"{work / RESULT_FILE}: the statistics pipeline wrote no result "
                         f"({exc.strerror})") from None
    shutil.rmtree(work, ignore_errors=True)
    return stats
