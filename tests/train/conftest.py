"""One small dataset per session for tests/train (train_data.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from train_data import write_dataset  # noqa: E402


@pytest.fixture(scope="session")
def train_dataset(tmp_path_factory) -> str:
    return write_dataset(tmp_path_factory.mktemp("train-data"))
