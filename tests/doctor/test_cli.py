"""`tfpipe doctor TARGET`: exit codes, --json schema, --ignore, target forms."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from tfpipe.cli.main import cli

PIPELINES = textwrap.dedent('''
    import numpy as np
    import tensorflow as tf

    AUTOTUNE = tf.data.AUTOTUNE


    def numbers():
        return tf.data.Dataset.from_tensor_slices(np.zeros((64, 4), np.float32))


    def my_augment(x):
        return tf.numpy_function(lambda v: v * 2, [x], tf.float32)


    def clean():
        return numbers().map(lambda x: x * 2, num_parallel_calls=AUTOTUNE).batch(8).prefetch(2)


    def with_error():
        return numbers().map(my_augment, num_parallel_calls=AUTOTUNE).batch(8).prefetch(2)


    def with_warning():
        return numbers().batch(8).shuffle(16).prefetch(2)


    def not_a_dataset():
        return [1, 2, 3]


    def raises():
        raise RuntimeError("broken on purpose")


    def needs_args(path):
        return numbers()
''')

KEYS = {"rule", "severity", "op", "function", "message", "fix", "location"}


@pytest.fixture(scope="module")
def pipe_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("cli") / "pipes.py"
    path.write_text(PIPELINES)
    return str(path)


def run(*args: str):
    return CliRunner().invoke(cli, ["doctor", *args])


def test_clean_exits_0(pipe_file):
    result = run(f"{pipe_file}:clean")
    assert result.exit_code == 0, result.output
    assert "No findings" in result.output


def test_error_finding_exits_1_with_json_schema(pipe_file):
    result = run(f"{pipe_file}:with_error", "--json")
    assert result.exit_code == 1, result.output
    findings = json.loads(result.output)
    assert isinstance(findings, list) and findings
    for f in findings:
        assert KEYS <= set(f)
    (f,) = [f for f in findings if f["rule"] == "python-in-map"]
    assert f["severity"] == "error"
    assert f["function"] == "my_augment"
    line = PIPELINES.splitlines().index("def my_augment(x):") + 1
    assert f["location"] == f"{pipe_file}:{line}"
    assert f["op"].startswith("ParallelMapDatasetV2 ")


def test_ignore_silences_rule_and_exit_code(pipe_file):
    result = run(f"{pipe_file}:with_error", "--json", "--ignore", "python-in-map")
    assert result.exit_code == 0, result.output
    assert all(f["rule"] != "python-in-map" for f in json.loads(result.output))


def test_warning_only_exits_0_and_prints_table(pipe_file):
    result = run(f"{pipe_file}:with_warning")
    assert result.exit_code == 0, result.output
    assert "shuffle-after-batch" in result.output


def test_module_function_target(pipe_file, monkeypatch):
    monkeypatch.syspath_prepend(str(pipe_file.rsplit("/", 1)[0]))
    result = run("pipes:with_error", "--json")
    assert result.exit_code == 1, result.output
    assert any(f["function"] == "my_augment" for f in json.loads(result.output))


@pytest.mark.parametrize("suffix, needle", [
    (":nope", "defines no 'nope'"),
    (":not_a_dataset", "not a tf.data.Dataset"),
    (":raises", "broken on purpose"),
    (":needs_args", "no arguments"),
])
def test_bad_python_target_exits_2(pipe_file, suffix, needle):
    result = run(pipe_file + suffix)
    assert result.exit_code == 2
    assert needle in result.output


def test_missing_file_and_unknown_config_exit_2(tmp_path):
    result = run(f"{tmp_path}/absent.py:fn")
    assert result.exit_code == 2 and "no such file" in result.output
    result = run("no-such-preset-or-file")
    assert result.exit_code == 2 and "cannot load TARGET" in result.output


def test_unknown_rule_id_is_a_usage_error(pipe_file):
    result = run(f"{pipe_file}:clean", "--ignore", "no-such-rule")
    assert result.exit_code == 2 and "no-such-rule" in result.output


def test_config_target_with_set(converted):
    result = run("cifar", "--set", f"data.path={converted['classification']}", "--json")
    assert result.exit_code == 0, result.output
    findings = json.loads(result.output)
    assert all(f["severity"] == "info" for f in findings)


def test_config_target_bad_set_exits_2(converted):
    result = run("cifar", "--set", "pipeline.batch_size=-3",
                 "--set", f"data.path={converted['classification']}")
    assert result.exit_code == 2
    assert "pipeline.batch_size" in result.output
