"""Table encoding: tfpipe's columnar encoder vs tfx-bsl's, and convert end to end.

    .venv/bin/python benchmarks/table_encode_bench.py --encode-rows 400000 --rounds 3
    .venv/bin/python benchmarks/table_encode_bench.py --rows 1000000 4000000

Criteo-shaped rows (issue 26): I1..I13 int64 with ~5% nulls, C1..C26 short hex
strings with ~3% nulls, an int64 label; a null is an empty feature, as convert
writes it. Encode mode: CPU-us per row (process CPU time, all threads) of
`tfpipe.records.ColumnarEncoder.frames` (Examples AND their TFRecord frames) at
1 and 2 threads, of the row-by-row `encode_example` on a slice, and of tfx-bsl's
C++ `RecordBatchToExamplesEncoder.encode` (Examples only) on the same rows, in the
same run. tfx-bsl pins full TensorFlow and Beam, so it runs in its own venv
(`python3 -m venv /work/tfxbsl-venv && /work/tfxbsl-venv/bin/pip install tfx-bsl`,
or --peer-python); without it that row is skipped, saying so.

End-to-end mode (--rows N ...): writes an N-row Parquet, then runs
`tfpipe convert IN OUT --split train=0.9,val=0.1 --workers 2 --stats` in a child
process and reports its wall time and peak RSS (ru_maxrss of the child); give two
sizes to see whether memory grows with rows.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

INTS, CATS = 13, 26


def criteo_batch(rows: int, seed: int) -> Any:
    """One Criteo-shaped RecordBatch in stored types (int64, binary)."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    cols, names = [], []
    cols.append(pa.array(rng.random(rows) < 0.25).cast(pa.int64()))
    names.append("label")
    for k in range(INTS):
        values = np.floor(rng.lognormal(1.5 + k * 0.2, 1.5, rows)).astype(np.int64) - 2
        cols.append(pa.array(values, mask=rng.random(rows) < 0.05))
        names.append(f"I{k + 1}")
    for k in range(CATS):
        vocab = 10 ** (1 + k % 6)
        ids = rng.zipf(1.3, rows) % vocab
        hexed = _hex8((ids * 2654435761 + k) % (1 << 32))
        arr = pa.array(hexed, pa.binary(8)).cast(pa.binary())
        mask = pa.array(rng.random(rows) < 0.03)
        cols.append(pa.compute.if_else(mask, pa.scalar(None, pa.binary()), arr))
        names.append(f"C{k + 1}")
    return pa.RecordBatch.from_arrays(cols, names=names)


def _hex8(values: np.ndarray) -> np.ndarray:
    """`np.char.mod("%08x", values).astype("S8")` of values below 2**32, ~25x faster
    (generating a 45 M-row table with np.char.mod took ~25 min)."""
    nibbles = (values[:, None] >> np.arange(28, -1, -4, dtype=np.int64)) & 15
    return _HEX[nibbles].reshape(-1).view("S8")


_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


def criteo_schema() -> Any:
    from tfpipe.records import FeatureSpec, Schema

    specs = [FeatureSpec("label", "int64", [], "fixed")]
    specs += [FeatureSpec(f"I{k + 1}", "int64", [], "var") for k in range(INTS)]
    specs += [FeatureSpec(f"C{k + 1}", "string", [], "var") for k in range(CATS)]
    return Schema(specs)


def _cpu(fn: Any) -> tuple[float, float]:
    c, w = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c, time.perf_counter() - w


_PEER = r"""
import json, sys, time
import pyarrow as pa
from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder
reader = pa.ipc.open_file(sys.argv[1])
rounds = int(sys.argv[2])
batches = []
for i in range(reader.num_record_batches):
    b = reader.get_batch(i)
    cols = []
    for col in b.columns:  # tfx-bsl takes list columns; a null row stays a null list
        offsets = pa.array(list(range(len(col) + 1)), pa.int32())
        filled = col.fill_null(b"" if pa.types.is_binary(col.type) else 0)
        cols.append(pa.ListArray.from_arrays(offsets, filled, mask=col.is_null()))
    batches.append(pa.RecordBatch.from_arrays(cols, names=b.schema.names))
enc = RecordBatchToExamplesEncoder()
enc.encode(batches[0].slice(0, 100))
best = None
for _ in range(rounds):
    c = time.process_time()
    n = sum(len(enc.encode(b)) for b in batches)
    t = time.process_time() - c
    best = t if best is None else min(best, t)
print(json.dumps({"rows": n, "cpu_s": best}))
"""


