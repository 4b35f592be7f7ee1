"""Where in the user's source each op of interest was created (its call site).

The serialized GraphDef that the rules read keeps no Python source lines, but a
dataset built in this process still holds its traced functions, and every op of
a traced graph keeps the stack it was created from (`Operation.traceback`). The
innermost frame outside TensorFlow/Keras is the user's call (`file.py:line` of
`tf.image.random_brightness(...)`); the first library frame below it names the
API that was called. Without that (a dataset rebuilt from a GraphDef) the rules
fall back to the function's `def` line.

Reads private tf.data attributes (the traced functions of each dataset), so
every step is guarded: when TensorFlow changes them, locations fall back, the
rules still run.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import tensorflow as tf


@dataclass(frozen=True)
class CallSite:
    """The user's line that created an op, and the library function it called."""

    location: str        # "file.py:line"
    api: str | None      # e.g. "tf.image.random_brightness", when a TF frame follows


# Frames that only wrap the real API function (decorators, dispatch).
_WRAPPER_FILES = ("traceback_utils.py", "dispatch.py", "deprecation.py", "tf_export.py")


def _library_dirs() -> tuple[str, ...]:
    dirs = [os.path.dirname(tf.__file__)]
    for name in ("keras", "tf_keras", "absl", "numpy", "tree"):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__file__", None):
            dirs.append(os.path.dirname(mod.__file__))
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.append(path)
    # Both spellings: the path as imported and the real one (symlinked venvs).
    out = {os.path.normcase(os.path.abspath(d)) + os.sep for d in dirs}
    out |= {os.path.normcase(os.path.realpath(d)) + os.sep for d in dirs}
    return tuple(sorted(out))


def _is_library(filename: str, dirs: tuple[str, ...]) -> bool:
    if not filename or filename.startswith("<"):
        return True
    path = os.path.normcase(os.path.abspath(filename))
    return path.startswith(dirs) or os.path.normcase(os.path.realpath(filename)).startswith(dirs)


def _api_name(frame: Any) -> str:
    name = str(frame.name)
    base = os.path.basename(str(frame.filename))
    if base == "image_ops_impl.py":
        return f"tf.image.{name}"
    if base in ("random_ops.py", "stateless_random_ops.py"):
        return f"tf.random.{name[len('random_'):] if name.startswith('random_') else name}"
    return name


def call_site(frames: Iterable[Any], dirs: tuple[str, ...]) -> CallSite | None:
    """The innermost non-library frame of `frames` (outermost first) and the API below it."""
    frames = list(frames)
    user = None
    for i in range(len(frames) - 1, -1, -1):
        if not _is_library(str(frames[i].filename), dirs):
            user = i
            break
    if user is None:
        return None
    api = None
    for frame in frames[user + 1:]:
        if os.path.basename(str(frame.filename)) not in _WRAPPER_FILES:
            api = _api_name(frame)
            break
    return CallSite(f"{frames[user].filename}:{frames[user].lineno}", api)


def _traced_functions(dataset: Any) -> Iterator[tuple[str, Any]]:
    """(library name, FuncGraph) of every function each dataset op of `dataset` traced."""
    stack, seen = [dataset], set()
    while stack:
        ds = stack.pop()
        if id(ds) in seen:
            continue
        seen.add(id(ds))
        for value in vars(ds).values():
            fn = getattr(value, "function", None)  # StructuredFunctionWrapper
            graph = getattr(fn, "graph", None)
            name = getattr(fn, "name", None)
            if graph is not None and name is not None:
                yield (name.decode() if isinstance(name, bytes) else str(name)), graph
        try:
            stack.extend(ds._inputs())  # noqa: SLF001 - the dataset tree
        except Exception:  # noqa: BLE001 - a dataset type without inputs
            pass


def _graphs(name: str, graph: Any, seen: set[str]) -> Iterator[tuple[str, Any]]:
    """The graph and the graphs of every function it calls (tf.function, cond, while)."""
    if name in seen:
        return
    seen.add(name)
    yield name, graph
    for inner, fn in getattr(graph, "_functions", {}).items():
        sub = getattr(fn, "graph", None)
        if sub is not None:
            yield from _graphs(str(inner), sub, seen)


def op_call_sites(dataset: tf.data.Dataset, op_types: frozenset[str]
                  ) -> dict[tuple[str, str], CallSite]:
    """(library function name, node name) -> call site, for ops whose type is in `op_types`."""
    out: dict[tuple[str, str], CallSite] = {}
    try:
        dirs = _library_dirs()
        seen: set[str] = set()
        for top, graph in _traced_functions(dataset):
            for fname, g in _graphs(top, graph, seen):
                for op in g.get_operations():
                    if op.type in op_types:
                        site = call_site(op.traceback, dirs)
                        if site is not None:
                            out[(fname, op.name)] = site
    except Exception:  # noqa: BLE001 - private API moved: fall back to def lines
        return out
    return out
