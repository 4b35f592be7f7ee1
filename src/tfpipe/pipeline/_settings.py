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

from tfpipe.config import TASK_RULES

AUTOTUNE = -1
#: `num_parallel_calls: auto`: tfpipe's fixed, measured default (map_parallelism).
AUTO = -2


@dataclass(frozen=True)
class Op:
    """One configured augmentation op: `name`, `enabled`, `p`, plain-dict `params`."""

    name: str
    enabled: bool = True
    p: float = 1.0
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    """The flattened, validated config the builder reads (defaults live in tfpipe.config)."""

    seed: int
    data_path: str | None
    task: str
    image_size: tuple[int, int]
    channels: int
    output_dtype: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    label_format: str
    num_classes: int | None
    eval_crop_fraction: float
    max_boxes: int
    batch_size: int
    shuffle_buffer: int
    num_parallel_calls: int  # >= 1, AUTOTUNE (-1) or AUTO (-2)
    interleave_cycle: int  # shards open at once; -1: the default (4), for auto and autotune
    prefetch: int
    cache: str
    deterministic: bool
    drop_remainder: bool
    private_threadpool: int | None
    ram_budget_mb: int | None
    prefetch_to_device: str | None
    on_error: str
    materialized: str | None
    enable_rate: float
    geometry: tuple[Op, ...]
    pixel: tuple[Op, ...]
    batch: tuple[Op, ...]
    # parallel shard reads: 0 = one per open shard; AUTOTUNE (`interleave_cycle:
    # autotune`): tf.data decides. Never changes a byte (the cycle sets the order).
    read_parallel: int = 0
    # the validated `features:` section (tfpipe.config.FeaturesConfig) of a tabular
    # config, None for images; pipeline/_tabular.py converts it to TransformSpecs
    features: Any = None
    # "host" | "device": where train L3 + normalize + L4 run (augment.pixel_stage)
    pixel_stage: str = "host"
    # JPEG windows decoded at the largest DCT reduction that keeps them >= the
    # output (pipeline/_decode.py); changes pixels, so it is hashed like any key
    dct_scaling: bool = True
    # subtracted from every label (data.label_offset); 0 is left out of the hashes
    label_offset: int = 0
    # `data.keys` as plain values (`KeysConfig.mapped`): tfpipe role -> record key;
    # None: tfpipe's own keys (pipeline/_keys.py)
    keys: Any = None
    # segmentation: the mask's fill outside the source and in eval padding
    # (data.ignore_label); left out of the hashes of the other tasks
    ignore_label: int = 255
    # detection: the (h, w) of each object's box-cropped mask (data.instance_masks.size);
    # None: no instance masks (left out of the hashes then)
    instance_masks: tuple[int, int] | None = None
    # detection: `data.keypoints` as plain values ({names, flip_pairs}); None: not
    # carried (pipeline/_keypoints.py resolves names and the flip permutation)
    keypoints: Any = None

    def active(self, section: str) -> list[Op]:
        """Enabled ops of `geometry` / `pixel` / `batch` with p > 0, in order."""
        return [op for op in getattr(self, section) if op.enabled and op.p > 0]

    @property
    def one_hot(self) -> bool:
        """Labels leave as float one-hot when asked, or when mixup/cutmix mix them."""
        mixing = any(op.name in ("mixup", "cutmix") for op in self.active("batch"))
        return self.label_format == "one_hot" or (
            mixing and TASK_RULES[self.task].soft_labels)

    def fingerprint(self, *keys: str) -> str:
        """Short hash of the named settings (cache / materialize keys)."""
        values = asdict(self)
        blob = json.dumps({k: values[k] for k in keys}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _ops(section: Mapping[str, Any]) -> tuple[Op, ...]:
    """Validated op configs (name -> model, in order) -> plain `Op`s for the builder."""
    return tuple(Op(op.name, op.enabled, float(op.p), dict(op.params))
                 for op in section.values())


def settings(config: Any) -> Settings:
    """Read every value `build_pipeline` uses from `config` (validated first)."""
    if isinstance(config, Settings):
        return config
    from tfpipe.config import Config, load_config

    if not isinstance(config, Config):
        config = load_config(config)
    data, pipe, aug = config.data, config.pipeline, config.augment
    return Settings(
        seed=int(config.seed),
        data_path=None if data.path is None else str(data.path),
        task=data.task,
        image_size=(int(data.image_size[0]), int(data.image_size[1])),
        channels=int(data.channels),
        output_dtype=data.output_dtype,
        mean=tuple(float(v) for v in data.normalize.mean),
        std=tuple(float(v) for v in data.normalize.std),
        label_format=data.label_format,
        num_classes=data.num_classes,
        eval_crop_fraction=float(data.eval_crop_fraction),
        max_boxes=int(data.max_boxes),
        dct_scaling=bool(data.dct_scaling),
        label_offset=int(data.label_offset),
        keys=None if data.keys is None else data.keys.mapped(),
        ignore_label=int(data.ignore_label),
        instance_masks=(None if data.instance_masks is None else
                        (int(data.instance_masks.size[0]), int(data.instance_masks.size[1]))),
        keypoints=None if data.keypoints is None else data.keypoints.model_dump(mode="json"),
        batch_size=int(pipe.batch_size),
        shuffle_buffer=int(pipe.shuffle_buffer),
        num_parallel_calls=int(pipe.tf_value("num_parallel_calls")),
        # auto and autotune both keep the fixed default cycle: tf.data's AUTOTUNE
        # cycle length is the host's core count, and the cycle sets the sample order
        interleave_cycle=max(AUTOTUNE, int(pipe.tf_value("interleave_cycle"))),
        read_parallel=AUTOTUNE if pipe.interleave_cycle == "autotune" else 0,
        prefetch=max(AUTOTUNE, int(pipe.tf_value("prefetch"))),  # auto: AUTOTUNE
        cache=str(pipe.cache),
        deterministic=bool(pipe.deterministic),
        drop_remainder=bool(pipe.drop_remainder),
        private_threadpool=pipe.private_threadpool,
        ram_budget_mb=pipe.ram_budget_mb,
        prefetch_to_device=pipe.prefetch_to_device or None,
        on_error=pipe.on_error,
        materialized=None if pipe.materialized is None else str(pipe.materialized),
        enable_rate=float(aug.enable_rate),
        geometry=_ops(aug.geometry),
        pixel=_ops(aug.pixel),
        batch=_ops(aug.batch),
        features=config.features,
        pixel_stage=str(aug.pixel_stage),
    )
