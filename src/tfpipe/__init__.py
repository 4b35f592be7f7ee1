"""tfpipe: fast, reproducible TensorFlow input pipelines.

The short public surface lives here; the packages below hold the rest
(``tfpipe.records``, ``tfpipe.convert``, ``tfpipe.augment``, ...).
"""

from __future__ import annotations

from typing import Any

from tfpipe._tf import require_tensorflow
from tfpipe._version import __version__

require_tensorflow()

__all__ = ["__version__", "load_config", "build_pipeline"]
_SUBPACKAGES = ("augment", "bench", "config", "convert", "doctor", "export", "features",
                "pipeline", "records", "seeds", "service", "train")


def __getattr__(name: str) -> Any:
    # Lazy, so `import tfpipe` (and `tfpipe --help`) does not pay for TensorFlow.
    if name == "load_config":
        from tfpipe.config import load_config

        return load_config
    if name == "build_pipeline":
        from tfpipe.pipeline import build_pipeline

        return build_pipeline
    if name in _SUBPACKAGES:  # `import tfpipe; tfpipe.train.fit(...)` (docs/training.md)
        import importlib

        return importlib.import_module(f"tfpipe.{name}")
    raise AttributeError(f"module 'tfpipe' has no attribute {name!r}")
