"""statistics.json beside manifest.json: atomic write, checked read (JSON, never pickle)."""

from __future__ import annotations

import os
from pathlib import Path

from tfpipe.errors import InputError
from tfpipe.features._stats import STATISTICS_FILE, Statistics


def _path(directory: str | os.PathLike[str]) -> Path:
    path = Path(directory)
    return path if path.name == STATISTICS_FILE and not path.is_dir() else path / STATISTICS_FILE


def write_statistics(stats: Statistics, directory: str | os.PathLike[str]) -> Path:
    """Write `directory/statistics.json` atomically (temp file + rename); return its path."""
    path = Path(directory) / STATISTICS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temp.write_text(stats.to_json())
    os.replace(temp, path)
    return path


def read_statistics(directory: str | os.PathLike[str]) -> Statistics:
    """Read `directory/statistics.json` (or that file itself), checking version and hash."""
    path = _path(directory)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"{path}: no statistics; convert the table with "
                         "`tfpipe convert TABLE OUT --stats`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None
    try:
        return Statistics.from_json(text)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
