"""Local tf.data service clusters (dispatcher + workers as `tfpipe service` processes on
127.0.0.1, killed at the end) and a small classification dataset."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tfpipe

SRC = str(Path(tfpipe.__file__).resolve().parents[1])  # the children run this same tfpipe
NUM = 48
CLASSES = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=SRC, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    return env


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from tfpipe.cli.main import main; main()", *args]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: "
                               f"{proc.stderr.read().decode(errors='replace')[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


class Cluster:
    """A dispatcher and `workers` workers, each a `tfpipe service` process."""

    def __init__(self, workers: int, worker_timeout_ms: int = 2000) -> None:
        self.procs: list[subprocess.Popen] = []
        self.port = free_port()
        self.dispatcher = self._spawn(
            "dispatcher", "--port", str(self.port), "--worker-timeout-ms", str(worker_timeout_ms))
        wait_port(self.port, self.dispatcher)
        self.workers = []
        ports = [free_port() for _ in range(workers)]
        for p in ports:
            self.workers.append(self._spawn("worker", "--dispatcher", f"127.0.0.1:{self.port}",
                                            "--port", str(p)))
        for p, w in zip(ports, self.workers):
            wait_port(p, w)
        time.sleep(1.5)  # a heartbeat (1 s) registers each worker with the dispatcher

    def restart_worker(self, k: int) -> None:
        """Start worker k again on its port (what a supervisor does after a crash)."""
        args = self.workers[k].args
        port = args[args.index("--port") + 1]
        self.workers[k] = self._spawn("worker", "--dispatcher", f"127.0.0.1:{self.port}",
                                      "--port", port)
        wait_port(int(port), self.workers[k])

    def _spawn(self, *args: str) -> subprocess.Popen:
        proc = subprocess.Popen(cli("service", *args), env=child_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.procs.append(proc)
        return proc

    @property
    def target(self) -> str:
        return f"grpc://127.0.0.1:{self.port}"

    def close(self) -> None:
        for p in self.procs:  # SIGTERM: the servers stop cleanly
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=15)


def write_data(out: Path, num: int = NUM, shards: int = 3) -> str:
    """Glob of `shards` shards of small JPEG/PNG photo crops (no manifest: counts are read)."""
    import tensorflow as tf

    from tfpipe import sample_data

    rng = np.random.default_rng(0)
    photos = list(sample_data.source_photos().values())
    records = []
    for i in range(num):
        img = sample_data.random_crop(photos[i % len(photos)], rng, (40, 70))
        fmt = "png" if i % 5 == 2 else "jpeg"
        feat = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[sample_data.encode(img, fmt)])),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(
                    value=[i % CLASSES]))}
        records.append(tf.train.Example(
            features=tf.train.Features(feature=feat)).SerializeToString())
    out.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        with tf.io.TFRecordWriter(str(out / f"train-{s:05d}-of-{shards:05d}.tfrecord")) as w:
            for r in records[s::shards]:
                w.write(r)
    return str(out / "train-*.tfrecord")


@pytest.fixture(scope="session")
def data(tmp_path_factory) -> str:
    return write_data(tmp_path_factory.mktemp("svc"))


def config(path: str, **pipeline) -> dict:
    return {
        "seed": 11,
        "data": {"path": path, "image_size": [24, 24], "num_classes": CLASSES},
        "pipeline": {"batch_size": 4, "shuffle_buffer": 32, "num_parallel_calls": 2,
                     **pipeline},
        "augment": {
            "geometry": {"random_resized_crop": {"scale": [0.2, 1.0]},
                         "flip": {"horizontal": True, "p": 0.5}},
            "pixel": {"brightness": {"max_delta": 0.3}, "contrast": {"lower": 0.7,
                                                                      "upper": 1.3}},
        },
    }
