"""tf.data service vs the local pipeline, on this host, in one run.

Variants, each timed over whole epochs (each one registers its epoch's graph)
after a warm-up epoch, in alternating rounds: the local pipeline; `off` with one
worker (the local epoch, bit for bit, computed by the worker); `dynamic` with
one worker; `dynamic` with two (a second dispatcher with two workers). Workers and the
dispatcher are `tfpipe service` processes on 127.0.0.1, so on a 2-core host
they share the SAME two cores with the client: this measures the service's
overhead (serialization, gRPC, the extra process), not a scale-out.

    .venv/bin/python benchmarks/service_bench.py --images 320 --rounds 2

Data: JPEG crops of the bundled photos (`tfpipe.bench._data.write_sample_dataset`,
4 shards with a manifest); output 128x128 float32, batch 32, random-resized
crop + flip + brightness/contrast + normalize.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
SRC = str(Path(__file__).resolve().parents[1] / "src")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(*args: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", "from tfpipe.cli.main import main; main()",
                             "service", *args, "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 120
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port
        if proc.poll() is not None:
            raise RuntimeError(f"tfpipe service {args[0]} exited {proc.returncode}")
        time.sleep(0.2)
    raise TimeoutError(args[0])


def timed(ds, epochs: int) -> tuple[float, int]:
    """images/s over the next `epochs` iterations (epochs) of `ds`."""
    n, t = 0, time.perf_counter()
    for _ in range(epochs):
        for b in ds:
            n += int(b["image"].shape[0])
    return n / (time.perf_counter() - t), n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=320)
    ap.add_argument("--epochs", type=int, default=1, help="timed epochs per variant and round")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, SRC)
    from tfpipe.bench._data import write_sample_dataset
    from tfpipe.pipeline import build_pipeline

    tmp = Path(tempfile.mkdtemp(prefix="svcbench-"))
    data = write_sample_dataset(tmp / "data", n=args.images, shards=4,
                                size_range=(160, 260))
    cfg = {"seed": 1, "data": {"path": str(data), "image_size": [128, 128]},
           "pipeline": {"batch_size": 32, "shuffle_buffer": 256, "cache": "none"},
           "augment": {"geometry": {"random_resized_crop": {}, "flip": {"horizontal": True}},
                       "pixel": {"brightness": {"max_delta": 0.3},
                                 "contrast": {"lower": 0.7, "upper": 1.3}}}}
    procs = []
    rates: dict[str, list[float]] = {}
    try:
        # two clusters: one worker behind A, two behind B (idle servers cost nothing)
        a, aport = spawn("dispatcher")
        b, bport = spawn("dispatcher")
        procs += [a, b]
        for port, n in ((aport, 1), (bport, 2)):
            for _ in range(n):
                procs.append(spawn("worker", "--dispatcher", f"127.0.0.1:{port}")[0])
        time.sleep(2)
        one, two = f"grpc://127.0.0.1:{aport}", f"grpc://127.0.0.1:{bport}"
        variants = {
            "local pipeline": build_pipeline(cfg),
            "service off, 1 worker": build_pipeline(cfg, service=one, processing_mode="off"),
            "service dynamic, 1 worker": build_pipeline(cfg, service=one,
                                                        processing_mode="dynamic"),
            "service dynamic, 2 workers": build_pipeline(cfg, service=two,
                                                         processing_mode="dynamic"),
        }
        for ds in variants.values():  # warm-up: tracing, first registration
            for _ in ds:
                pass
        for _ in range(args.rounds):  # alternating rounds: drift hits every variant
            for name, ds in variants.items():
                rates.setdefault(name, []).append(timed(ds, args.epochs)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
    ref = rates["local pipeline"]
    print(f"{os.cpu_count()} CPUs; {args.images} images/epoch, {args.rounds} rounds x "
          f"{args.epochs} epoch(s); ratio = per round vs the local pipeline of that round")
    print("| variant | images/s (rounds) | x local (median) |\n|---|---|---|")
    for name, r in rates.items():
        ratio = statistics.median(x / y for x, y in zip(r, ref))
        print(f"| {name} | {' / '.join(f'{x:.0f}' for x in r)} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
