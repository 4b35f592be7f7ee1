"""tfpipe's environment switches: the one place that reads them.

Every `TFPIPE_*` variable that changes what tfpipe does is declared here, with
its type, default and meaning (docs/config.md, "Environment switches"), and
shown by `tfpipe env`. Each is read once, at its first use in the process, and
parsed here: a value that is not allowed raises `SwitchError`, naming the
variable, the value and the allowed values, whichever path asked first.

Changing a variable after tfpipe read it is an error at the next use (not a
silent no-op): set it before the process starts. In code, use the API the
switch stands for instead (`tfpipe.native.pure_tf()` for `TFPIPE_NATIVE=0`) or,
in tests and benchmarks, `override(...)`.

Benchmark-only choices (the block path, its structure and write-out, the
native kernels' instruction set, the aligned crop) are not switches: they are
arguments and context managers of the modules they steer
(`tfpipe.pipeline` block path, `tfpipe.native.baseline_isa()`,
`tfpipe.native.jpeg.unaligned_crop()`), and the C++ kernels read no
environment variable (their choices are op attributes).

A leaf: imports nothing of tfpipe but `tfpipe.errors`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfpipe.errors import ConfigError

_TRUE = ("1", "true", "on", "yes")
_FALSE = ("0", "false", "off", "no")


class SwitchError(ConfigError):
    """An environment switch holds a value that is not allowed (or changed after it
    was read); the message names the variable and the allowed values."""


@dataclass(frozen=True)
class Switch:
    """One environment variable: its name, kind ("flag" or "path"), default and
    what it does (one line, as docs/config.md and `tfpipe env` show it)."""

    name: str
    kind: str
    default: Any
    help: str

    def parse(self, raw: str | None) -> Any:
        if raw is None or raw.strip() == "":
            return self.default
        text = raw.strip()
        if self.kind == "flag":
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise SwitchError(f"{self.name}={raw!r}: allowed values are "
                              f"{'/'.join(_TRUE)} or {'/'.join(_FALSE)} (or unset: "
                              f"{'on' if self.default else 'off'}); {self.help}")
        return str(Path(text).expanduser())

    def allowed(self) -> str:
        return "1 or 0 (also true/false, on/off, yes/no)" if self.kind == "flag" else "a path"


SWITCHES: dict[str, Switch] = {s.name: s for s in (
    Switch("TFPIPE_NATIVE", "flag", True,
           "0 runs the pure-TF twins instead of the native C++ kernels (bit-identical, "
           "slower); tfpipe.native.pure_tf() does the same for one block of code"),
    Switch("TFPIPE_NATIVE_BUILD", "flag", True,
           "0 never compiles the native library at run time: a prebuilt one is used, "
           "else the pure-TF twins"),
    Switch("TFPIPE_NATIVE_CACHE", "path", None,
           "where first-use builds of the native library go (default "
           "$XDG_CACHE_HOME/tfpipe/native, else ~/.cache/tfpipe/native)"),
    Switch("TFPIPE_DEBUG", "flag", False,
           "1 makes the tfpipe CLI show the full traceback of an error (as --debug)"),
)}

_lock = threading.Lock()
_read: dict[str, tuple[str | None, Any]] = {}   # name -> (raw value read, parsed value)
_overrides: list[dict[str, Any]] = []           # innermost `override(...)` wins
# Values that win over the environment (parsed: bool for a flag), below any
# `override(...)`; for pytest: monkeypatch.setitem(switches.OVERRIDES, NAME, value).
OVERRIDES: dict[str, Any] = {}


def get(name: str) -> Any:
    """The value of switch `name` (read from the environment once, at first use)."""
    switch = SWITCHES[name]
    for layer in (*reversed(_overrides), OVERRIDES):
        if name in layer:
            return layer[name]
    raw = os.environ.get(name)
    with _lock:
        if name not in _read:
            _read[name] = (raw, switch.parse(raw))
        first_raw, value = _read[name]
    if raw != first_raw:
        raise SwitchError(
            f"{name} changed from {_shown(first_raw)} to {_shown(raw)} after tfpipe read it "
            "(switches are read once, at first use): set it before the process starts"
            + ("; in code, use tfpipe.native.pure_tf() around what should run the pure-TF "
               "twins" if name == "TFPIPE_NATIVE" else ""))
    return value


def _shown(raw: str | None) -> str:
    return "unset" if raw is None else repr(raw)


@contextlib.contextmanager
def override(**values: Any) -> Iterator[None]:
    """Within the block (any thread), the switches named take these values (parsed
    as from the environment when given as strings). For tests and benchmarks."""
    layer = {}
    for name, value in values.items():
        if name not in SWITCHES:
            raise SwitchError(f"unknown switch {name}; known: {sorted(SWITCHES)}")
        layer[name] = SWITCHES[name].parse(value) if isinstance(value, str) else value
    _overrides.append(layer)
    try:
        yield
    finally:
        _overrides.remove(layer)


def describe() -> list[dict[str, Any]]:
    """Every switch with its value in force, whether it was set, its default and
    what it does (for `tfpipe env`). A value that is not allowed is shown with
    its error instead of raising."""
    out = []
    for name, switch in SWITCHES.items():
        raw = os.environ.get(name)
        row: dict[str, Any] = {"name": name, "set": raw is not None, "raw": raw,
                               "default": switch.default, "allowed": switch.allowed(),
                               "help": switch.help}
        try:
            row["value"] = get(name)
        except SwitchError as exc:
            row["value"], row["error"] = None, str(exc)
        out.append(row)
    return out
