"""Clean output: no TensorFlow start-up log lines; off a terminal, nothing is
wrapped or cut, so `tfpipe verify DAMAGED | grep SHARD` finds the shard."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tfpipe.cli._quiet import configure, filtered_stderr, keep_lines
from tfpipe.cli.main import cli

from .conftest import DAMAGED_SHARD, pipeline_args

# TensorFlow's / absl's log line prefixes (I0000 00:00:1712345678.123456 1234 port.cc:153])
TF_LOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:[\d.]+\s+\d+ \S+:\d+\]|absl::InitializeLog|oneDNN",
                    re.M)


@pytest.mark.slow  # ~9 s: a fresh process imports TensorFlow
def test_a_cli_run_prints_no_tf_log_line_and_greps_whole_names(datasets: dict[str, Path]
                                                                ) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "COLUMNS", "TFPIPE_DEBUG")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path(__file__).parents[2] / "src"),
                                                   env.get("PYTHONPATH", "")] if p)
    # --deep imports TensorFlow (it decodes every image), stdout and stderr are pipes
    proc = subprocess.run([sys.executable, "-m", "tfpipe.cli.main", "verify",
                           str(datasets["dmgshard"]), "--deep"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert not TF_LOG.search(proc.stderr), proc.stderr
    shard = str(datasets["dmgshard"] / DAMAGED_SHARD)
    hits = [ln for ln in proc.stdout.splitlines() if shard in ln]  # what grep finds
    assert len(hits) >= 3, proc.stdout  # checksum, corrupted-data, count findings
    assert any("corrupted-data" in ln and re.search(r"\b\d{3,}\b", ln) for ln in hits)
    assert "tfpipe verify" in proc.stdout and "--salvage" in proc.stdout


def test_the_filter_drops_only_tf_lines_below_the_level(capfd: pytest.CaptureFixture) -> None:
    banner = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    info = b"I0000 00:00:1796125174.949293    3192 port.cc:153] oneDNN custom operations are on.\n"
    warn = b"W0000 00:00:1796125274.044639    6848 local_rendezvous.cc:412] Local rendezvous\n"
    err = b"E0000 00:00:1758131437.297298 3722519 cuda_dnn.cc:8579] Unable to register\n"
    user = b"a line of the user's own: I0000 is not at the start\n"
    lines = [banner, info, user, banner, warn, err]
    kept = {level: b"".join(keep_lines(lines, level)) for level in range(4)}
    assert kept[0] == b"".join(lines)
    assert kept[1] == user + banner + warn + err  # the banner only before a kept line
    assert kept[2] == user + banner + err
    assert kept[3] == user
    capfd.readouterr()
    with filtered_stderr(2):  # fd 2 itself, as TF's C++ code writes it
        os.write(2, banner + info + user[:20])
        os.write(2, user[20:] + warn)
        sys.stderr.write("python's own stderr\n")
    # (pytest's sys.stderr bypasses fd 2, so only the set of lines is checked)
    assert sorted(capfd.readouterr().err.splitlines(True)) == sorted(
        [user.decode(), "python's own stderr\n"])


def test_a_level_the_user_set_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert configure(verbose=False) == 0
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL")
    assert configure(verbose=True) == 0
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL")
    assert configure(verbose=False) == 2
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"


def test_tables_off_a_terminal_keep_names_whole(datasets: dict[str, Path]) -> None:
    # CliRunner's stdout is not a terminal, like a pipe
    r = CliRunner().invoke(cli, ["inspect", str(datasets["good"]), "-n", "3"],
                           catch_exceptions=False)
    assert r.exit_code == 0
    header = next(ln for ln in r.output.splitlines() if "height x width" in ln)
    assert "image bytes" in header and "filename" in header
    rows = [ln for ln in r.output.splitlines() if "train-00000-of-00002.tfrecord" in ln]
    assert len(rows) == 3 and all(re.search(r"\b\d+x\d+\b", ln) for ln in rows)
    assert all(re.search(r"\w+/\d{5}\.jpg", ln) for ln in rows)  # whole source names
    assert "…" not in r.output

    r = CliRunner().invoke(cli, ["doctor", "cifar", *pipeline_args(datasets["good"])],
                           catch_exceptions=False)
    # a long finding (the cifar preset's serial-determinism info) whole on one line
    assert any("deterministic=True on a parallel" in ln and "resume at a step)" in ln
               for ln in r.output.splitlines()), r.output
