"""tf.data service vs the local pipeline, on this host, in one run.

Variants, each timed over whole epochs after a warm-up epoch (tracing, the
per-epoch registration): the local pipeline; `off` with one worker (the local
epoch, bit for bit, computed by the worker); `dynamic` with one worker; then a
second worker is started and `dynamic` runs with two. Workers and the
dispatcher are `tfpipe service` processes on 127.0.0.1, so on a 2-core host
they share the SAME two cores with the client: this measures the service's
overhead (serialization, gRPC, the extra process), not a scale-out.

    .venv/bin/python benchmarks/service_bench.py --images 480 --epochs 2

Data: JPEG crops of the bundled photos (`tfpipe.bench._data.write_sample_dataset`,
4 shards with a manifest); output 128x128 float32, batch 32, random-resized
crop + flip + brightness/contrast + normalize.
"""

from __future__ import annotations

import argparse
import os
import signal
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
    """images/s over `epochs` iterations after one warm-up iteration."""
    for _ in ds:
        pass
    n, t = 0, time.perf_counter()
    for _ in range(epochs):
        for b in ds:
            n += int(b["image"].shape[0])
    return n / (time.perf_counter() - t), n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=480)
    ap.add_argument("--epochs", type=int, default=2)
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
    rows = []
    try:
        disp, dport = spawn("dispatcher")
        procs.append(disp)
        target = f"grpc://127.0.0.1:{dport}"
        w1, _ = spawn("worker", "--dispatcher", f"127.0.0.1:{dport}")
        procs.append(w1)
        time.sleep(2)
        rows.append(("local pipeline", *timed(build_pipeline(cfg), args.epochs)))
        rows.append(("service off, 1 worker", *timed(
            build_pipeline(cfg, service=target, processing_mode="off"), args.epochs)))
        rows.append(("service dynamic, 1 worker", *timed(
            build_pipeline(cfg, service=target, processing_mode="dynamic"), args.epochs)))
        w2, _ = spawn("worker", "--dispatcher", f"127.0.0.1:{dport}")
        procs.append(w2)
        time.sleep(2)
        rows.append(("service dynamic, 2 workers", *timed(
            build_pipeline(cfg, service=target, processing_mode="dynamic"), args.epochs)))
        rows.append(("local pipeline (again)", *timed(build_pipeline(cfg), args.epochs)))
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
    ref = rows[0][1]
    print(f"{os.cpu_count()} CPUs; {args.images} images/epoch, {args.epochs} timed epochs each")
    print(f"| variant | images/s | x local |\n|---|---|---|")
    for name, rate, _ in rows:
        print(f"| {name} | {rate:.0f} | {rate / ref:.2f} |")


if __name__ == "__main__":
    main()
