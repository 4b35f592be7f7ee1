"""`tfpipe materialize`: round trip through the CLI, and data served only for the
split, epochs and config it was written for (issue 9, bug 1)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
from click.testing import CliRunner

from tfpipe.config import load_config
from tfpipe.errors import ConfigError
from tfpipe.pipeline import MATERIALIZED_MARKER, build_pipeline, materialize

from .conftest import base_config
from .helpers import batches

# one xdist worker builds the module fixtures (mat, live) once
pytestmark = pytest.mark.xdist_group("pipeline-materialize")


def _raw(dataset: str) -> dict:
    raw = base_config(dataset)
    raw["pipeline"]["num_parallel_calls"] = 2
    return raw


@pytest.fixture(scope="module")
def mat(dataset, tmp_path_factory):
    """2 epochs of train, written through the CLI."""
    import yaml

    from tfpipe.cli.materialize import command

    tmp = tmp_path_factory.mktemp("mat")
    cfg_path = tmp / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(_raw(dataset), sort_keys=False))  # op order matters
    out = tmp / "mat"
    res = CliRunner().invoke(command, [str(cfg_path), str(out), "--epochs", "2", "--json"])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def live(dataset):
    return [batches(build_pipeline(load_config(_raw(dataset)), epoch=e)) for e in (0, 1)]


def _equal(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x["image"], y["image"])
        np.testing.assert_array_equal(x["label"], y["label"])


def test_round_trip_and_each_iteration_is_the_next_saved_epoch(dataset, mat, live):
    info = json.loads((mat / MATERIALIZED_MARKER).read_text())
    assert info["splits"]["train"]["epochs"] == 2
    assert info["splits"]["train"]["batches_per_epoch"] == [7, 7]
    cfg = load_config(_raw(dataset), {"pipeline.materialized": str(mat)})
    for e in (0, 1):
        _equal(batches(build_pipeline(cfg, epoch=e)), live[e])
    ds = build_pipeline(cfg)  # iterations 0 and 1: saved epochs 0 and 1, then no more
    _equal(batches(ds), live[0])
    _equal(batches(ds), live[1])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"holds epochs 0\.\.1.*materialize"):
        batches(ds)
    # data.path pointing at the directory works too (detected by the json)
    by_path = load_config(_raw(dataset), {"data.path": str(mat)})
    _equal(batches(build_pipeline(by_path, epoch=1)), live[1])


def test_settings_that_do_not_change_bytes_are_accepted(dataset, mat, live):
    cfg = load_config(_raw(dataset), {"pipeline.materialized": str(mat),
                                      "pipeline.num_parallel_calls": 1,
                                      "pipeline.deterministic": False,
                                      "pipeline.prefetch": 1})
    _equal(batches(build_pipeline(cfg, epoch=1)), live[1])


def test_epoch_not_written_is_refused(dataset, mat):
    cfg = load_config(_raw(dataset), {"pipeline.materialized": str(mat)})
    with pytest.raises(ConfigError, match=r"epoch 2: .* holds epochs 0\.\.1 .*tfpipe materialize"):
        build_pipeline(cfg, epoch=2)


@pytest.mark.parametrize("over, key", [
    ({"seed": 4}, "seed"),
    ({"augment.pixel.brightness.max_delta": 0.1}, "augment.pixel"),
    ({"augment.enable_rate": 0.5}, "augment.enable_rate"),
    ({"pipeline.batch_size": 4}, "pipeline.batch_size"),
])
def test_other_config_is_refused_naming_the_key(dataset, mat, over, key):
    cfg = load_config(_raw(dataset), {"pipeline.materialized": str(mat), **over})
    with pytest.raises(ConfigError) as err:
        build_pipeline(cfg)
    msg = str(err.value)
    assert f"{key}: materialized" in msg and "tfpipe materialize" in msg, msg
    assert msg.count(": materialized") == 1, msg  # only what differs


def test_split_not_materialized_is_built_from_the_records(dataset, mat, live):
    """validation with pipeline.materialized: the eval batches from data.path,
    never the augmented train batches."""
    cfg = load_config(_raw(dataset), {"pipeline.materialized": str(mat)})
    got = batches(build_pipeline(cfg, split="validation"))
    want = batches(build_pipeline(load_config(_raw(dataset)), split="validation"))
    _equal(got, want)
    assert not np.array_equal(got[0]["image"], live[0][0]["image"])


def test_split_without_records_is_refused(dataset, mat):
    by_path = load_config(_raw(dataset), {"data.path": str(mat)})
    with pytest.raises(ConfigError, match=r"not 'validation'.*--split validation"):
        build_pipeline(by_path, split="validation")


def test_eval_split_materialized_and_shared_directory(dataset, tmp_path):
    """Two splits of one config in one directory; another config is refused there."""
    raw = _raw(dataset)
    out = str(tmp_path / "m")
    materialize(load_config(raw), out, epochs=1)
    info = materialize(load_config(raw), out, epochs=3, split="validation")
    assert info["epochs"] == 1  # eval does not depend on the epoch
    cfg = load_config(raw, {"pipeline.materialized": out})
    want = batches(build_pipeline(load_config(raw), split="validation"))
    for e in (0, 5):
        _equal(batches(build_pipeline(cfg, split="validation", epoch=e)), want)
    assert set(json.loads((tmp_path / "m" / MATERIALIZED_MARKER).read_text())["splits"]) == \
        {"train", "validation"}
    with pytest.raises(ConfigError, match="another config"):
        materialize(load_config(raw, {"seed": 9}), out, epochs=1)
