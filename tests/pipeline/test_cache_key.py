"""`pipeline.cache: DIR` is keyed on what shapes the cached stream (issue #22, item 9).

A cache written under one setting must not be served under another that
changes the records or their order, and data re-converted in place under the
same shard names must be read anew. Oracle: the same config built without a
cache (`pipeline.cache: none`), batch for batch.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tfpipe.pipeline import build_pipeline

from .conftest import base_config


def _convert(raw: Path, out: Path, seed: int, shard_size: int) -> None:
    from tfpipe import sample_data
    from tfpipe.convert import convert

    sample_data.make_image_folder(raw, num_classes=4, per_class=6, size_range=(40, 64),
                                  seed=seed)
    convert(raw, out, split="train=0.75,val=0.25", shard_size=shard_size, workers=1)


def _cfg(data: Path, cache: str, **over) -> dict:
    # no augmentation: the test is about which records arrive in which order
    cfg = base_config(str(data), **{"pipeline.cache": cache, "pipeline.batch_size": 4,
                                    "pipeline.shuffle_buffer": 1,
                                    "pipeline.drop_remainder": False, **over})
    cfg["augment"] = {}
    return cfg


def _epoch(cfg: dict, split: str = "train") -> list[tuple[np.ndarray, np.ndarray]]:
    return [(b["image"].numpy(), b["label"].numpy()) for b in build_pipeline(cfg, split=split)]


def _same(a, b) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) for x, y in zip(a, b))


@pytest.mark.parametrize("split", ["train", "val"])
def test_a_cache_written_under_one_interleave_cycle_is_not_served_under_another(
        tmp_path, split):
    """Before: the cycle-4 pipeline was served the cycle-1 cache (the cycle-1
    record order)."""
    data = tmp_path / "data"
    _convert(tmp_path / "raw", data, seed=0, shard_size=6000)
    cache = str(tmp_path / "cache")
    one = _epoch(_cfg(data, cache, **{"pipeline.interleave_cycle": 1}), split)
    four_uncached = _epoch(_cfg(data, "none", **{"pipeline.interleave_cycle": 4}), split)
    assert not _same(one, four_uncached)  # the setting does change the stream
    assert _same(_epoch(_cfg(data, cache, **{"pipeline.interleave_cycle": 4}), split),
                 four_uncached)
    # and the first cache still serves its own setting
    assert _same(_epoch(_cfg(data, cache, **{"pipeline.interleave_cycle": 1}), split), one)


@pytest.mark.parametrize("split", ["train", "val"])
def test_data_reconverted_in_place_is_read_anew(tmp_path, split):
    """Before: the same path and shard names served the old data from the cache."""
    data = tmp_path / "data"
    _convert(tmp_path / "raw0", data, seed=0, shard_size=1 << 30)  # one shard per split
    names = sorted(p.name for p in data.iterdir())
    cache = str(tmp_path / "cache")
    old = _epoch(_cfg(data, cache), split)
    shutil.rmtree(data)
    _convert(tmp_path / "raw1", data, seed=1, shard_size=1 << 30)
    assert sorted(p.name for p in data.iterdir()) == names  # the same shard names
    new_uncached = _epoch(_cfg(data, "none"), split)
    assert not _same(old, new_uncached)
    assert _same(_epoch(_cfg(data, cache), split), new_uncached)


def test_bare_shards_rewritten_in_place_are_read_anew(tmp_path):
    """A glob of shards without a manifest: keyed on their sizes and mtimes."""
    data = tmp_path / "data"
    _convert(tmp_path / "raw0", data, seed=0, shard_size=1 << 30)
    (data / "manifest.json").unlink()
    glob = str(data / "train-*.tfrecord")
    cache = str(tmp_path / "cache")
    old = _epoch(_cfg(Path(glob), cache))
    other = tmp_path / "other"
    _convert(tmp_path / "raw1", other, seed=1, shard_size=1 << 30)
    shutil.copyfile(other / "train-00000-of-00001.tfrecord", data / "train-00000-of-00001.tfrecord")
    new_uncached = _epoch(_cfg(Path(glob), "none"))
    assert not _same(old, new_uncached)
    assert _same(_epoch(_cfg(Path(glob), cache)), new_uncached)
