"""`tfpipe convert` end to end through click."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tfpipe.cli.main import cli


def test_convert_cli_json_and_table(folder_src: Path, coco_src: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "out"
    r = runner.invoke(cli, ["convert", str(folder_src), str(out), "--split", "train=0.75,val=0.25",
                            "--shard-size", "20KB", "--workers", "1", "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    manifest = json.loads((out / "manifest.json").read_text())
    for split, row in summary["splits"].items():
        shards = manifest["splits"][split]["shards"]
        assert row["shards"] == len(shards)
        assert row["records"] == sum(s["num_records"] for s in shards)
        assert row["bytes"] == sum((out / s["path"]).stat().st_size for s in shards)
    assert sum(row["records"] for row in summary["splits"].values()) == 32

    r = runner.invoke(cli, ["convert", str(coco_src), str(tmp_path / "coco"),
                            "--workers", "1", "--invalid-boxes", "drop"])
    assert r.exit_code == 0, r.output
    assert "records" in r.output and "boxes kept" in r.output

    r = runner.invoke(cli, ["convert", str(folder_src), str(out)])
    assert r.exit_code == 1 and "not empty" in r.output
    r = runner.invoke(cli, ["convert", str(folder_src), str(tmp_path / "x"), "--split",
                            "train=2"])
    assert r.exit_code == 1 and "ratio" in r.output
