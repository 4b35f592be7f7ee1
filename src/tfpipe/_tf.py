"""The one place that imports TensorFlow, so a missing install says what to do,
and the quiet start that `import tfpipe` and the CLI give it.

`TF_CPP_MIN_LOG_LEVEL` is the documented switch, but TensorFlow 2.19+ logs
through absl before `absl::InitializeLog()` runs, and those messages ignore it
(tensorflow/tensorflow#100442): the oneDNN notice (INFO, printed twice: by
libtensorflow_framework and by the profiler plugin, each with its own absl) and
absl's "All log messages before absl::InitializeLog()" banner reach stderr at
any level. absl reads no environment variable and its minimum level cannot be
set before the library's static initializers have already logged, so while
`import tensorflow` runs (where those lines are printed) fd 2 goes through a
filter that applies the level TF was asked for: a line in absl's format
(``I0000 00:00:1712345678.123456  1234 port.cc:153] ...``) whose severity is
below `TF_CPP_MIN_LOG_LEVEL` is dropped, and so is the banner when nothing
after it is kept; every other byte is passed through unchanged. After the
import, TF's own filter works and fd 2 is the terminal again.

What a library may do (docs/config.md, "Logging"): `import tfpipe`, when
TensorFlow is not imported yet, sets `TF_CPP_MIN_LOG_LEVEL=1` if it is unset
(TensorFlow's C++ INFO start-up notices hidden, its warnings and errors kept)
and filters that first import as above. A level the user set is used as is;
once TensorFlow is imported nothing is changed. Python loggers are not touched.
`TF_ENABLE_ONEDNN_OPTS` is never touched: it changes numerics.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

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


# `import tfpipe`'s default: INFO from TF's C++ side is start-up notices and
# per-iterator chatter; WARNING and above stay visible in a user's program.
LIBRARY_LEVEL = "1"
_DEFAULTED = False  # TF_CPP_MIN_LOG_LEVEL is tfpipe's default, not the user's


def level_is_default() -> bool:
    """True when `TF_CPP_MIN_LOG_LEVEL` was set by tfpipe, not by the user."""
    return _DEFAULTED


def quiet_tensorflow_start(default_level: str = LIBRARY_LEVEL) -> None:
    """Before TensorFlow is imported: `TF_CPP_MIN_LOG_LEVEL` defaults to
    `default_level` (a value already set wins) and the first `import tensorflow`
    runs behind the start-up line filter. Nothing once TensorFlow is imported."""
    global _DEFAULTED
    if "tensorflow" in sys.modules:
        return
    if "TF_CPP_MIN_LOG_LEVEL" not in os.environ or _DEFAULTED:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = default_level
        _DEFAULTED = True
    if not any(isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowImport())


# absl / TF log line: severity letter, date (0000 before init), time, thread, file:line]
TF_LOG_LINE = re.compile(rb"^([IWEF])\d{4} \d\d:\d\d:[\d.]+\s+\d+ [^\s:\]]+:\d+\] ")
ABSL_BANNER = b"WARNING: All log messages before absl::InitializeLog() is called"
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}


def level() -> int:
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


class LineFilter:
    """Decides line by line what of TF's stderr `min_level` keeps; holds absl's
    banner back until the message it announces is known to be kept."""

    def __init__(self, min_level: int) -> None:
        self.min_level = min_level
        self._banner: bytes | None = None

    def feed(self, line: bytes) -> bytes:
        if line.startswith(ABSL_BANNER):
            self._banner = line
            return b""
        m = TF_LOG_LINE.match(line)
        if m and _SEVERITY[m.group(1)] < self.min_level:
            return b""
        banner, self._banner = (self._banner if m else None), None
        return (banner or b"") + line

    def close(self) -> bytes:
        return b""  # a banner nothing followed announced nothing


def keep_lines(lines: Sequence[bytes], min_level: int) -> list[bytes]:
    """The lines of TF's stderr that `min_level` keeps (the filter's rule, testable)."""
    f = LineFilter(min_level)
    return [out for line in lines if (out := f.feed(line))]


@contextmanager
def filtered_stderr(min_level: int) -> Iterator[None]:
    """While the block runs, drop TF log lines below `min_level` from fd 2."""
    if min_level <= 0:
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
        read_end, write_end = os.pipe()
    except (OSError, ValueError, AttributeError):  # no real fd 2: nothing to filter
        yield
        return

    def pump() -> None:
        f = LineFilter(min_level)
        pending = b""
        with os.fdopen(read_end, "rb", buffering=0) as r:
            while chunk := r.read(65536):
                *lines, pending = (pending + chunk).split(b"\n")
                _write_all(saved, b"".join(f.feed(ln + b"\n") for ln in lines))
        _write_all(saved, (f.feed(pending) if pending else b"") + f.close())

    thread = threading.Thread(target=pump, name="tfpipe-stderr-filter", daemon=True)
    thread.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 2)  # closes the pipe's last write end: the pump sees EOF
        thread.join(timeout=5)
        os.close(saved)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Runs the first `import tensorflow` inside `filtered_stderr`.

    Stays installed until TensorFlow is actually executed (a plain
    `importlib.util.find_spec("tensorflow")` before that must not disarm it).
    """

    def __init__(self) -> None:
        self._busy = False

    def find_spec(self, name: str, path: Any = None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name != "tensorflow" or self._busy:
            return None
        self._busy = True  # the real spec, from the finders after this one
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._busy = False
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _FilteringLoader(spec.loader, self)
        return spec


class _FilteringLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, finder: _QuietTensorFlowImport) -> None:
        self._loader = loader
        self._finder = finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        with filtered_stderr(level()):
            self._loader.exec_module(module)

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ...
        return getattr(self._loader, name)
