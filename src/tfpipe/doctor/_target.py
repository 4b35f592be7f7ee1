"""Resolve a doctor TARGET into a dataset.

TARGET is one of:
  path/to/file.py:function   the file is imported (only because the user named it)
                             and function() must return a tf.data.Dataset;
  package.module:function    the same for an importable module;
  a tfpipe config            preset name or YAML path, built with tfpipe.build_pipeline.
User code is imported only in the first two forms.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tensorflow as tf

from tfpipe.errors import TfpipeError

_MODULE_NAME = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_IDENT = re.compile(r"^[A-Za-z_][\w]*$")


class TargetError(TfpipeError):
    """A doctor TARGET that cannot be loaded; the message says which form was tried and why."""


@dataclass
class LoadedTarget:
    dataset: tf.data.Dataset
    kind: str                                   # "file" | "module" | "config"
    description: str
    locations: dict[str, str] = field(default_factory=dict)
    batch_size: int | None = None
    config: Any = None  # the loaded tfpipe config (kind "config"): tabular rules read it


def _split(target: str) -> tuple[str, str] | None:
    if ":" not in target:
        return None
    left, _, right = target.rpartition(":")
    if not _IDENT.match(right):
        return None
    return left, right


def _call(fn: Any, target: str) -> tf.data.Dataset:
    if not callable(fn):
        raise TargetError(f"{target}: {type(fn).__name__} object is not callable")
    try:
        ds = fn()
    except TypeError as exc:
        raise TargetError(f"{target}: the function must take no arguments and return a "
                          f"tf.data.Dataset; calling it failed: {exc}") from exc
    except Exception as exc:
        raise TargetError(f"{target}: calling the function raised "
                          f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(ds, tf.data.Dataset):
        raise TargetError(f"{target}: the function returned {type(ds).__name__}, "
                          "not a tf.data.Dataset")
    return ds


def _load_file(path: Path, fn_name: str, target: str) -> LoadedTarget:
    from tfpipe.doctor._check import locate_functions

    if not path.is_file():
        raise TargetError(f"{target}: no such file {path}")
    name = "_tfpipe_doctor_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"{target}: cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Let the file import its siblings, as `python file.py` would.
    sys.path.insert(0, str(path.resolve().parent))
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise TargetError(f"{target}: importing {path} raised {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.pop(0)
    if not hasattr(module, fn_name):
        raise TargetError(f"{target}: {path} defines no {fn_name!r}")
    ds = _call(getattr(module, fn_name), target)
    try:
        locations = locate_functions(path)
    except (OSError, SyntaxError, UnicodeDecodeError):
        locations = {}
    return LoadedTarget(ds, "file", f"{path}:{fn_name}", locations)


def _load_module(module_name: str, fn_name: str, target: str) -> LoadedTarget:
    from tfpipe.doctor._check import locate_functions

    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(f"{target}: cannot import module {module_name!r}: {exc}") from exc
    except Exception as exc:
        raise TargetError(f"{target}: importing {module_name!r} raised "
                          f"{type(exc).__name__}: {exc}") from exc
    if not hasattr(module, fn_name):
        raise TargetError(f"{target}: module {module_name!r} defines no {fn_name!r}")
    ds = _call(getattr(module, fn_name), target)
    locations: dict[str, str] = {}
    source = getattr(module, "__file__", None)
    if source and source.endswith(".py"):
        try:
            locations = locate_functions(source)
        except (OSError, SyntaxError, UnicodeDecodeError):
            pass
    return LoadedTarget(ds, "module", f"{module_name}:{fn_name}", locations)


def _load_config(target: str, sets: Sequence[str], split: str) -> LoadedTarget:
    try:
        from tfpipe import config as config_mod
        load_config = config_mod.load_config
    except (ImportError, AttributeError) as exc:
        raise TargetError(f"{target}: not file.py:function or module:function, and tfpipe "
                          f"configs cannot be loaded here ({exc})") from exc
    try:
        if sets:
            parse = getattr(config_mod, "parse_set_options", None)
            if parse is None:
                raise TargetError("--set needs tfpipe.config.parse_set_options, which this "
                                  "tfpipe does not have")
            config = load_config(target, overrides=parse(list(sets)))
        else:
            config = load_config(target)
    except TargetError:
        raise
    except TfpipeError as exc:
        raise TargetError(f"{target}: not a loadable tfpipe config: {exc}") from exc
    except (OSError, ValueError, KeyError) as exc:
        raise TargetError(f"{target}: not a Python target (file.py:function or "
                          f"module:function) nor a tfpipe config: {exc}") from exc
    from tfpipe.pipeline import build_pipeline

    try:
        ds = build_pipeline(config, split=split)
    except Exception as exc:
        raise TargetError(f"{target}: building the pipeline failed: "
                          f"{type(exc).__name__}: {exc}") from exc
    batch = None
    try:
        batch = int(config.pipeline.batch_size)
    except (AttributeError, TypeError, ValueError):
        pass
    return LoadedTarget(ds, "config", f"tfpipe config {target} ({split})", {}, batch, config)


def load_target(target: str, sets: Sequence[str] = (), split: str = "train") -> LoadedTarget:
    """Turn TARGET into a dataset (see the module docstring); TargetError if it cannot."""
    parts = _split(target)
    if parts is not None:
        left, fn_name = parts
        if left.endswith(".py") or "/" in left or "\\" in left:
            if sets:
                raise TargetError(f"{target}: --set applies to tfpipe configs only")
            return _load_file(Path(left), fn_name, target)
        if _MODULE_NAME.match(left):
            if sets:
                raise TargetError(f"{target}: --set applies to tfpipe configs only")
            return _load_module(left, fn_name, target)
    return _load_config(target, sets, split)
