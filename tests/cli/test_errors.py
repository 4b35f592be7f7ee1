"""No verb shows a traceback for bad data: one line that names the shard / record."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from tfpipe.cli.main import cli

from .conftest import BAD_IMAGE_NAME, DAMAGED_SHARD, pipeline_args

TF_INTERNALS = ("Traceback", "{{function_node", "[[{{node", "[Op:")


def run(*args: str):
    # catch_exceptions=False: an exception escaping the CLI fails the test here
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def clean(output: str) -> None:
    for marker in TF_INTERNALS:
        assert marker not in output, output


@pytest.mark.slow  # ~12 s: two pipelines (preview, materialize) on 2 vCPUs
def test_every_verb_that_reads_data_names_the_damage(datasets: dict[str, Path],
                                                     tmp_path: Path) -> None:
    shard, img = datasets["dmgshard"], datasets["dmgimg"]
    damaged = str(shard / DAMAGED_SHARD)
    raise_ = "pipeline.on_error=raise"

    r = run("inspect", str(shard), "-n", "2")  # counts up to the damage, warns
    assert r.exit_code == 0 and f"warning: {damaged}: damaged framing" in r.output
    clean(r.output)
    r = run("inspect", str(img), "-n", "8")  # inspect does not decode: no finding
    assert r.exit_code == 0 and BAD_IMAGE_NAME in r.output

    for deep in ([], ["--deep"]):
        r = run("verify", str(shard), *deep)
        assert r.exit_code == 1 and damaged in r.output and "DAMAGED" in r.output
        clean(r.output)
    r = run("verify", str(img), "--deep", "--json")
    assert r.exit_code == 1
    (finding,) = json.loads(r.output)["findings"]
    assert finding["kind"] == "bad-image" and finding["index"] == 3
    assert BAD_IMAGE_NAME in finding["message"]  # the source image, not TF's op name
    clean(finding["message"])

    # pipelines: preview of the damaged shard, materialize of the damaged image
    r = run("preview", "cifar", *pipeline_args(shard, raise_), "-n", "16",
            "--out", str(tmp_path / "p.png"))
    assert r.exit_code == 2 and f"framing damage in shard {damaged}" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
    clean(r.output)
    # (before the fix: Dataset.save deadlocked on the bad record, tensorflow#61736)
    r = run("materialize", "cifar", str(tmp_path / "m"), *pipeline_args(img, raise_))
    assert r.exit_code == 2 and r.output.startswith("error: tfpipe: bad record 3 in shard ")
    assert str(img / "train-00000-of-00002.tfrecord") in r.output
    assert len(r.output.strip().splitlines()) == 1
    clean(r.output)


def test_damaged_verdict_gives_the_salvage_command_that_then_passes(
        datasets: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    data = tmp_path / "data"
    shutil.copytree(datasets["dmgshard"], data)
    monkeypatch.chdir(tmp_path)
    r = run("verify", str(data))
    assert r.exit_code == 1
    line = next(ln for ln in r.output.splitlines() if ln.startswith("DAMAGED"))
    command = line.split("Next: ", 1)[1].split("  (", 1)[0]
    argv = shlex.split(command)
    assert argv[:2] == ["tfpipe", "verify"] and "--salvage" in argv
    r = run(*argv[1:])  # the suggested command, as printed
    assert r.exit_code == 1 and "wrote" in r.output and "manifest.json" in r.output
    out = argv[argv.index("--salvage") + 1]
    r = run("verify", out, "--json")
    rep = json.loads(r.output)
    # the complete dataset (issue #22 item 8): the intact shard linked, the damaged
    # one rewritten
    assert r.exit_code == 0 and rep["ok"] and rep["files_checked"] == 2, r.output
    assert rep["records_checked"] == 8 + 7  # the intact 8, and 7 of the damaged 8
    # an intact dataset: nothing to salvage, and it says so
    r = run("verify", str(datasets["good"]), "--salvage", str(tmp_path / "none"))
    assert r.exit_code == 0 and "nothing to salvage" in r.output
    assert not (tmp_path / "none").exists()


def test_unexpected_errors_are_one_line_and_debug_shows_the_traceback(
        datasets: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import tfpipe.records

    def boom(*a, **k):
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(tfpipe.records, "summarize", boom)
    r = run("inspect", str(datasets["good"]))
    assert r.exit_code == 2
    assert r.output.strip() == ("error: RuntimeError: disk on fire (unexpected: rerun with "
                                "--debug for the traceback and report it)")
    r = CliRunner().invoke(cli, ["--debug", "inspect", str(datasets["good"])])
    assert isinstance(r.exception, RuntimeError)  # re-raised: the traceback is shown


def test_tf_errors_lose_their_internals() -> None:
    import tensorflow as tf

    from tfpipe.cli._errors import describe

    try:
        tf.io.decode_image(b"not an image")
    except tf.errors.InvalidArgumentError as exc:
        msg = describe(exc)
        assert msg.startswith("Unknown image file format. One of JPEG") and "\n" not in msg, msg
        clean(msg)
    exc = tf.errors.DataLossError(None, None, "{{function_node __wrapped__IteratorGetNext_device_"
                                  "/job:localhost/replica:0/task:0/device:CPU:0}} corrupted "
                                  "record at 2713846 [Op:IteratorGetNext] name: ")
    msg = describe(exc)
    assert msg.startswith("corrupted record at 2713846; run `tfpipe verify DATA`"), msg
