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


def tf_error_text(exc: BaseException) -> str:
    """A TensorFlow runtime error as one readable line, without TF's internals.

    tfpipe's own graph assertions (which name the shard and record) are
    returned as they were written; otherwise the first line of TF's message,
    less the ``{{function_node __wrapped__...}}`` prefix, the ``[[{{node ...}}]]``
    graph locations and the ``[Op:...] name:`` suffix.
    """
    import re

    text = str(getattr(exc, "message", None) or exc)
    marker = "assertion failed: ["
    if marker in text:
        text = text.split(marker, 1)[1]
        return text.split("]\n", 1)[0].split("] [Op:", 1)[0].rstrip("]").strip()
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text)
    text = re.sub(r"\s*\[\[\{\{node [^}]*\}\}\]\]", "", text)
    text = re.sub(r"\s*\[Op:[^\]]*\](\s*name:\s*\S*)?", "", text)
    text = re.sub(r"^Error in user-defined function passed to \S+ transformation with "
                  r"iterator: \S+: ", "", text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__
