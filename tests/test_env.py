"""`tfpipe env --json` reports what this process may use, checked against the OS and TF."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from tfpipe.cli.main import cli
from tfpipe.system import available_cpus, available_memory_bytes


def test_env_json() -> None:
    import tensorflow as tf

    r = CliRunner().invoke(cli, ["env", "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["cpus"] == {"available": available_cpus(), "os_cpu_count": os.cpu_count()}
    assert 1 <= info["cpus"]["available"] <= len(os.sched_getaffinity(0))
    assert info["memory_bytes"]["available"] == available_memory_bytes()
    t = info["tensorflow"]
    assert t["installed"] and t["version"] == tf.__version__
    assert t["build"]["is_cuda_build"] == tf.sysconfig.get_build_info()["is_cuda_build"]
    assert {d["name"] for d in t["devices"]} == {
        d.name for d in tf.config.list_physical_devices()}
    assert t["gpus"] == len(tf.config.list_physical_devices("GPU"))
    assert isinstance(t["xla"]["available"], bool)
    r = CliRunner().invoke(cli, ["env"])
    assert r.exit_code == 0 and "TensorFlow" in r.output and tf.__version__ in r.output


# ------------------------------------------------------------ switches (issue 22, item 13)

REMOVED = ("TFPIPE_BLOCK_PATH", "TFPIPE_BLOCK_WRITE_OUT", "TFPIPE_BLOCK_SCHED",
           "TFPIPE_NATIVE_ISA", "TFPIPE_ALIGNED_CROP")
ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def test_only_the_registry_reads_tfpipe_variables() -> None:
    """Python reads TFPIPE_* only in tfpipe/switches.py; C++ reads no environment
    variable (its choices are op attributes); the benchmark-only variables are
    gone from the product, its benchmarks and its docs."""
    import re

    src = ROOT / "src" / "tfpipe"
    readers = re.compile(r"(os\.environ|getenv)[^\n]*TFPIPE_|TFPIPE_\w+[\"']?\s*\)?\s*in os\.environ")
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in src.rglob("*.py") if p.name != "switches.py"
                 for i, line in enumerate(p.read_text().splitlines(), 1) if readers.search(line)]
    assert offenders == []
    assert [str(p.relative_to(ROOT)) for p in src.rglob("*.cc") if "getenv" in p.read_text()] == []
    mentions = [f"{p.relative_to(ROOT)}: {name}"
                for folder in ("src", "benchmarks", "docs", "scripts")
                for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".cc", ".sh")
                and p.name != "performance-history.md"  # the dated record of earlier runs
                for name in REMOVED if name in p.read_text()]
    assert mentions == []


def test_every_switch_is_documented_and_shown_by_env() -> None:
    from tfpipe import switches

    assert sorted(switches.SWITCHES) == ["TFPIPE_DEBUG", "TFPIPE_NATIVE", "TFPIPE_NATIVE_BUILD",
                                         "TFPIPE_NATIVE_CACHE"]
    doc = (ROOT / "docs" / "config.md").read_text()
    section = doc[doc.index("## Environment switches"):]
    for name in switches.SWITCHES:
        assert f"`{name}`" in section, name
    r = CliRunner().invoke(cli, ["env", "--json"])
    assert r.exit_code == 0, r.output
    shown = json.loads(r.output)["switches"]
    assert sorted(shown) == sorted(switches.SWITCHES)
    for name, row in shown.items():
        assert row["set"] == (name in os.environ)
        assert row["value"] == switches.get(name)
    r = CliRunner().invoke(cli, ["env"])
    assert all(name in r.output for name in switches.SWITCHES), r.output


def test_a_bad_value_is_named_with_the_allowed_values() -> None:
    """In a fresh process (switches are read once): `tfpipe env` shows the error,
    building anything native raises it, the CLI prints it as one error line."""
    import subprocess
    import sys

    child = ("import json\nfrom tfpipe import native, switches, envinfo\n"
             "print(json.dumps(envinfo.collect()['switches']['TFPIPE_NATIVE']))\n"
             "try:\n    native.available()\nexcept switches.SwitchError as exc:\n"
             "    print('RAISED', exc)\n")
    env = dict(os.environ, TFPIPE_NATIVE="maybe", TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    res = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    row_line, raised = res.stdout.strip().splitlines()[-2:]
    row = json.loads(row_line)
    want = ("TFPIPE_NATIVE='maybe': allowed values are 1/true/on/yes or 0/false/off/no "
            "(or unset: on)")
    assert row["value"] is None and row["error"].startswith(want)
    assert raised.startswith(f"RAISED {want}")


def test_a_switch_changed_after_it_was_read_is_an_error(monkeypatch) -> None:
    from tfpipe import native, switches

    switches.get("TFPIPE_DEBUG")
    monkeypatch.setenv("TFPIPE_DEBUG", "yes-changed")
    with pytest.raises(switches.SwitchError, match="TFPIPE_DEBUG changed from .* after tfpipe "
                                                   "read it"):
        switches.get("TFPIPE_DEBUG")
    monkeypatch.undo()
    with switches.override(TFPIPE_NATIVE="0"):
        assert native.disabled()
    with pytest.raises(switches.SwitchError, match="TFPIPE_NATIVE='sometimes'"):
        with switches.override(TFPIPE_NATIVE="sometimes"):
            pass
