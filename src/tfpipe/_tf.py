"""The one place that imports TensorFlow, so a missing install says what to do."""

from __future__ import annotations

import importlib.util

INSTALL_HINT = (
    "tfpipe needs TensorFlow, which is not installed. Install it as an extra: "
    "pip install 'tfpipe[cpu]' (tensorflow-cpu) or pip install 'tfpipe[gpu]' "
    "(tensorflow with CUDA)."
)


def tensorflow_available() -> bool:
    """Whether TensorFlow can be imported, without importing it."""
    return importlib.util.find_spec("tensorflow") is not None


def require_tensorflow() -> None:
    """Raise ImportError with the install hint when TensorFlow is missing."""
    if not tensorflow_available():
        raise ImportError(INSTALL_HINT)