def encode_mode(args: argparse.Namespace) -> None:
    import pyarrow as pa

    from tfpipe.records import ColumnarEncoder, columnar, encode_example

    schema = criteo_schema()
    batches = [criteo_batch(min(args.batch_rows, args.encode_rows - s), seed=s)
               for s in range(0, args.encode_rows, args.batch_rows)]
    n = sum(b.num_rows for b in batches)
    print(f"{n} Criteo-shaped rows, {len(batches)} batches; "
          f"columnar C library: {'yes' if columnar.library() else columnar.reason()}")
    rows: list[tuple[str, float, float]] = []
    for threads in (1, 2):
        enc = ColumnarEncoder(schema, threads=threads)
        size = 0

        def run() -> None:
            nonlocal size
            size = sum(len(memoryview(buf)) for b in batches for buf in enc.frames(b))

        best = min((_cpu(run) for _ in range(args.rounds)), key=lambda t: t[0])
        rows.append((f"tfpipe columnar, {threads} thread(s), frames", best[0], best[1]))
    print(f"  ({size / n:.0f} framed bytes per row)")
    sub = batches[0].slice(0, min(5000, batches[0].num_rows))
    names = [name for name in schema if name in sub.schema.names]
    data = {name: sub.column(sub.schema.get_field_index(name)).to_pylist() for name in names}

    def python_rows() -> None:
        for r in range(sub.num_rows):
            encode_example({k: ([] if data[k][r] is None else data[k][r]) for k in names}, schema)

    cpu, wall = _cpu(python_rows)
    rows.append(("tfpipe encode_example, row by row (first 5000 rows)",
                 cpu * n / sub.num_rows, wall * n / sub.num_rows))
    peer = Path(args.peer_python)
    peer_cpu = None
    if peer.exists():
        with tempfile.TemporaryDirectory() as tmp:
            ipc = os.path.join(tmp, "rows.arrow")
            with pa.OSFile(ipc, "wb") as f, pa.ipc.new_file(f, batches[0].schema) as w:
                for b in batches:
                    w.write_batch(b)
            proc = subprocess.run([str(peer), "-c", _PEER, ipc, str(args.rounds)],
                                  capture_output=True, text=True,
                                  env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
            if proc.returncode == 0:
                got = json.loads(proc.stdout.strip().splitlines()[-1])
                peer_cpu = got["cpu_s"]
                rows.append(("tfx-bsl RecordBatchToExamplesEncoder (Examples only)",
                             peer_cpu, float("nan")))
            else:
                print(f"tfx-bsl peer failed: {proc.stderr.strip()[-800:]}")
    else:
        print(f"tfx-bsl peer skipped: no {peer} (see this file's docstring to install it)")
    print(f"\n{'encoder':58s} {'CPU-us/row':>11s} {'wall-us/row':>12s} {'x tfx-bsl':>10s}")
    for name, cpu, wall in rows:
        ratio = f"{peer_cpu / cpu:.2f}" if peer_cpu else "-"
        print(f"{name:58s} {cpu / n * 1e6:11.2f} {wall / n * 1e6:12.2f} {ratio:>10s}")


def write_parquet(path: Path, rows: int, chunk: int = 1 << 20) -> None:
    import pyarrow.parquet as pq

    writer = None
    for start in range(0, rows, chunk):
        batch = criteo_batch(min(chunk, rows - start), seed=start)
        if writer is None:
            writer = pq.ParquetWriter(path, batch.schema)
        writer.write_batch(batch, row_group_size=chunk)
    if writer is not None:
        writer.close()


def end_to_end(args: argparse.Namespace) -> None:
    root = Path(args.workdir or tempfile.mkdtemp(prefix="tfpipe-table-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"{'rows':>10s} {'wall s':>8s} {'rows/s':>10s} {'peak RSS MB':>12s} "
          f"{'load':>5s}  (workdir {root}; load: the host's 1-min load average at the "
          f"end, {os.cpu_count()} cores)")
    for rows in args.rows:
        src = root / f"criteo-{rows}.parquet"
        if not src.exists():
            write_parquet(src, rows)
        out = root / f"out-{rows}"
        subprocess.run(["rm", "-rf", str(out)], check=True)
        cmd = [sys.executable, "-m", "tfpipe.cli.main", "convert", str(src), str(out),
               "--split", "train=0.9,val=0.1", "--workers", str(args.workers)]
        if args.stats:
            cmd.append("--stats")
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t
        # ru_maxrss of children is the largest of any one child (KiB on Linux)
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if proc.returncode != 0:
            print(f"convert failed: {proc.stderr[-1500:]}")
            return
        note = "" if rss > before else " (not above an earlier run's peak)"
        print(f"{rows:10d} {wall:8.1f} {rows / wall:10.0f} {rss / 1024:12.0f} "
              f"{os.getloadavg()[0]:5.1f}{note}", flush=True)
        if not args.keep:
            subprocess.run(["rm", "-rf", str(out)], check=True)  # a 45 M-row OUT is ~35 GB


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--encode-rows", type=int, default=400_000)
    p.add_argument("--batch-rows", type=int, default=65_536)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--peer-python", default="/work/tfxbsl-venv/bin/python")
    p.add_argument("--rows", type=int, nargs="*", default=None,
                   help="end-to-end mode: convert generated Parquet tables of these sizes")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--stats", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true", help="keep each OUT (default: removed)")
    args = p.parse_args(argv)
    if args.rows:
        end_to_end(args)
    else:
        encode_mode(args)


if __name__ == "__main__":
    main()
