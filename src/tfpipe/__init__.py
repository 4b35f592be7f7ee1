"""tfpipe: fast, reproducible TensorFlow input pipelines.

The short public surface lives here; the packages below hold the rest
(``tfpipe.records``, ``tfpipe.convert``, ``tfpipe.augment``, ...).
"""

from __future__ import annotations

from typing import Any

from tfpipe._tf import quiet_tensorflow_start, require_tensorflow
from tfpipe._version import __version__

require_tensorflow()
# Before TensorFlow is imported (it is imported lazily, by the first verb or
# build): its C++ INFO start-up lines stay off stderr unless TF_CPP_MIN_LOG_LEVEL
# is set (tfpipe._tf; docs/config.md, "Logging").
quiet_tensorflow_start()

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
