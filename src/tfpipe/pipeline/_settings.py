"""Flatten a tfpipe config into the plain values the pipeline builder needs.

`build_pipeline` reads the config only through `settings(config)`. Anything
that is not already a validated `tfpipe.config.Config` (a preset name, a YAML
path, a plain nested dict of the same shape) goes through `load_config` first,
so validation and defaults have one source of truth: `tfpipe.config`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tfpipe.errors import ConfigError

AUTOTUNE = -1

# Default `p` per op when the config does not say (op table in docs/architecture.md).
_DEFAULT_P = {"flip": 0.5}


@dataclass(frozen=True)
class Op:
    """One configured augmentation op: `name`, `enabled`, `p`, plain-dict `params`."""

    name: str
    enabled: bool = True
    p: float = 1.0
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    seed: int = 0
    data_path: str | None = None
    task: str = "classification"
    image_size: tuple[int, int] = (224, 224)
    channels: int = 3
    output_dtype: str = "float32"
    mean: tuple[float, ...] = (0.485, 0.456, 0.406)
    std: tuple[float, ...] = (0.229, 0.224, 0.225)
    label_format: str = "index"
    num_classes: int | None = None
    eval_crop_fraction: float = 0.875
    max_boxes: int = 100
    batch_size: int = 64
    shuffle_buffer: int = 10000
    num_parallel_calls: int = AUTOTUNE
    interleave_cycle: int = AUTOTUNE
    prefetch: int = AUTOTUNE
    cache: str = "none"
    deterministic: bool = True
    drop_remainder: bool = True
    private_threadpool: int | None = None
    ram_budget_mb: int | None = None
    prefetch_to_device: str | None = None
    on_error: str = "skip"
    materialized: str | None = None
    enable_rate: float = 1.0
    geometry: tuple[Op, ...] = ()
    pixel: tuple[Op, ...] = ()
    batch: tuple[Op, ...] = ()

    def active(self, section: str) -> list[Op]:
        """Enabled ops of `geometry` / `pixel` / `batch` with p > 0, in order."""
        return [op for op in getattr(self, section) if op.enabled and op.p > 0]

    @property
    def one_hot(self) -> bool:
        """Labels leave as float one-hot when asked, or when mixup/cutmix mix them."""
        mixing = any(op.name in ("mixup", "cutmix") for op in self.active("batch"))
        return self.label_format == "one_hot" or (mixing and self.task == "classification")

    def fingerprint(self, *keys: str) -> str:
        """Short hash of the named settings (cache / materialize keys)."""
        values = asdict(self)
        blob = json.dumps({k: values[k] for k in keys}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _plain(value: Any) -> Any:
    """pydantic models / mappings -> plain dicts (params are handed to augment ops)."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _op(name: str, value: Any) -> Op:
    default_p = _DEFAULT_P.get(name, 1.0)
    if value is None or value is True:
        return Op(name, True, default_p, {})
    if value is False:
        return Op(name, False, default_p, {})
    if hasattr(value, "params") and not isinstance(value, Mapping):
        params = _plain(value.params) or {}
        enabled = bool(_get(value, "enabled", True))
        p = _get(value, "p", None)
        return Op(str(_get(value, "name", name) or name), enabled,
                  float(default_p if p is None else p), dict(params))
    raw = dict(_plain(value))
    enabled = bool(raw.pop("enabled", True))
    p = raw.pop("p", None)
    raw.pop("name", None)
    return Op(name, enabled, float(default_p if p is None else p), raw)


def _ops(section: Any) -> tuple[Op, ...]:
    if section is None:
        return ()
    if hasattr(section, "items"):
        return tuple(_op(str(k), v) for k, v in section.items())
    if isinstance(section, (list, tuple)):
        out = []
        for item in section:
            if isinstance(item, Mapping) and len(item) == 1 and "name" not in item:
                (k, v), = item.items()
                out.append(_op(str(k), v))
            else:
                out.append(_op(str(_get(item, "name")), item))
        return tuple(out)
    # pydantic model with one field per op (fields in declaration order)
    fields = getattr(type(section), "model_fields", None)
    if fields is not None:
        return tuple(_op(k, getattr(section, k)) for k in fields
                     if getattr(section, k) is not None)
    raise ConfigError(f"augment section must be a mapping of op name -> params, "
                      f"got {type(section).__name__}")


def _int_or_auto(key: str, value: Any) -> int:
    if value is None or (isinstance(value, str) and value.lower() == "autotune"):
        return AUTOTUNE
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: must be an integer >= 1 or 'autotune', got {value!r}") from None
    if value == AUTOTUNE:
        return AUTOTUNE
    if value < 1:
        raise ConfigError(f"{key}: must be an integer >= 1 or 'autotune', got {value}")
    return value


def settings(config: Any) -> Settings:
    """Read every value `build_pipeline` uses from `config` (Config model or dict)."""
    if isinstance(config, Settings):
        return config
    from tfpipe.config import Config, load_config

    if not isinstance(config, Config):
        config = load_config(config)
    data = _get(config, "data", {})
    pipe = _get(config, "pipeline", {})
    aug = _get(config, "augment", {})
    norm = _get(data, "normalize", None)
    mean = _get(norm, "mean", Settings.mean)
    std = _get(norm, "std", Settings.std)
    size = _get(data, "image_size", Settings.image_size)
    if isinstance(size, int):
        size = (size, size)
    cache = _get(pipe, "cache", "none")
    cache = "none" if cache in (None, False, "") else str(cache)
    path = _get(data, "path", None)
    s = Settings(
        seed=int(_get(config, "seed", 0) or 0),
        data_path=None if path is None else str(path),
        task=str(_get(data, "task", "classification")),
        image_size=(int(size[0]), int(size[1])),
        channels=int(_get(data, "channels", 3)),
        output_dtype=str(_get(data, "output_dtype", "float32")),
        mean=tuple(float(v) for v in mean),
        std=tuple(float(v) for v in std),
        label_format=str(_get(data, "label_format", "index")),
        num_classes=_get(data, "num_classes", None),
        eval_crop_fraction=float(_get(data, "eval_crop_fraction", 0.875)),
        max_boxes=int(_get(data, "max_boxes", 100)),
        batch_size=int(_get(pipe, "batch_size", 64)),
        shuffle_buffer=int(_get(pipe, "shuffle_buffer", 10000)),
        num_parallel_calls=_int_or_auto("pipeline.num_parallel_calls",
                                        _get(pipe, "num_parallel_calls", None)),
        interleave_cycle=_int_or_auto("pipeline.interleave_cycle",
                                      _get(pipe, "interleave_cycle", None)),
        prefetch=_int_or_auto("pipeline.prefetch", _get(pipe, "prefetch", None)),
        cache=cache,
        deterministic=bool(_get(pipe, "deterministic", True)),
        drop_remainder=bool(_get(pipe, "drop_remainder", True)),
        private_threadpool=_get(pipe, "private_threadpool", None),
        ram_budget_mb=_get(pipe, "ram_budget_mb", None),
        prefetch_to_device=_get(pipe, "prefetch_to_device", None) or None,
        on_error=str(_get(pipe, "on_error", "skip")),
        materialized=_get(pipe, "materialized", None) or None,
        enable_rate=float(_get(aug, "enable_rate", 1.0)),
        geometry=_ops(_get(aug, "geometry", None)),
        pixel=_ops(_get(aug, "pixel", None)),
        batch=_ops(_get(aug, "batch", None)),
    )
    return s
