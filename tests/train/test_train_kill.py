"""SIGKILL mid-epoch, resume in a new process: the same batches, the same weights.

Keras `fit` (`tfpipe.train.fit`) and a custom `tf.function` loop under
`MirroredStrategy` on two logical CPUs (`tfpipe.train.epochs(strategy=...)`,
one input pipeline per replica) train 2 epochs x 8 steps, checkpointing every
2 steps (train_child.py). The interrupted run trains batch 4 of epoch 0 (one
past the checkpoint at step 4), signals the parent, and is killed with
SIGKILL; a new process resumes from the checkpoint. The batches it trains on
(per-step digests of the exact bytes) are those of an uninterrupted run from
(0, 4) on, and with op determinism the final weights are equal. The
uninterrupted run's replicas also see disjoint records that together are the
epoch (labels are record ids).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tfpipe

CHILD = Path(__file__).with_name("train_child.py")
SRC = str(Path(tfpipe.__file__).resolve().parents[1])
TIMEOUT = 600  # per child, generous: the CI machine is shared


def _env(halt: str | None = None, work: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=SRC, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TFPIPE_TEST_HALT", None)
    if halt:
        env["TFPIPE_TEST_HALT"], env["TFPIPE_TEST_HALT_WORK"] = halt, str(work)
    return env


def _run(data: str, *runs: str) -> None:
    proc = subprocess.run([sys.executable, str(CHILD), data, *runs],
                          env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _run_and_kill(data: str, work: Path, halt: str, *runs: str) -> None:
    """Run the child until the mode named in `halt` signals in `work`, then SIGKILL it."""
    marker = work / halt.split(":")[0] / "halted"
    log = open(work.parent / f"{work.name}-{halt.split(':')[0]}.log", "w")
    proc = subprocess.Popen([sys.executable, str(CHILD), data, *runs],
                            env=_env(halt, work), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not marker.exists():
            assert proc.poll() is None, f"child exited {proc.returncode} before halting"
            assert time.monotonic() < deadline, "child did not reach the halt step"
            time.sleep(0.2)
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _weights(path: Path) -> list[np.ndarray]:
    with np.load(path) as z:
        return [z[k] for k in sorted(z.files, key=lambda k: int(k.split("_")[1]))]


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_is_exact(train_dataset, tmp_path):
    ref, run = tmp_path / "ref", tmp_path / "run"
    # 1: the uninterrupted runs, then a keras run killed at (0, 4)
    _run_and_kill(train_dataset, run, "keras:0:4", f"{ref}:keras", f"{ref}:custom",
                  f"{run}:keras")
    # 2: keras resumes to the end; then the custom loop starts and is killed
    _run_and_kill(train_dataset, run, "custom:0:4", f"{run}:keras", f"{run}:custom")
    # 3: the custom loop resumes to the end
    _run(train_dataset, f"{run}:custom")

    for mode in ("keras", "custom"):
        want = _lines(ref / mode / "digests.jsonl")
        assert [(d["epoch"], d["step"]) for d in want] == [(e, k) for e in (0, 1)
                                                          for k in range(8)]
        got = _lines(run / mode / "digests.jsonl")
        # killed run: steps 0..4 (batch 4 trained past the checkpoint at step 4) ...
        assert got[:5] == want[:5], mode
        # ... the resumed process: from the checkpoint (0, 4) to the end, exactly
        assert got[5:] == want[4:], mode
        for a, b in zip(_weights(ref / mode / "weights.npz"),
                        _weights(run / mode / "weights.npz")):
            assert np.array_equal(a, b), mode

    labels = json.loads((ref / "custom" / "labels.json").read_text())
    r0, r1 = set(labels["0"]), set(labels["1"])
    assert len(labels["0"]) == len(r0) == 32 and len(labels["1"]) == len(r1) == 32
    assert not r0 & r1
    assert r0 | r1 == set(range(64))  # the two replicas' parts together: the epoch
