"""load_config: preset or YAML file -> `base` merge -> dotted overrides -> Config."""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tfpipe.config._errors import config_error, suggest, translate
from tfpipe.config.models import Config
from tfpipe.errors import ConfigError

# Configs are small; a bound keeps a hostile or mistaken file from eating memory.
MAX_CONFIG_BYTES = 1 << 20
_MAX_BASE_DEPTH = 8


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys (op order would silently change) and
    aliases (no billion-laughs expansion when the merged config is dumped)."""

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.constructor.ConstructorError(
                None, None, "YAML aliases (*name) are not allowed in tfpipe configs", event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:  # type: ignore[override]
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _yaml_load(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise config_error([f"{source}: not valid YAML{where}: {problem}"], source) from None


# ------------------------------------------------------------------- presets
def _preset_dir() -> Any:
    return resources.files("tfpipe.config") / "presets"


@functools.lru_cache(maxsize=1)
def _preset_names() -> tuple[str, ...]:
    return tuple(sorted(p.name[:-5] for p in _preset_dir().iterdir() if p.name.endswith(".yaml")))


def preset_names() -> list[str]:
    """Names of the presets shipped in tfpipe/config/presets/*.yaml."""
    return list(_preset_names())


def preset_text(name: str) -> str:
    if name not in preset_names():
        raise config_error([f"unknown preset {name!r}{suggest(name, preset_names())}; "
                            f"presets: {', '.join(preset_names())}"])
    return (_preset_dir() / f"{name}.yaml").read_text(encoding="utf-8")


def preset_description(name: str) -> str:
    """The preset's first comment line (`# what it is for`)."""
    for line in preset_text(name).splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""


def list_presets() -> dict[str, str]:
    return {name: preset_description(name) for name in preset_names()}


# ------------------------------------------------------------- resolution
def _is_preset_ref(ref: str) -> bool:
    # A bare name that matches a preset wins over a same-named directory in the cwd
    # (a dataset folder called `imagenet` is common); paths need a suffix or separator.
    return ref in preset_names() and os.sep not in ref and "/" not in ref


def _read_file(path: Path) -> str:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        presets = ", ".join(preset_names())
        raise config_error([f"{path}: no such config file (and not a preset; presets: {presets})"],
                           str(path)) from None
    if not path.is_file():
        raise config_error([f"{path}: not a file"], str(path))
    if size > MAX_CONFIG_BYTES:
        raise config_error([f"{path}: config file is {size} bytes; the limit is {MAX_CONFIG_BYTES}"],
                           str(path))
    return path.read_text(encoding="utf-8")


def _load_raw(ref: str, relative_to: Path | None, chain: tuple[str, ...]) -> dict[str, Any]:
    """Raw mapping for a preset name or YAML path, with its `base` chain merged in."""
    if _is_preset_ref(ref):
        source, text, here = f"preset {ref}", preset_text(ref), None
    else:
        path = Path(ref).expanduser()
        if relative_to is not None and not path.is_absolute():
            path = relative_to / path
        if not path.suffix and not path.exists() and ref not in preset_names():
            raise config_error([f"{ref!r} is neither a preset nor a config file"
                                f"{suggest(ref, preset_names())}; presets: {', '.join(preset_names())}"])
        source, text, here = str(path), _read_file(path), path.resolve().parent
    key = source if here is None else str(Path(source).resolve())
    if key in chain:
        raise config_error([f"{source}: `base` cycle: {' -> '.join(chain + (key,))}"], source)
    if len(chain) >= _MAX_BASE_DEPTH:
        raise config_error([f"{source}: `base` chain deeper than {_MAX_BASE_DEPTH}"], source)
    raw = _yaml_load(text, source)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise config_error([f"{source}: the top level must be a mapping of keys, got {type(raw).__name__}"],
                           source)
    base = raw.pop("base", None)
    if base is None:
        return raw
    if not isinstance(base, str) or not base:
        raise config_error([f"base: must be a preset name ({', '.join(preset_names())}) or a "
                            f"YAML path, got {base!r}"], source)
    return deep_merge(_load_raw(base, here, chain + (key,)), raw)


def _op_value(value: Any) -> Any:
    # op shorthand: `flip:` / `flip: true` -> {}, `flip: false` -> {enabled: false}
    if value is None or value is True:
        return {}
    if value is False:
        return {"enabled": False}
    return value


def _enabling(value: Any) -> Any:
    """An op entry that names parameters (or is `op:` / `op: true`) but not `enabled`
    turns the op on: `mixup: {alpha: 0.2}` over a preset's disabled mixup means
    mixup with alpha 0.2, not a silently disabled op."""
    if isinstance(value, Mapping) and "enabled" not in value:
        return {**value, "enabled": True}
    return value


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any],
               _path: tuple[str, ...] = ()) -> dict[str, Any]:
    """`over` wins; mappings merge key by key (new keys append, so a user's op runs
    after the preset's); lists and scalars replace. Inside `augment.<section>`,
    `op: false` merges as `{enabled: false}` and keeps the preset's params; an op
    entry that does not say `enabled` (`op: {alpha: 0.2}`, `op: true`, `op:`)
    enables the op and keeps the params it does not name."""
    in_section = len(_path) == 2 and _path[0] == "augment"
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        old = out.get(key)
        if in_section:
            value, old = _enabling(_op_value(value)), _op_value(old) if key in out else None
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            out[key] = deep_merge(old, value, _path + (str(key),))
        else:
            out[key] = copy.deepcopy(value)
    return out


def parse_value(value: Any) -> Any:
    """CLI strings are YAML scalars: `0.2` -> float, `true` -> bool, `null` -> None."""
    if not isinstance(value, str):
        return value
    return _yaml_load(value, f"value {value!r}") if value.strip() else value


def _op_path(parts: list[str]) -> tuple[str, ...] | None:
    """(`augment`, section, op) when `parts` names an op or one of its keys."""
    from tfpipe.config.ops import SECTIONS

    if len(parts) >= 3 and parts[0] == "augment" and parts[1] in SECTIONS:
        return tuple(parts[:3])
    return None


def apply_overrides(raw: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Set dotted keys (`augment.pixel.brightness.max_delta`) in a raw config dict.

    Ops follow the merge rules of `deep_merge`: `augment.batch.mixup=true` (or
    `={alpha: 0.3}`) enables mixup and keeps the preset's other fields (its `p`,
    its `alpha`); setting one of an op's parameters (`augment.batch.mixup.alpha=0.3`)
    enables it too, unless `...mixup.enabled` is set in the same overrides.
    """
    out = copy.deepcopy(raw)
    errors: list[str] = []
    explicit = {_op_path(str(k).split(".")) for k in overrides
                if str(k).split(".")[3:] == ["enabled"]}
    for dotted, value in overrides.items():
        parts = str(dotted).split(".")
        if not all(parts):
            errors.append(f"{dotted}: not a dotted key (e.g. pipeline.batch_size)")
            continue
        if parts[0] == "base":
            errors.append("base: cannot be overridden; pass the preset or file as the config")
            continue
        node: Any = out
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None or child is True:
                child = node[part] = {}
            elif child is False and len(parts) - i > 1:
                child = node[part] = {"enabled": False}
            if not isinstance(child, dict):
                errors.append(f"{'.'.join(parts[: i + 1])}: is {child!r}, not a mapping; "
                              f"cannot set {dotted}")
                break
            node = child
        else:
            op = _op_path(parts)
            if op is not None and len(parts) == 3:  # the op itself: merge, never reset
                node.update(deep_merge(node, {parts[2]: parse_value(value)}, op[:2]))
                continue
            node[parts[-1]] = parse_value(value)
            if op is not None and len(parts) == 4 and op not in explicit and parts[3] != "enabled":
                node["enabled"] = True  # node is the op's mapping here
    if errors:
        raise config_error(errors)
    return out


def load_config(name_or_path: str | os.PathLike[str] | Mapping[str, Any] | Config,
                overrides: Mapping[str, Any] | None = None) -> Config:
    """A validated `Config` from a preset name, a YAML path or a mapping.

    `base: NAME` (preset or path, relative to the file) is deep-merged under the
    file; `overrides` are dotted keys whose string values parse as YAML scalars.
    Raises `ConfigError` listing every problem, one `key.path: ...` per line.
    A `Config` passes through (a validated copy, with `overrides` applied).
    """
    if isinstance(name_or_path, Config):
        name_or_path = name_or_path.to_dict()
    if isinstance(name_or_path, Mapping):
        raw = dict(copy.deepcopy(name_or_path))
        base = raw.pop("base", None)
        source = "<mapping>"
        if base is not None:
            if not isinstance(base, str):
                raise config_error([f"base: must be a preset name or a YAML path, got {base!r}"])
            raw = deep_merge(_load_raw(base, None, ()), raw)
    else:
        source = os.fspath(name_or_path)
        raw = _load_raw(source, None, ())
    if overrides:
        raw = apply_overrides(raw, overrides)
    return validate(raw, source)


def validate(raw: Mapping[str, Any], source: str | None = None) -> Config:
    """Validate an already merged mapping (no `base`)."""
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        raise translate(Config, exc, source) from None


def parse_set_options(options: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`["a.b=1", "c=x"]` -> `{"a.b": "1", "c": "x"}` (values stay strings; load_config
    parses them as YAML scalars). Shared by every CLI verb that takes `--set`."""
    out: dict[str, str] = {}
    errors: list[str] = []
    for opt in options:
        key, sep, value = opt.partition("=")
        key = key.strip()
        if not sep or not key or any(not p for p in key.split(".")):
            errors.append(f"--set {opt!r}: expected KEY=VALUE with a dotted key, "
                          f"e.g. --set pipeline.batch_size=32")
            continue
        out[key] = value
    if errors:
        raise config_error(errors)
    return out
