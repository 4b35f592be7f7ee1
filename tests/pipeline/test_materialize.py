"""`tfpipe materialize` round trip and the real config loader."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from tfpipe.config import load_config
from tfpipe.pipeline import MATERIALIZED_MARKER, build_pipeline

from .conftest import base_config
from .helpers import batches


def test_materialize_cli_round_trip(dataset, tmp_path):
    from tfpipe.cli.materialize import command

    cfg_path = tmp_path / "cfg.yaml"
    import yaml

    raw = base_config(dataset)
    raw["pipeline"]["num_parallel_calls"] = 2
    cfg_path.write_text(yaml.safe_dump(raw, sort_keys=False))  # op order matters
    out = tmp_path / "mat"
    res = CliRunner().invoke(command, [str(cfg_path), str(out), "--epochs", "2", "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads((out / MATERIALIZED_MARKER).read_text())
    assert info["epochs"] == 2 and info["batches_per_epoch"] == [7, 7]
    cfg = load_config(raw)
    live = [batches(build_pipeline(cfg, epoch=e)) for e in (0, 1)]
    again = load_config(raw, {"pipeline.materialized": str(out)})
    for e in (0, 1, 2):  # epoch 2 wraps to saved epoch 0
        saved = batches(build_pipeline(again, epoch=e))
        assert len(saved) == 7
        for a, b in zip(live[e % 2], saved):
            np.testing.assert_array_equal(a["image"], b["image"])
            np.testing.assert_array_equal(a["label"], b["label"])
    # data.path pointing at the directory works too (detected by the json)
    by_path = load_config(raw, {"data.path": str(out)})
    first = next(iter(build_pipeline(by_path, as_supervised=True)))
    np.testing.assert_array_equal(first[0].numpy(), live[0][0]["image"])
