"""`tfpipe export` end to end through the CLI, and `tfpipe verify EXPORT_DIR`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.xdist_group("export")


def _cli(*args: str):
    from tfpipe.cli.main import cli

    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def cli_export(tmp_path_factory, dataset, keras_model):
    tmp = tmp_path_factory.mktemp("cli-export")
    model_path = tmp / "tiny.keras"
    keras_model.save(model_path)
    bench = tmp / "bench.json"
    bench.write_text(json.dumps({"result": {"elements": 96, "steps": 6, "p50_ms": 30.0,
                                            "available_cpus": 2}}))
    cfg = tmp / "cfg.yaml"
    cfg.write_text(f"data:\n  path: {dataset}\n  image_size: [48, 64]\n")
    r = _cli("export", str(cfg), "--model", str(model_path), "--out", str(tmp / "out"),
             "--version", "2", "--warmup", "3", "--from-bench", str(bench), "--json")
    assert r.exit_code == 0, r.output
    return tmp / "out", json.loads(r.output)


def test_cli_export_json(cli_export):
    out, res = cli_export
    assert res["model_name"] == "tiny" and res["version"] == 2
    assert Path(res["version_dir"]) == out / "tiny" / "2"
    assert res["warmup_records"] == 3
    # from the bench file: batch 96/6 = 16, timeout 10% of 30 ms
    assert res["batching"]["max_batch_size"] == 16
    assert res["batching"]["allowed_batch_sizes"] == [8, 16]
    assert res["batching"]["batch_timeout_micros"] == 3000
    assert res["class_names"] == ["cat", "other"]
    assert sorted(res["signatures"]) == ["predict_preprocessed", "preprocess", "serving_default"]


def test_verify_passes_then_names_the_tampered_file(cli_export, tmp_path):
    out, _ = cli_export
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    r = _cli("verify", str(copy), "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["ok"] and len(rep["manifests"]) == 2 and rep["files_checked"] >= 7
    assert _cli("verify", str(copy / "tiny" / "2")).exit_code == 0

    var = copy / "tiny" / "2" / "variables" / "variables.data-00000-of-00001"
    data = bytearray(var.read_bytes())
    data[len(data) // 2] ^= 0x01
    var.write_bytes(bytes(data))
    (copy / "models.config").write_text((copy / "models.config").read_text() + "\n")
    (copy / "tiny" / "2" / "assets.extra" / "extra.bin").write_bytes(b"x")
    r = _cli("verify", str(copy))
    assert r.exit_code == 1
    assert f"FAILED changed: {var}" in r.output
    assert f"FAILED changed: {copy / 'models.config'}" in r.output
    assert f"FAILED unlisted: {copy / 'tiny' / '2' / 'assets.extra' / 'extra.bin'}" in r.output
    (copy / "tiny" / "2" / "fingerprint.pb").unlink()
    rep = json.loads(_cli("verify", str(copy), "--json").output)
    assert {"kind": "missing", "file": str(copy / "tiny" / "2" / "fingerprint.pb"),
            "message": "listed in the manifest, not on disk"} in rep["findings"]


def test_cli_export_errors(cli_export, dataset, tmp_path):
    out, _ = cli_export
    model = next(out.parent.glob("*.keras"))
    r = CliRunner().invoke(__import__("tfpipe.cli.main", fromlist=["cli"]).cli, [
        "export", "imagenet", "--set", f"data.path={dataset}", "--set", "data.image_size=[48,64]",
        "--model", str(model), "--out", str(out), "--version", "2"])
    assert r.exit_code != 0 and "exists; pick another --version" in r.output
