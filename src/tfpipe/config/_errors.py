"""pydantic ValidationError -> ConfigError lines `key.path: what is wrong, got X; allowed ...`."""

from __future__ import annotations

import difflib
import re
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from tfpipe.config._types import fmt
from tfpipe.config.ops import SECTIONS, OpConfig
from tfpipe.errors import ConfigError


def suggest(word: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(word, allowed, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


_UNION_TAG = re.compile(r"^(function-|literal\[|nullable\[|union\[|tuple\[|list\[|lax-|"
                        r"json-|(int|float|str|bool|none)$)")


def _clean_loc(loc: tuple[Any, ...]) -> list[Any]:
    """Drop the discriminator tag pydantic repeats after an op's name, and the
    union-member tags it adds (`function-after[...]`, `literal['random']`)."""
    parts = [p for p in loc if not (isinstance(p, str) and _UNION_TAG.match(p))]
    if len(parts) >= 4 and parts[0] == "augment" and parts[1] in SECTIONS and parts[2] == parts[3]:
        del parts[3]
    return parts


def key_path(parts: list[Any]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


def _model_at(root: type[BaseModel], parts: list[Any]) -> type[BaseModel] | None:
    """The model class that owns the mapping at `parts` (for 'allowed keys')."""
    model: Any = root
    i = 0
    while i < len(parts):
        part = parts[i]
        if model is None or not isinstance(part, str):
            return None
        if len(parts) >= 3 and parts[0] == "augment" and i == 2 and parts[1] in SECTIONS:
            model = SECTIONS[parts[1]].get(part)
        else:
            field = model.model_fields.get(part)
            if field is None:
                return None
            ann = field.annotation
            # an optional section (`data.keys: KeysConfig | None`) owns its keys too
            models = [a for a in typing.get_args(ann)
                      if isinstance(a, type) and issubclass(a, BaseModel)]
            if typing.get_origin(ann) is typing.Union and len(models) == 1:
                ann = models[0]
            model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
            if model is None and i == 1 and parts[0] == "augment" and part in SECTIONS:
                model = "section"
        i += 1
    return model if isinstance(model, type) else None


def allowed_keys(model: type[BaseModel]) -> list[str]:
    keys = list(model.model_fields)
    if issubclass(model, OpConfig):
        keys.remove("name")
    return keys


def _line(root: type[BaseModel], err: dict[str, Any]) -> list[str]:
    parts = _clean_loc(err["loc"])
    kind, value = err["type"], err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden" and parts:
        *parent, key = parts
        if key == "__name__":
            return [f"{key_path(parent)}.name: unknown key; the op's name is its key"]
        owner = _model_at(root, parent)
        allowed = allowed_keys(owner) if owner else []
        tail = f"; allowed: {', '.join(allowed)}" if allowed else ""
        return [f"{key_path(parts)}: unknown key{suggest(str(key), allowed)}{tail}"]
    where = key_path(parts)
    if kind == "union_tag_invalid":
        section = parts[1] if len(parts) > 1 else ""
        allowed = list(SECTIONS.get(section, {}))
        return [f"{where}: unknown {section} op{suggest(str(parts[-1]), allowed)}; "
                f"allowed: {', '.join(allowed)}"]
    if kind in ("model_attributes_type", "dict_type", "model_type"):
        if len(parts) == 3 and parts[0] == "augment":
            return [f"{where}: must be a mapping of parameters, true, false or null, got {fmt(value)}"]
        return [f"{where}: must be a mapping, got {fmt(value)}"]
    if kind == "value_error":
        msg = str(ctx.get("error", err["msg"]))
        lines = msg.splitlines()
        if not where:
            return lines  # cross-field checks already name their keys
        # A leading "." is a key relative to the model that raised it.
        return [f"{where}{line}" if line.startswith(".") else f"{where}: {line}" for line in lines]
    if kind == "literal_error":
        return [f"{where}: must be {ctx.get('expected')}, got {fmt(value)}"]
    if kind == "missing":
        return [f"{where}: required"]
    simple = {
        "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
        "float_type": "a number", "float_parsing": "a number", "finite_number": "a finite number",
        "bool_type": "true or false", "bool_parsing": "true or false",
        "string_type": "a string", "list_type": "a list", "tuple_type": "a list",
    }
    if kind in simple:
        return [f"{where}: must be {simple[kind]}, got {fmt(value)}"]
    if kind in ("too_short", "too_long"):
        expected = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        return [f"{where}: must have {expected} items, got {fmt(value)}"]
    return [f"{where}: {err['msg']}, got {fmt(value)}"]


def translate(root: type[BaseModel], exc: ValidationError, source: str | None = None) -> ConfigError:
    lines: list[str] = []
    for err in exc.errors(include_url=False):
        for line in _line(root, err):
            if line not in lines:
                lines.append(line)
    return config_error(lines, source)


def config_error(lines: list[str], source: str | None = None) -> ConfigError:
    err = ConfigError("\n".join(lines))
    err.errors = lines  # type: ignore[attr-defined]
    err.source = source  # type: ignore[attr-defined]
    return err
