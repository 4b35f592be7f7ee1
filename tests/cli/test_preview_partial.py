"""`preview` of a split smaller than one batch shows the partial batch."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from PIL import Image

from tfpipe.cli.main import cli

from .conftest import pipeline_args


def test_preview_of_fewer_records_than_one_batch(datasets: dict[str, Path],
                                                 tmp_path: Path) -> None:
    out = tmp_path / "p.png"
    r = CliRunner().invoke(cli, ["preview", "cifar", *pipeline_args(datasets["small"]),
                                 "-n", "16", "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "first 3 samples" in r.output and "partial batch" in r.output
    assert Image.open(out).size[0] > 0
