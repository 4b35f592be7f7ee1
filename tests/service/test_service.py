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


GUARD_S = 15  # service_timeout_s of the guarded clients (the first element may take 3x)
BOUND_S = 150  # each client must end this soon after the kill (load: measured 18-54 s)


def _client(cfg: dict, target: str, mode: str, timeout: str) -> subprocess.Popen:
    # a slow trainer (0.3 s per batch of 4) so the kill lands mid-epoch
    return subprocess.Popen(
        [sys.executable, str(HERE / "client_child.py"), json.dumps(cfg), target, mode, "0.3",
         timeout], env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, head: list[str],
            killed: float) -> tuple[list[int], str, float]:
    """(indices received, last line, seconds after the kill) of a client that must end
    within BOUND_S of the kill; a client still running then is killed and fails the test."""
    try:
        out, err = proc.communicate(timeout=max(1.0, BOUND_S - (time.monotonic() - killed)))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the client still waited {BOUND_S} s after the kill: it hangs")
    elapsed = time.monotonic() - killed
    lines = head + out.splitlines()
    assert proc.returncode in (0, 3), err[-2000:]
    rows = [json.loads(x) for x in lines if x.startswith("{")]
    return [i for r in rows for i in r["index"]], lines[-1], elapsed


def _ended(mode: str, target: str, last: str) -> str:
    """"finished" or "failed" (with tfpipe's message, checked); anything else fails."""
    if last == "DONE":
        return "finished"
    assert last.startswith(f"ERROR tfpipe: tf.data service {target} (processing_mode="
                           f"{mode}) delivered nothing for "), last
    assert f"(service_timeout_s={GUARD_S}) in epoch 0 after " in last
    assert "Restart that worker on the same address" in last
    return "failed"


@pytest.mark.slow
def test_a_killed_worker_ends_the_epoch_within_the_bound_and_a_restart_finishes_it(
        cluster, tmp_path):
    """SIGKILL one of two worker processes mid-epoch, never restarted. What TF does
    depends on whether the dead worker had already produced its whole share (and
    told the dispatcher): then the job ends and the client FINISHES without what
    the dead worker still buffered; else TF's client waits forever, in both modes
    (the dispatcher keeps the dead worker's task in the job). With
    `service_timeout_s` the second case FAILS within the bound with tfpipe's
    message. Either way within BOUND_S: `dynamic` every sample at most once, `off`
    at most twice (k=2 copies); the test prints which ending each client got. A
    third, unguarded client shows the other way out: the worker restarted on its
    address (what a supervisor does) rejoins and that client FINISHES, at most once.
    Uses the module's cluster (one start less) and leaves it whole: worker 0 restarted."""
    path = write_data(tmp_path / "d", num=120, shards=6)
    cfg = config(path)
    c = cluster
    clients: dict[str, subprocess.Popen] = {}
    try:
        clients = {"dynamic": _client(cfg, c.target, "dynamic", str(GUARD_S)),
                   "off": _client(cfg, c.target, "off", str(GUARD_S)),
                   "restarted": _client(cfg, c.target, "dynamic", "none")}
        heads = {k: [p.stdout.readline() for _ in range(3)] for k, p in clients.items()}
        for k, lines in heads.items():
            assert all(x.startswith("{") for x in lines), (k, clients[k].stderr.read()[-2000:])
        c.workers[0].kill()
        c.workers[0].wait(timeout=30)
        c.procs.remove(c.workers[0])  # the fixture checks that the others stop cleanly
        killed = time.monotonic()
        dyn, dyn_last, dyn_s = _finish(clients["dynamic"], heads["dynamic"], killed)
        off, off_last, off_s = _finish(clients["off"], heads["off"], killed)
        waiting = clients["restarted"].poll() is None  # unguarded: finished, or waits
        c.restart_worker(0)
        time.sleep(1.5)  # its first heartbeat; and its SIGTERM handler is in place
        again, again_last, again_s = _finish(clients["restarted"], heads["restarted"], killed)
    finally:
        for p in clients.values():
            if p.poll() is None:
                p.kill()
                p.communicate()
        if c.workers[0].poll() is not None:  # not restarted (the test failed first)
            c.restart_worker(0)
    endings = {"dynamic": _ended("dynamic", c.target, dyn_last),
               "off": _ended("off", c.target, off_last)}
    assert len(dyn) == len(set(dyn)) and set(dyn) <= set(range(120))  # at most once
    counts = collections.Counter(off)
    assert set(counts) <= set(range(120)) and max(counts.values()) <= 2
    assert again_last == "DONE"
    assert len(again) == len(set(again)) and set(again) <= set(range(120))
    print(f"killed, not restarted: dynamic {endings['dynamic']} {dyn_s:.1f} s after the kill "
          f"({len(dyn)}/120 samples), off {endings['off']} {off_s:.1f} s after ({len(off)} "
          f"samples, {len(counts)} distinct); unguarded client "
          f"{'still waiting' if waiting else 'had finished'} then, finished "
          f"{again_s:.1f} s after the kill ({len(again)}/120)")


def test_service_argument_errors(data):
    cfg = config(data)
    for bad in (0, -1, "10", True, 1e9):
        with pytest.raises(ConfigError, match=r"service_timeout_s: must be a number of "
                                              r"seconds in \[1, 86400\], or None"):
            build_pipeline(cfg, service="grpc://127.0.0.1:1", service_timeout_s=bad)
    from tfpipe import service

    with pytest.raises(ValueError, match="job_gc_timeout_ms: must be an int >= 100"):
        service.start_dispatcher(job_gc_timeout_ms=5)
    with pytest.raises(ValueError, match="heartbeat_ms: must be an int >= 100"):
        service.start_worker("127.0.0.1:1", heartbeat_ms=0)
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
