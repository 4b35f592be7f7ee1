"""`tfpipe env --json` reports what this process may use, checked against the OS and TF."""

from __future__ import annotations

import json
import os

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
