"""A dataset smaller than one batch (issue #22, item 10): one clear error.

A 52-image folder (4 classes x 13) converted by `tfpipe convert`, with the
imagenet preset (batch_size 64, drop_remainder true, image_size made small):
a train epoch would have 0 batches. `build_pipeline`, `tfpipe bench` and
`tfpipe check` each stop with one error that names `pipeline.batch_size`, the
record count from the manifest, and the fix; no check runs (no FAIL row
blaming seeds, no vacuous "bit-identical over 0 batches"). The same shards
without their manifest (count unknown before reading): bench and check say
the epoch was empty, with the counted records and the same fix.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tfpipe.cli.main import cli  # as a user runs them: the CLI's error handler too
from tfpipe.config import load_config
from tfpipe.errors import ConfigError
from tfpipe.pipeline import batches_per_pass, build_pipeline

N = 52
FIX = "set pipeline.batch_size to at most 52 or pipeline.drop_remainder: false"


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict[str, str]:
    """{"converted": the converted directory, "bare": its shards alone, no manifest}."""
    from tfpipe.convert import convert
    from tfpipe.sample_data import make_image_folder

    root = tmp_path_factory.mktemp("too-small")
    raw = make_image_folder(root / "raw", num_classes=4, per_class=13, seed=0,
                            size_range=(40, 56))
    convert(str(raw), str(root / "data"), workers=1, seed=0)  # all in train, one shard
    (root / "bare").mkdir()
    for f in (root / "data").glob("train-*.tfrecord"):
        shutil.copy(f, root / "bare" / f.name)
    return {"converted": str(root / "data"), "bare": str(root / "bare" / "train-*.tfrecord")}


def _sets(path: str, *more: str) -> list[str]:
    return [a for o in (f"data.path={path}", "data.image_size=[24,24]", *more)
            for a in ("--set", o)]


def _cfg(path: str, **over):
    return load_config("imagenet", {"data.path": path, "data.image_size": [24, 24], **over})


def test_build_pipeline_refuses_an_epoch_of_no_batch(small):
    with pytest.raises(ConfigError) as exc:
        build_pipeline(_cfg(small["converted"]))
    msg = str(exc.value)
    assert msg.startswith("pipeline.batch_size: 64 is more than the 52 records of split "
                          "'train'"), msg
    assert msg.endswith(FIX), msg
    with pytest.raises(ConfigError, match="0 batches"):
        batches_per_pass(_cfg(small["converted"]))
    # per worker: 26 records each
    with pytest.raises(ConfigError, match=r"32 is more than the 26 records of split 'train' "
                                          r"\(worker 1 of 2's part"):
        build_pipeline(_cfg(small["converted"], **{"pipeline.batch_size": 32}), worker=(1, 2))
    # the fixes it names work: one batch of 52, or one (the remainder) of 52
    for over in ({"pipeline.batch_size": 52}, {"pipeline.drop_remainder": False}):
        ds = build_pipeline(_cfg(small["converted"], **over))
        assert [int(b["image"].shape[0]) for b in ds] == [52], over


def _one_error(res, *parts: str) -> str:
    assert res.exit_code != 0, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output
    for p in parts:
        assert p in lines[0], lines[0]
    assert "FAIL" not in res.output
    return lines[0]


def test_bench_and_check_say_it_once(small):
    run = CliRunner()
    res = run.invoke(cli, ["bench", "imagenet", *_sets(small["converted"]), "--steps", "1",
                             "--warmup", "0"])
    _one_error(res, "pipeline.batch_size: 64", "52 records", FIX)
    res = run.invoke(cli, ["check", "imagenet", *_sets(small["converted"])])
    _one_error(res, "pipeline.batch_size: 64", "52 records", FIX)


@pytest.mark.slow
def test_without_a_manifest_the_empty_epoch_is_named(small):
    run = CliRunner()
    res = run.invoke(cli, ["bench", "imagenet", *_sets(small["bare"]), "--steps", "1",
                             "--warmup", "0"])
    _one_error(res, "no batch", "pipeline.batch_size", "pipeline.drop_remainder: false")
    res = run.invoke(cli, ["check", "imagenet", *_sets(small["bare"])])
    _one_error(res, "no batch", "pipeline.batch_size: 64", "52 records", FIX)
