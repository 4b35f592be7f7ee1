"""What a tabular config's pipeline is built from, for tools that inspect it
(`tfpipe check`, `tfpipe doctor`): the statistics file and what the manifest says of it.
Kept apart from `_tabular.py` (the pipeline itself); reads, builds nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TabularSource:
    """statistics: the parsed file (`tfpipe.features.Statistics`), None when it cannot be
    read (`problem` says why); manifest_sha256: the hash the dataset's manifest records
    for it (`settings.statistics.sha256`), None when the manifest records none."""

    statistics_path: str
    statistics: Any
    problem: str | None
    manifest_sha256: str | None
    specs: tuple[Any, ...]  # the config's TransformSpecs
    label: str


def tabular_source(config: Any) -> TabularSource:
    """The statistics and transform specs of a tabular config (one with `features:`)."""
    from tfpipe.errors import ConfigError, InputError, TfpipeError
    from tfpipe.features import read_statistics
    from tfpipe.pipeline._settings import settings
    from tfpipe.pipeline._tabular import statistics_path, transform_specs

    s = settings(config)
    if s.features is None:
        raise ConfigError("tabular_source: the config has no features: section")
    path = statistics_path(s)
    stats, problem = None, None
    try:
        stats = read_statistics(path)
    except InputError as exc:
        problem = str(exc)
    recorded = None
    try:
        from tfpipe.records import Manifest

        info = (Manifest.load(s.data_path).settings or {}).get("statistics") or {}
        recorded = info.get("sha256")
    except (TfpipeError, OSError, AttributeError, TypeError):
        pass
    return TabularSource(path, stats, problem, recorded,
                         tuple(transform_specs(s.features)), s.features.label)
