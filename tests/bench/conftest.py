"""One tiny converted dataset per session: 32 JPEGs (48-64 px) in 2 shards, 4 classes."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tfpipe.bench._data import write_sample_dataset

    return str(write_sample_dataset(tmp_path_factory.mktemp("bench-data"), n=32,
                                    num_classes=4, shards=2))


@pytest.fixture(scope="session")
def tiny_config(tiny_data: str):
    """The imagenet preset on the tiny dataset: 32x32 output, batch 8."""
    from tfpipe.config import load_config

    return load_config({"base": "imagenet",
                        "data": {"path": tiny_data, "image_size": [32, 32]},
                        "pipeline": {"batch_size": 8, "shuffle_buffer": 64}})


@pytest.fixture(scope="session")
def tiny_overrides(tiny_data: str) -> list[str]:
    """The same as --set options (for the CLI and the sweep)."""
    return [f"data.path={tiny_data}", "data.image_size=[32,32]", "pipeline.batch_size=8",
            "pipeline.shuffle_buffer=64"]
