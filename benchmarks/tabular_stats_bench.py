"""Peak memory of tabular statistics vs the table's in-memory Arrow size, in one run.

    .venv/bin/python benchmarks/tabular_stats_bench.py --rows 20000000 --convert-rows 200000

Generates the synthetic CTR table (tfpipe.features.make_ctr_table) into a temp
Parquet file, chunk by chunk, then measures in fresh subprocesses (so each peak
RSS is its own):

- `size`: the table's in-memory Arrow size (sum of `RecordBatch.nbytes`, read
  streaming, so the table is never materialized);
- `stats`: `compute_statistics(path)` (chunks of --chunk-rows): peak RSS, the RSS
  after imports, seconds;
- `convert`: `tfpipe.convert.convert(table, out, stats=True)` on the first
  --convert-rows rows (the table converter itself holds every row in Python, so
  it is measured on a smaller table), next to `compute_statistics` on the same rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# Peak RSS from /proc/self/status VmHWM: reset by exec, unlike getrusage's ru_maxrss,
# which a child inherits from its parent on Linux.
_PHASE = r"""
import json, sys, time
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
phase, path, arg = sys.argv[1], sys.argv[2], sys.argv[3]
import numpy, pyarrow, pyarrow.parquet as pq
from tfpipe.features import compute_statistics, make_ctr_table
rss0 = hwm()
t = time.perf_counter()
out = {}
if phase == "generate":
    make_ctr_table(path, int(arg))
elif phase == "size":
    pf = pq.ParquetFile(path)
    out["arrow_bytes"] = sum(b.nbytes for b in pf.iter_batches(batch_size=1 << 20))
    out["rows"] = pf.metadata.num_rows
elif phase == "stats":
    stats = compute_statistics(path, chunk_rows=int(arg))
    out["rank_error"] = max(c.numeric.quantile_rank_error for c in stats.columns.values()
                            if c.numeric is not None)
    out["rows"] = stats.num_rows
elif phase == "convert":
    from tfpipe.convert import convert
    convert(path, arg, stats=True, workers=1)
out["seconds"] = time.perf_counter() - t
out["rss_after_imports"] = rss0
out["peak_rss"] = hwm()
print(json.dumps(out))
"""


def _phase(phase: str, path: Path, arg: str) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    res = subprocess.run([sys.executable, "-c", _PHASE, phase, str(path), arg],
                         capture_output=True, text=True, env=env, timeout=1200)
    if res.returncode:
        raise SystemExit(f"phase {phase} failed:\n{res.stderr}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _mib(n: float) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--chunk-rows", type=int, default=1_000_000)
    parser.add_argument("--convert-rows", type=int, default=200_000,
                        help="rows of the convert --stats measurement (0: skip)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tabstats-bench-") as tmp:
        big = Path(tmp) / "ctr.parquet"
        gen = _phase("generate", big, str(args.rows))
        gen_s = gen["seconds"]
        size = _phase("size", big, "0")
        stats = _phase("stats", big, str(args.chunk_rows))
        print(f"rows {args.rows:,}: generated + written in {gen_s:.0f} s (peak RSS "
              f"{_mib(gen['peak_rss'])}), Parquet "
              f"{_mib(big.stat().st_size)}, in-memory Arrow {_mib(size['arrow_bytes'])}")
        print(f"compute_statistics (chunk_rows {args.chunk_rows:,}): peak RSS "
              f"{_mib(stats['peak_rss'])} (after imports {_mib(stats['rss_after_imports'])}), "
              f"{stats['seconds']:.0f} s, {args.rows / stats['seconds']:,.0f} rows/s; "
              f"peak RSS / Arrow size = {stats['peak_rss'] / size['arrow_bytes']:.2f}; "
              f"largest quantile rank error bound {stats['rank_error']:,} "
              f"({stats['rank_error'] / args.rows:.3%} of rows)")
        if args.convert_rows:
            import pyarrow.parquet as pq

            small = Path(tmp) / "small.parquet"
            pq.write_table(pq.ParquetFile(big).read_row_groups([0]).slice(0, args.convert_rows),
                           small)
            conv = _phase("convert", small, str(Path(tmp) / "ds"))
            alone = _phase("stats", small, str(args.chunk_rows))
            ssize = _phase("size", small, "0")
            print(f"rows {args.convert_rows:,} (Arrow {_mib(ssize['arrow_bytes'])}): convert "
                  f"--stats peak RSS {_mib(conv['peak_rss'])}, {conv['seconds']:.0f} s; "
                  f"compute_statistics alone {_mib(alone['peak_rss'])}, "
                  f"{alone['seconds']:.1f} s")


if __name__ == "__main__":
    main()
