"""build_pipeline(..., service=...) on TensorFlow's tf.data service (issue 13).

Servers are `tfpipe service` processes on 127.0.0.1 (conftest.Cluster), except
the single-worker `off` test, which starts the same servers in this process
through `tfpipe.service`. The oracle is the local pipeline (`build_pipeline`
without `service`), itself tested against TF's own ops elsewhere.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfpipe.errors import ConfigError
from tfpipe.pipeline import build_pipeline

from .conftest import Cluster, child_env, config, write_data

HERE = Path(__file__).resolve().parent


def by_index(ds) -> dict[int, tuple[bytes, int]]:
    out: dict[int, tuple[bytes, int]] = {}
    for batch in ds:
        for i, idx in enumerate(batch["index"].numpy()):
            assert int(idx) not in out, f"sample {idx} delivered twice"
            out[int(idx)] = (batch["image"][i].numpy().tobytes(), int(batch["label"][i]))
    return out


def batch_keys(ds) -> list[bytes]:
    return [b["image"].numpy().tobytes() + b["label"].numpy().tobytes()
            + b["index"].numpy().tobytes() for b in ds]


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(workers=2)
    try:
        yield c
    finally:
        c.close()
    # SIGTERM stops every server cleanly (exit status 0)
    assert [p.returncode for p in c.procs] == [0, 0, 0]


@pytest.mark.slow
def test_off_single_worker_is_the_local_pipeline_in_order(data):
    """One worker, `off`: the local epochs bit for bit, in order; the second
    iteration is epoch 1 (the epoch counter stays local, each epoch its own job)."""
    from tfpipe import service

    d = service.start_dispatcher()
    w = service.start_worker(d.address)
    try:
        assert w.native  # the worker process has tfpipe's kernels
        cfg = config(data, drop_remainder=True)
        local = build_pipeline(cfg, keep_index=True)
        expected = [batch_keys(local), batch_keys(local)]
        assert expected[0] != expected[1]
        remote = build_pipeline(cfg, keep_index=True, service=d.target, processing_mode="off")
        assert [batch_keys(remote), batch_keys(remote)] == expected
    finally:
        w.stop()
        d.stop()


def _indexed(batches: list[dict]) -> dict[int, tuple[bytes, int]]:
    out: dict[int, tuple[bytes, int]] = {}
    for b in batches:
        for i, idx in enumerate(b["index"]):
            assert int(idx) not in out, f"sample {idx} delivered twice"
            out[int(idx)] = (b["image"][i].tobytes(), int(b["label"][i]))
    return out


def _keys(batches: list[dict]) -> list[bytes]:
    return [b["image"].tobytes() + b["label"].tobytes() + b["index"].tobytes()
            for b in batches]


@pytest.mark.slow
def test_two_worker_processes_dynamic_and_off(cluster, data):
    """Two worker processes. `dynamic`: each sample of the epoch exactly once,
    each bit-identical to the local pipeline's sample of the same index, and the
    next iteration is the next epoch, under a job name shared per epoch. `off`
    (TF's OFF policy): every worker runs the whole epoch, so the consumer receives
    every local batch exactly twice, bit for bit."""
    cfg = config(data)
    local = build_pipeline(cfg, keep_index=True)
    epochs = [[{k: v.numpy() for k, v in b.items()} for b in local] for _ in range(2)]
    want = [_indexed(e) for e in epochs]
    remote = build_pipeline(cfg, keep_index=True, service=cluster.target,
                            processing_mode="dynamic", job_name="trainer")
    got = [by_index(remote), by_index(remote)]
    assert sorted(got[0]) == list(range(48))
    assert got == want
    off = collections.Counter(batch_keys(build_pipeline(
        cfg, keep_index=True, service=cluster.target, processing_mode="off")))
    assert off == collections.Counter({k: 2 * n for k, n in
                                       collections.Counter(_keys(epochs[0])).items()})


@pytest.mark.slow
def test_killed_worker_restarted_the_client_finishes_at_most_once(tmp_path):
    """SIGKILL one of two workers mid-epoch (dynamic). TF's client does not give up
    on a dead worker: it retries it (WARNING "Failed to get element from worker
    ... will retry"), so without a restart it can wait indefinitely (measured;
    docs/scale.md). Restarted on the same address, as a supervisor would, the
    worker rejoins, the client FINISHES within a bound, and what the dead worker
    held is lost: every sample at most once (their bits: the test above)."""
    path = write_data(tmp_path / "d", num=120, shards=6)
    cfg = config(path)
    c = Cluster(workers=2, worker_timeout_ms=2000)
    client = None
    try:
        # a slow trainer (0.3 s per batch of 4) so the kill lands mid-epoch
        client = subprocess.Popen(
            [sys.executable, str(HERE / "client_child.py"), json.dumps(cfg), c.target,
             "dynamic", "0.3"], env=child_env(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        lines = [client.stdout.readline() for _ in range(3)]
        assert all(line.startswith("{") for line in lines), client.stderr.read()[-2000:]
        c.workers[0].kill()
        c.workers[0].wait(timeout=30)
        killed = time.monotonic()
        time.sleep(3)  # down for longer than worker_timeout_ms
        c.restart_worker(0)
        out, err = client.communicate(timeout=120)
        elapsed = time.monotonic() - killed
    finally:
        if client is not None and client.poll() is None:
            client.kill()
            client.communicate()
        c.close()
    assert client.returncode == 0, err[-2000:]
    assert out.splitlines()[-1] == "DONE"
    rows = [json.loads(x) for x in lines + out.splitlines() if x.startswith("{")]
    indices = [i for r in rows for i in r["index"]]
    assert len(indices) == len(set(indices)), "a sample arrived twice"
    assert set(indices) <= set(range(120))
    assert len(indices) > 3 * 4  # it went on after the kill
    print(f"killed + restarted worker: client finished {elapsed:.1f} s after the kill "
          f"with {len(indices)}/120 samples")


def test_service_argument_errors(data):
    cfg = config(data)
    with pytest.raises(ConfigError, match="processing_mode: must be one of off, dynamic"):
        build_pipeline(cfg, service="grpc://127.0.0.1:1", processing_mode="parallel")
    with pytest.raises(ConfigError, match="pipeline.cache"):
        build_pipeline(config(data, cache="memory"), service="grpc://127.0.0.1:1")
    with pytest.raises(ConfigError, match="worker=: not with processing_mode='dynamic'"):
        build_pipeline(cfg, worker=(0, 2), service="grpc://127.0.0.1:1",
                       processing_mode="dynamic")


def test_worker_rejects_a_bad_dispatcher_address():
    out = subprocess.run(
        [sys.executable, "-c", "from tfpipe.cli.main import main; main()", "service",
         "worker", "--dispatcher", "nohost", "--port", "0"],
        env=child_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--dispatcher: expected HOST:PORT, got 'nohost'" in out.stderr


def test_fault_tolerant_dispatcher_resumes_from_its_journal(tmp_path):
    """--work-dir: a dispatcher restarted on the same port and directory still
    knows the datasets registered before (TF's journal), and serves them."""
    import tensorflow as tf

    from tfpipe import service

    d = service.start_dispatcher(work_dir=str(tmp_path / "journal"))
    port = d.port
    ds = tf.data.Dataset.range(5)
    dataset_id = tf.data.experimental.service.register_dataset(d.target, ds)
    d.stop()
    assert any((tmp_path / "journal").iterdir())
    d = service.start_dispatcher(port, work_dir=str(tmp_path / "journal"))
    w = service.start_worker(d.address)
    try:
        got = tf.data.experimental.service.from_dataset_id(
            "parallel_epochs", d.target, dataset_id, ds.element_spec)
        assert [int(x) for x in got] == [0, 1, 2, 3, 4]
    finally:
        w.stop()
        d.stop()
