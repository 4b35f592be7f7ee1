"""`preview` of a split smaller than one batch shows the partial batch."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from PIL import Image

from tfpipe.cli.main import cli

from .conftest import pipeline_args


def test_preview_of_fewer_records_than_one_batch(datasets: dict[str, Path],
                                                 tmp_path: Path) -> None:
    out = tmp_path / "p.png"
    # 3 records, batch 4, drop_remainder: true (before: "yielded no batch to preview")
    r = CliRunner().invoke(cli, ["preview", "cifar", *pipeline_args(datasets["small"]),
                                 "-n", "16", "--out", str(out), "--json"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["samples"] == 3 and info["partial_batch"] is True and info["path"] == str(out)
    assert Image.open(out).size[0] > 0
