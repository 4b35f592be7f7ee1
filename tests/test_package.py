"""Package-level behaviour: the TensorFlow install hint, the CLI verb table, cgroup limits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tfpipe import system
from tfpipe.cli.main import VERBS, cli

BLOCK_TF = "import sys; sys.modules['tensorflow'] = None; "


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


def test_import_without_tensorflow_names_the_extra() -> None:
    r = _run(BLOCK_TF + "import tfpipe")
    assert r.returncode != 0
    assert "ImportError" in r.stderr
    assert "pip install 'tfpipe[cpu]'" in r.stderr and "'tfpipe[gpu]'" in r.stderr


def test_cli_without_tensorflow_fails_with_the_hint() -> None:
    r = _run(BLOCK_TF + "from tfpipe.cli.main import main; main()")
    assert r.returncode != 0
    assert r.stderr.strip().splitlines()[-1].startswith("ImportError: tfpipe needs TensorFlow")
    assert "tfpipe[cpu]" in r.stderr


def test_every_verb_in_the_table_has_a_module_with_help() -> None:
    from click.testing import CliRunner

    runner = CliRunner()
    for verb in VERBS:
        result = runner.invoke(cli, [verb, "--help"])
        assert result.exit_code == 0, (verb, result.output)
        assert "Usage:" in result.output


def test_cpu_quota_caps_available_cpus(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # 1.5 CPUs -> 2
    assert system.available_cpus(tmp_path) <= 2
    (tmp_path / "cpu.max").write_text("50000 100000\n")  # 0.5 CPU -> 1
    assert system.available_cpus(tmp_path) == 1
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert system.available_cpus(tmp_path) >= 1


def test_memory_limit_caps_available_memory(tmp_path: Path) -> None:
    (tmp_path / "memory.max").write_text(str(256 << 20))
    assert system.available_memory_bytes(tmp_path) == 256 << 20
    (tmp_path / "memory.max").write_text("max")
    assert system.available_memory_bytes(tmp_path) > 256 << 20
