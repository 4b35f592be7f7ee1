"""Small converted datasets, once per session, for tests/train (train_data.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from train_data import convert_raw, write_dataset  # noqa: E402


@pytest.fixture(scope="session")
def train_dataset(tmp_path_factory) -> str:
    return write_dataset(tmp_path_factory.mktemp("train-data"))


@pytest.fixture(scope="session")
def split_dataset(train_dataset, tmp_path_factory) -> str:
    """The same images converted with `--split train=0.75,val=0.25`, one shard each."""
    return convert_raw(Path(train_dataset).parent / "raw",
                       tmp_path_factory.mktemp("split-data") / "data", shards=1,
                       split={"train": 0.75, "val": 0.25})
