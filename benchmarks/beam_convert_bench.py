"""Conversion time: local process pool vs Apache Beam's DirectRunner, side by side in one run.

    .venv/bin/python benchmarks/beam_convert_bench.py --images 600 --rounds 3

Builds an image folder (tfpipe.sample_data.make_image_folder), then, round-robin for
--rounds rounds, converts it with `--runner local` (--workers 1 and 2) and
`--runner direct` (in_memory, and multi_processing with 2 workers), each into a
fresh directory. Reports the median wall time and images/s of each and its ratio
to local --workers 1 from the same run, and checks every output is byte-identical
to the first local one. Beam's time includes starting its job service and SDK
workers, which is what a user pays per conversion.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

VARIANTS = {
    "local --workers 1": dict(workers=1),
    "local --workers 2": dict(workers=2),
    "direct (in_memory)": dict(runner="direct"),
    "direct multi_processing x2": dict(
        runner="direct",
        pipeline_options="--direct_running_mode=multi_processing --direct_num_workers=2"),
}


def _tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=600)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shard-size", default="4MiB",
                        help="small enough for several shards to share out")
    parser.add_argument("--workdir", default=None, help="default: a temp dir (deleted)")
    args = parser.parse_args(argv)

    import logging

    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    from tfpipe.convert import convert
    from tfpipe.sample_data import make_image_folder

    work = Path(args.workdir or tempfile.mkdtemp(prefix="beam_convert_bench_"))
    src = work / "src"
    try:
        make_image_folder(src, num_classes=args.classes,
                          per_class=max(1, args.images // args.classes), seed=0)
        n = sum(1 for p in src.rglob("*") if p.is_file())
        mb = sum(p.stat().st_size for p in src.rglob("*") if p.is_file()) / 1e6
        print(f"{n} images, {mb:.1f} MB, shard size {args.shard_size}, "
              f"{os.cpu_count()} CPUs")
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        reference: dict[str, bytes] | None = None
        for r in range(args.rounds):
            for name, kwargs in VARIANTS.items():
                out = work / f"out-{r}-{len(times[name])}-{name.split()[0]}"
                start = time.perf_counter()
                convert(src, out, shard_size=args.shard_size, **kwargs)
                times[name].append(time.perf_counter() - start)
                tree = _tree(out)
                if reference is None:
                    reference = tree
                elif tree != reference:
                    raise SystemExit(f"{name}: output differs from local --workers 1")
                shutil.rmtree(out)
        base = statistics.median(times["local --workers 1"])
        print(f"{'variant':28s} {'median s':>9s} {'images/s':>9s} {'vs local w1':>12s}")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"{name:28s} {med:9.2f} {n / med:9.0f} {med / base:11.1f}x")
        print("all outputs byte-identical")
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
