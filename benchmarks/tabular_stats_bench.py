"""Peak memory of tabular statistics vs the table's in-memory Arrow size, in one run.

    .venv/bin/python benchmarks/tabular_stats_bench.py --rows 20000000 --convert-rows 200000
    .venv/bin/python benchmarks/tabular_stats_bench.py --rows 2000000 \
        --convert-rows 25000,100000 --baseline-src /path/to/older/checkout

Generates the synthetic CTR table (tfpipe.features.make_ctr_table) into a temp
Parquet file, chunk by chunk, then measures in fresh subprocesses (so each peak
RSS is its own):

- `size`: the table's in-memory Arrow size (sum of `RecordBatch.nbytes`, read
  streaming, so the table is never materialized);
- `stats`: `compute_statistics(path)` (chunks of --chunk-rows): peak RSS, the RSS
  after imports, seconds;
- `convert`: `tfpipe.convert.convert(table, out, stats=True, workers=1)` on
  CTR tables of each --convert-rows size (comma-separated), shards of
  --convert-shard-size, next to `compute_statistics` on the same rows. The
  converter streams the table (it holds the plan's row indices and one shard's
  rows), so its peak RSS should stay flat in the row count; --baseline-src runs
  the same conversions with another checkout's `src/` (e.g. the converter from
  before it streamed) in the same run, for a side-by-side ratio. Encoding
  tf.train.Example records in Python (~100-300 us a row on this host) bounds
  how many rows fit in a short run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
if len(sys.argv) > 4:  # another checkout's src/ (--baseline-src)
    sys.path.insert(0, sys.argv[4])
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
elif phase == "plan":
    # What of a conversion grows with the row count: the scan, the enumeration and
    # the plan (row-index arrays), then one shard's rows read back; no encoding.
    from tfpipe.convert import make_source
    from tfpipe.convert._plan import plan_shards
    source = make_source(path)
    items = source.enumerate().items
    plan = plan_shards(items, {"train": 0.9, "val": 0.1}, 0, 256 << 20)
    out["shards"] = len(plan.shards)
    out["first_shard_rows"] = sum(1 for _ in plan.shards[0].items)
elif phase == "convert":
    from tfpipe.convert import convert
    out_dir, shard_size = arg.split("|")
    m = convert(path, out_dir, stats=True, workers=1, shard_size=shard_size)
    out["shards"] = sum(len(info.shards) for info in m.splits.values())
    out["records"] = sum(info.num_records for info in m.splits.values())
    out["tfpipe"] = __import__("tfpipe").__file__
out["seconds"] = time.perf_counter() - t
out["rss_after_imports"] = rss0
out["peak_rss"] = hwm()
print(json.dumps(out))
"""


def _phase(phase: str, path: Path, arg: str, src: str | None = None) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    res = subprocess.run([sys.executable, "-c", _PHASE, phase, str(path), arg,
                          *([src] if src else [])],
                         capture_output=True, text=True, env=env, timeout=1200)
    if res.returncode:
        raise SystemExit(f"phase {phase} failed:\n{res.stderr}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _mib(n: float) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000,
                        help="rows of the compute_statistics table (0: skip)")
    parser.add_argument("--chunk-rows", type=int, default=1_000_000)
    parser.add_argument("--convert-rows", default="200000",
                        help="comma-separated row counts of the convert --stats "
                             "measurements (0: skip)")
    parser.add_argument("--convert-shard-size", default="8MB",
                        help="shard_size of those conversions (one shard's rows are "
                             "in memory at a time)")
    parser.add_argument("--plan-rows", default="",
                        help="comma-separated row counts: peak RSS of scanning and "
                             "planning a table of that size and reading one 256 MB shard")
    parser.add_argument("--baseline-src", default=None,
                        help="another checkout's src/ directory's parent: its converter "
                             "is measured on the same tables, side by side")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tabstats-bench-") as tmp:
        if args.rows:  # 0: only the conversions
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
        for n in [int(v) for v in args.plan_rows.split(",") if v]:
            table = Path(tmp) / f"plan-{n}.parquet"
            _phase("generate", table, str(n))
            tsize = _phase("size", table, "0")
            plan = _phase("plan", table, "0")
            print(f"rows {n:,} (Arrow {_mib(tsize['arrow_bytes'])}): scan + plan + read "
                  f"one shard ({plan['first_shard_rows']:,} rows of {plan['shards']} "
                  f"shards): peak RSS {_mib(plan['peak_rss'])} (after imports "
                  f"{_mib(plan['rss_after_imports'])}), {plan['seconds']:.0f} s")
            table.unlink()
        sizes = [int(n) for n in args.convert_rows.split(",") if int(n) > 0]
        runs = [("this checkout", None)]
        if args.baseline_src:
            runs.append((f"baseline {args.baseline_src}",
                         str(Path(args.baseline_src).resolve() / "src")))
        for n in sizes:
            small = Path(tmp) / f"ctr-{n}.parquet"
            _phase("generate", small, str(n))
            ssize = _phase("size", small, "0")
            alone = _phase("stats", small, str(args.chunk_rows))
            print(f"rows {n:,} (Arrow {_mib(ssize['arrow_bytes'])}): compute_statistics "
                  f"alone peak RSS {_mib(alone['peak_rss'])}, {alone['seconds']:.1f} s")
            for label, src in runs:
                out = Path(tmp) / f"ds-{n}-{len(src or '')}"
                conv = _phase("convert", small, f"{out}|{args.convert_shard_size}", src)
                print(f"  convert --stats [{label}]: peak RSS {_mib(conv['peak_rss'])} "
                      f"(after imports {_mib(conv['rss_after_imports'])}), "
                      f"{conv['seconds']:.0f} s ({n / conv['seconds']:,.0f} rows/s), "
                      f"{conv['shards']} shards of {args.convert_shard_size}")
                shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
