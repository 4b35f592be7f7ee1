"""Config -> pipeline for the bench tools (one place that talks to config/pipeline)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def resolve_config(config: Any, overrides: Sequence[str] = ()) -> Any:
    """Preset name / YAML path / loaded config object -> validated config object.

    `overrides` are `key=value` strings, exactly what `--set` takes. A plain nested
    dict of the YAML shape is passed through as is (tests, notebooks).
    """
    if not isinstance(config, (str, Path)) and not overrides:
        return config  # a Config model or a plain nested dict: build_pipeline reads both
    from tfpipe.config import load_config, parse_set_options

    parsed = parse_set_options(list(overrides)) if overrides else None
    if isinstance(config, (str, Path)):
        return load_config(str(config), parsed)
    if hasattr(config, "model_dump"):  # a loaded Config: re-validate with the overrides
        config = config.model_dump(mode="json")
    return load_config(config, parsed)


def build_from(config: Any, overrides: Sequence[str] = (), *, split: str = "train",
               epoch: int = 0, worker: Any = None, as_supervised: bool = False) -> Any:
    from tfpipe.pipeline import build_pipeline

    cfg = resolve_config(config, overrides)
    return build_pipeline(cfg, split=split, epoch=epoch, worker=worker,
                          as_supervised=as_supervised)
