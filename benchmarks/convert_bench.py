"""Conversion throughput vs a plain copy of the same files, side by side in one run.

    .venv/bin/python benchmarks/convert_bench.py --images 1500 --rounds 5

Builds an image folder of JPEG/PNG crops (tfpipe.sample_data.make_image_folder),
then, round-robin for --rounds rounds: `shutil.copytree`, `cp -r`, and
`tfpipe.convert.convert` at --workers 1 and 2 (--shard-size 16MiB so that
there are several shards to share out). Reports the median images/s and MB/s (source bytes) of each, and its
ratio to copytree measured in the same run. Note that convert fsyncs every
shard and the copies do not; the page cache is warm for all variants.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1500)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shard-size", default="16MiB",
                        help="small enough for several shards, so --workers 2 has work to split")
    parser.add_argument("--workdir", default=None, help="default: a temp dir (deleted)")
    args = parser.parse_args(argv)

    from tfpipe.convert import convert
    from tfpipe.sample_data import make_image_folder
    from tfpipe.system import available_cpus

    work = Path(args.workdir or tempfile.mkdtemp(prefix="convert_bench_"))
    src = work / "src"
    if not src.exists():
        t = _timed(lambda: make_image_folder(src, num_classes=args.classes,
                                             per_class=args.images // args.classes, seed=0))
        print(f"built {src} in {t:.1f}s")
    files = [p for p in src.rglob("*") if p.is_file()]
    total_bytes = sum(p.stat().st_size for p in files)
    n = len(files)
    print(f"{n} images, {total_bytes / 1e6:.1f} MB (mean {total_bytes / n / 1e3:.1f} KB); "
          f"CPUs available: {available_cpus()}; python {sys.version.split()[0]}")
    for p in files:  # warm the page cache for every variant alike
        p.read_bytes()

    def run_convert(workers: int) -> Callable[[], object]:
        return lambda: convert(src, work / "out", workers=workers, shard_size=args.shard_size)

    variants: dict[str, Callable[[], object]] = {
        "shutil.copytree": lambda: shutil.copytree(src, work / "out"),
        "cp -r": lambda: subprocess.run(["cp", "-r", str(src), str(work / "out")], check=True),
        "convert --workers 1": run_convert(1),
        "convert --workers 2": run_convert(2),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.rounds):
        for name, fn in variants.items():
            shutil.rmtree(work / "out", ignore_errors=True)
            times[name].append(_timed(fn))
    shutil.rmtree(work / "out", ignore_errors=True)

    base = statistics.median(times["shutil.copytree"])
    print(f"\n{'variant':<22}{'median s':>10}{'images/s':>11}{'MB/s':>9}{'x copytree':>12}"
          f"   all rounds (s)")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<22}{med:>10.3f}{n / med:>11.0f}{total_bytes / 1e6 / med:>9.1f}"
              f"{base / med:>12.2f}   {', '.join(f'{t:.3f}' for t in ts)}")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
