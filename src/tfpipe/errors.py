"""Exceptions shared across tfpipe. Each names where the problem is."""

from __future__ import annotations


class TfpipeError(Exception):
    """Base class for every error tfpipe raises on purpose."""


class ConfigError(TfpipeError, ValueError):
    """A config key, type or value is not allowed; the message names the key path."""


class RecordError(TfpipeError):
    """A TFRecord file is damaged or not a TFRecord; names file, record index, offset."""

    def __init__(self, message: str, *, path: str | None = None,
                 index: int | None = None, offset: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.index = index
        self.offset = offset


class ManifestError(TfpipeError):
    """manifest.json is missing, malformed, or disagrees with the files."""


class SchemaError(TfpipeError):
    """A shard lacks a feature the reader needs and no default is declared."""


class InputError(TfpipeError):
    """A raw input (image, row, annotation) cannot be converted; names the input."""
