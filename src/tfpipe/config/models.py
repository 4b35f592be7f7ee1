"""The validated config: `Config` = seed + data + pipeline + augment.

Shape and defaults follow docs/architecture.md; docs/config.md is the reference.
Models forbid unknown keys; `tfpipe.config.load_config` turns pydantic's errors
into `ConfigError` lines that name the key, the value and what is allowed.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tfpipe.config._types import Float, Int, Unit, fmt
from tfpipe.config.features import FeaturesConfig
from tfpipe.config.ops import SECTIONS, BatchOp, GeometryOp, OpConfig, PixelOp
from tfpipe.config.tasks import TASK_RULES, TASKS, data_key_problems, task_problems

#: tf.data's own tuning (`tf.data.AUTOTUNE`): the runtime picks and changes the value.
AUTOTUNE = "autotune"
#: tfpipe's fixed, measured default (docs/pipeline.md, "Parallelism"): 2 x the CPUs
#: this process may use for the maps, 4 shards for the interleave, AUTOTUNE for prefetch.
AUTO = "auto"
#: What `tf.data.AUTOTUNE` is; config stays TensorFlow-free.
TF_AUTOTUNE = -1
#: `tf_value` of `auto`: not a tf.data value; the pipeline resolves it (map_parallelism).
TF_AUTO = -2

Parallelism = Union[int, Literal["auto", "autotune"]]


class _Dumper(yaml.SafeDumper):
    """Block mappings, flow lists: `image_size: [224, 224]` stays on one line."""


_Dumper.add_representer(list, lambda d, v: d.represent_sequence(
    "tag:yaml.org,2002:seq", v, flow_style=True))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _parallelism(key: str, value: Any) -> Any:
    """int >= 1, 'auto' / 'autotune' (any case) or -1 (tf.data.AUTOTUNE) -> int or name."""
    if isinstance(value, str) and value.strip().lower() in (AUTO, AUTOTUNE):
        return value.strip().lower()
    if isinstance(value, int) and not isinstance(value, bool):
        if value == TF_AUTOTUNE:
            return AUTOTUNE
        if value >= 1:
            return value
    raise ValueError(f"must be an integer >= 1, 'auto' (tfpipe's measured default) or "
                     f"'autotune' (tf.data.AUTOTUNE), got {fmt(value)}")


# A cache value that is neither keyword must look like a path, so that a typo
# (`ram`, `memroy`, `true`) fails here instead of creating a directory `ram/`.
_CACHE_WORDS = ("none", "memory")


def _cache_value(v: Any) -> str:
    if v is None or v is False:
        return "none"
    allowed = ("must be 'none', 'memory' or a directory path written as a path "
               "(with a '/', or starting with '~' or '.': './cache', '/tmp/tfpipe-cache')")
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"{allowed}, got {fmt(v)}")
    if v.strip().lower() in _CACHE_WORDS:
        return v.strip().lower()
    if "/" in v or "\\" in v or v.startswith(("~", ".")):
        return v
    from tfpipe.config._errors import suggest

    raise ValueError(f"{allowed}, got {fmt(v)}{suggest(v.lower(), list(_CACHE_WORDS))}")


class Normalize(_Model):
    """Per-channel mean / std on the [0, 1] scale: x' = (x / 255 - mean) / std."""

    mean: list[Float(0.0, 1.0)] = Field(default_factory=lambda: [0.485, 0.456, 0.406])  # type: ignore[valid-type]
    std: list[Float(0.0, lo_open=True)] = Field(default_factory=lambda: [0.229, 0.224, 0.225])  # type: ignore[valid-type]


#: The roles `data.keys` maps to a record's feature keys (docs/own-records.md).
KEY_ROLES = ("image", "label", "class_text", "boxes", "box_labels", "mask", "keypoints",
             "height", "width", "filename")


class BoxKeys(_Model):
    """Boxes stored as four keys, one coordinate each (the OD API's layout)."""

    ymin: str
    xmin: str
    ymax: str
    xmax: str


class KeysConfig(_Model):
    """`data.keys`: tfpipe role -> the record's feature key (every role optional).

    Boxes are one key of 4 floats per box (`box_format` gives the order) or four
    keys (`BoxKeys`); `box_units: pixels` divides by the image's height/width
    (the mapped `height`/`width` keys, else the encoded image's own size).
    Conventions are declared, never guessed."""

    image: Union[str, None] = None
    label: Union[str, None] = None
    class_text: Union[str, None] = None
    boxes: Union[str, BoxKeys, None] = None
    box_format: Literal["yxyx", "xyxy"] = "yxyx"
    box_units: Literal["normalized", "pixels"] = "normalized"
    box_labels: Union[str, None] = None
    mask: Union[str, None] = None
    keypoints: Union[str, None] = None
    height: Union[str, None] = None
    width: Union[str, None] = None
    filename: Union[str, None] = None

    @field_validator(*(r for r in KEY_ROLES if r != "boxes"), mode="before")
    @classmethod
    def _key(cls, v: Any) -> Any:
        if v is not None and (not isinstance(v, str) or not v.strip()):
            raise ValueError(f"must be a feature key of the records (a non-empty string), "
                             f"got {fmt(v)}")
        return v

    @model_validator(mode="after")
    def _box_conventions(self) -> "KeysConfig":
        given = self.model_fields_set
        if self.boxes is None and given & {"box_format", "box_units"}:
            raise ValueError(".box_format/.box_units: describe `boxes`, which is not mapped; "
                             "set data.keys.boxes or drop them")
        if isinstance(self.boxes, BoxKeys) and "box_format" in given:
            raise ValueError(".box_format: only for boxes in ONE key (4 floats per box); "
                             "four keys name their coordinates already")
        return self

    def mapped(self) -> dict[str, Any]:
        """The roles given (plus the box conventions when boxes are), as plain values."""
        out = {r: getattr(self, r) for r in KEY_ROLES if getattr(self, r) is not None}
        if isinstance(self.boxes, BoxKeys):
            out["boxes"] = self.boxes.model_dump()
            out["box_units"] = self.box_units
        elif self.boxes is not None:
            out["box_format"], out["box_units"] = self.box_format, self.box_units
        return out


class InstanceMasksConfig(_Model):
    """`data.instance_masks`: each object's mask cropped to its box, at `size`
    (docs/instance-masks.md)."""

    # Mask R-CNN's mask head size; max_boxes * h * w bytes per sample
    size: tuple[Int(1, 1024), Int(1, 1024)] = (28, 28)  # type: ignore[valid-type]

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, v: Any) -> Any:
        # `size: 28` is shorthand for [28, 28]
        return [v, v] if isinstance(v, int) and not isinstance(v, bool) else v


class KeypointsConfig(_Model):
    """`data.keypoints` (detection): carry each object's keypoints through the
    geometry (docs/detection.md, "Keypoints").

    `names`: the K point names (None: the manifest's `source["keypoints"]["names"]`);
    `flip_pairs`: which points swap under a mirror: `auto` pairs `left_X` with
    `right_X` by name (only the `left_` / `right_` prefixes), or explicit index
    pairs `[[i, j], ...]` (0-based, no point twice; checked against K at build)."""

    names: Union[list[str], None] = None
    flip_pairs: Union[Literal["auto"], list[list[Int(0)]]] = "auto"  # type: ignore[valid-type]

    @field_validator("names")
    @classmethod
    def _names(cls, v: Any) -> Any:
        if v is None:
            return v
        if not v or any(not n.strip() for n in v):
            raise ValueError(f"must be a non-empty list of non-empty point names, got {fmt(v)}")
        dup = sorted({n for n in v if v.count(n) > 1})
        if dup:
            raise ValueError(f"names a point twice: {', '.join(dup)}")
        return v

    @field_validator("flip_pairs")
    @classmethod
    def _pairs(cls, v: Any) -> Any:
        if v == "auto":
            return v
        seen: set[int] = set()
        for pair in v:
            if len(pair) != 2 or pair[0] == pair[1]:
                raise ValueError(f"each pair is two different point indices [i, j], got "
                                 f"{fmt(pair)}; allowed: 'auto' or [[i, j], ...]")
            twice = [i for i in pair if i in seen]
            if twice:
                raise ValueError(f"point {twice[0]} is in two pairs ({fmt(pair)}); a point "
                                 "swaps with one other point only")
            seen.update(pair)
        return v

    @model_validator(mode="after")
    def _in_range(self) -> "KeypointsConfig":
        if self.names is not None and self.flip_pairs != "auto":
            k = len(self.names)
            for pair in self.flip_pairs:
                bad = [i for i in pair if i >= k]
                if bad:
                    raise ValueError(f".flip_pairs: index {bad[0]} in {fmt(pair)} is out of "
                                     f"range; allowed: 0..{k - 1} (the {k} names)")
        return self


class DataConfig(_Model):
    path: Union[str, None] = None
    # tfpipe role -> record key, for records tfpipe did not write (None: tfpipe's own keys)
    keys: Union[KeysConfig, None] = None
    task: Literal[TASKS] = "classification"  # type: ignore[valid-type]
    image_size: tuple[Int(1), Int(1)] = (224, 224)  # type: ignore[valid-type]
    channels: Literal[1, 3] = 3
    output_dtype: Literal["float32", "uint8"] = "float32"
    normalize: Normalize = Field(default_factory=Normalize)
    label_format: Literal["index", "one_hot"] = "index"
    num_classes: Union[Int(1), None] = None  # type: ignore[valid-type]
    # subtracted from every label in the graph: 1 for 1-based label sets
    # (docs/own-records.md "Labels out of range"); 0 keeps the bytes as they were
    label_offset: Int(0) = 0  # type: ignore[valid-type]
    eval_crop_fraction: Float(0.0, 1.0, lo_open=True) = 0.875  # type: ignore[valid-type]
    max_boxes: Int(1) = 100  # type: ignore[valid-type]
    dct_scaling: bool = True
    # segmentation: the mask value outside the source image and in eval padding
    ignore_label: Int(0, 255) = 255  # type: ignore[valid-type]
    # detection: carry instance masks (image/object/mask) cropped to their boxes; None: off
    instance_masks: Union[InstanceMasksConfig, None] = None
    # detection: each object's keypoints (None: not carried); see KeypointsConfig
    keypoints: Union[KeypointsConfig, None] = None

    @field_validator("image_size", mode="before")
    @classmethod
    def _size(cls, v: Any) -> Any:
        # `image_size: 224` is shorthand for [224, 224].
        size = [v, v] if isinstance(v, int) and not isinstance(v, bool) else v
        if (not isinstance(size, (list, tuple)) or len(size) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in size)):
            raise ValueError(f"must be [height, width] of positive integers (or one integer), "
                             f"got {fmt(v)}")
        return size

    @model_validator(mode="after")
    def _norm_channels(self) -> "DataConfig":
        for key in ("mean", "std"):
            n = len(getattr(self.normalize, key))
            if n not in (1, self.channels):
                want = "1 value" if self.channels == 1 else f"1 or {self.channels} values"
                raise ValueError(f".normalize.{key}: needs {want} (one per channel, "
                                 f"data.channels is {self.channels}), got {n}")
        return self


class PipelineConfig(_Model):
    batch_size: Int(1) = 64  # type: ignore[valid-type]
    shuffle_buffer: Int(0) = 10000  # type: ignore[valid-type]
    num_parallel_calls: Parallelism = AUTO
    interleave_cycle: Parallelism = AUTO
    prefetch: Parallelism = AUTOTUNE
    cache: str = "none"
    deterministic: bool = True
    drop_remainder: bool = True
    private_threadpool: Union[Int(1), None] = None  # type: ignore[valid-type]
    ram_budget_mb: Union[Int(1), None] = None  # type: ignore[valid-type]
    prefetch_to_device: Union[str, None] = None
    on_error: Literal["skip", "raise"] = "skip"
    # Directory written by `tfpipe materialize`; when set, the pipeline reads those
    # pre-augmented epochs instead of augmenting on the fly.
    materialized: Union[str, None] = None

    @field_validator("num_parallel_calls", "interleave_cycle", "prefetch", mode="before")
    @classmethod
    def _auto(cls, v: Any, info: Any) -> Any:
        return _parallelism(info.field_name, v)

    @field_validator("cache", mode="before")
    @classmethod
    def _cache(cls, v: Any) -> Any:
        return _cache_value(v)

    def tf_value(self, key: Literal["num_parallel_calls", "interleave_cycle", "prefetch"]) -> int:
        """The configured int, -1 (tf.data.AUTOTUNE) for `autotune`, or -2 (`TF_AUTO`)
        for `auto`, which the pipeline resolves (docs/pipeline.md, "Parallelism")."""
        v = getattr(self, key)
        if v == AUTOTUNE:
            return TF_AUTOTUNE
        return TF_AUTO if v == AUTO else int(v)


def _op_entries(value: Any) -> Any:
    """YAML shorthand -> dicts carrying their name (the union discriminator)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"must be a mapping of op name -> parameters, got {fmt(value)}")
    out: dict[str, Any] = {}
    for name, params in value.items():
        if params is None or params is True:
            params = {}
        elif params is False:
            params = {"enabled": False}
        elif isinstance(params, dict):
            params = dict(params)
            if "name" in params and params["name"] != name:
                # `name` comes from the key; a different one would be confusing.
                params["__name__"] = params.pop("name")
        else:
            out[name] = params  # leave it to the union to report the bad type
            continue
        params["name"] = name
        out[name] = params
    return out


class AugmentConfig(_Model):
    enable_rate: Unit = 1.0  # type: ignore[valid-type]
    # Where L3 + normalize + L4 run for the train split: `host` (in the pipeline) or
    # `device` (the pipeline emits uint8 + the draws; `tfpipe.augment.OnDevice` in the
    # train step applies them: docs/augment-pixel.md, "On-device pixel stage").
    pixel_stage: Literal["host", "device"] = "host"
    geometry: dict[str, GeometryOp] = Field(default_factory=dict)
    pixel: dict[str, PixelOp] = Field(default_factory=dict)
    batch: dict[str, BatchOp] = Field(default_factory=dict)

    @field_validator("geometry", "pixel", "batch", mode="before")
    @classmethod
    def _entries(cls, v: Any) -> Any:
        return _op_entries(v)

    def ops(self, section: Literal["geometry", "pixel", "batch"]) -> list[OpConfig]:
        """Ops of a section in application order (enabled or not)."""
        return list(getattr(self, section).values())

    def active(self, section: Literal["geometry", "pixel", "batch"]) -> list[OpConfig]:
        """Enabled ops with p > 0, in application order."""
        return [op for op in self.ops(section) if op.enabled and op.p > 0]


# Keys the tabular pipeline never reads (docs/tabular.md, "Config"): a tabular config
# that sets one to anything but its default was accepted and silently ignored, so a
# user believed a detection task, an image size or materialized epochs were in force.
# Compared with the default (not "was it written"), so that a dict that writes every
# key (`model_dump()`, an image config's shape) still loads; a tabular config's
# `to_dict()` leaves these keys out.
_IMAGE_ONLY = {
    "data": ("task", "image_size", "channels", "output_dtype", "normalize", "label_format",
             "num_classes", "eval_crop_fraction", "max_boxes", "dct_scaling", "label_offset",
             "keys", "instance_masks", "keypoints"),
    "pipeline": ("materialized", "prefetch_to_device"),
    "augment": ("enable_rate", "pixel_stage", "geometry", "pixel", "batch"),
}


def _image_keys_in_tabular(cfg: "Config") -> list[str]:
    defaults = {"data": DataConfig(), "pipeline": PipelineConfig(), "augment": AugmentConfig()}
    problems = []
    for section, keys in _IMAGE_ONLY.items():
        have, default = getattr(cfg, section), defaults[section]
        for key in keys:
            value = getattr(have, key)
            if value == getattr(default, key):
                continue
            shown = (", ".join(value) if isinstance(value, dict) else
                     fmt(value.model_dump() if isinstance(value, BaseModel) else value))
            problems.append(
                f"{section}.{key}: an image-pipeline key, set to {shown}; a tabular config "
                f"(a features: section) never reads it and would ignore it silently: remove "
                f"it (docs/tabular.md, \"Config\", lists the keys a tabular config reads)")
    return problems


class Config(_Model):
    """A fully resolved tfpipe config (no `base`: presets are merged in by load_config)."""

    seed: Int(0, 2**63 - 1) = 0  # type: ignore[valid-type]
    data: DataConfig = Field(default_factory=DataConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    augment: AugmentConfig = Field(default_factory=AugmentConfig)
    # tabular data (docs/tabular.md); absent for images
    features: Union[FeaturesConfig, None] = None

    @model_validator(mode="after")
    def _cross_field(self) -> "Config":
        if self.features is not None:
            tabular = _image_keys_in_tabular(self)
            if tabular:
                raise ValueError("\n".join(tabular))
        problems: list[str] = []
        task, channels = self.data.task, self.data.channels
        # Validation checks and never rewrites: a validator that set a value (once
        # label_format = one_hot under mixup) carried it into to_dict() and kept it
        # after mixup was turned off again. Derived values are properties
        # (`one_hot_labels`) and the pipeline's `Settings.one_hot`.
        # the per-task rules (mosaic, mixup, non-affine geometry, device L3): one row
        # per task in `config.tasks`
        problems += task_problems(task, {sec: self.augment.active(sec)
                                         for sec in ("batch", "geometry")},
                                  self.augment.pixel_stage, fmt)
        problems += data_key_problems(task, {"instance_masks": self.data.instance_masks,
                                             "keypoints": self.data.keypoints}, fmt)
        if channels == 1:
            for op in self.augment.active("pixel"):
                if op.name in ("saturation", "hue", "channel_shuffle"):
                    problems.append(f"augment.pixel.{op.name}: needs 3 colour channels, "
                                    f"data.channels is 1")
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @property
    def one_hot_labels(self) -> bool:
        """Derived, never stored: classification labels leave as float one-hot when
        `data.label_format` is one_hot or an active mixup/cutmix mixes them (soft
        labels an index cannot carry); `label_format` keeps what the user wrote."""
        mixing = any(op.name in ("mixup", "cutmix") for op in self.augment.active("batch"))
        return self.data.label_format == "one_hot" or (
            mixing and TASK_RULES[self.data.task].soft_labels)

    # ------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        """Plain, fully resolved dict in YAML shape (ops keyed by name, in order)."""
        out = self.model_dump(mode="json", exclude={"augment", "features"})
        if self.data.keys is None:  # configs without a mapping keep their dict (and hash)
            del out["data"]["keys"]
        else:
            out["data"]["keys"] = self.data.keys.model_dump(mode="json", exclude_none=True)
        if self.data.instance_masks is None:  # off: the dict (and hash) as before
            del out["data"]["instance_masks"]
        if self.data.keypoints is None:  # configs without keypoints keep their dict (and hash)
            del out["data"]["keypoints"]
        for rules in TASK_RULES.values():  # other tasks keep their dict (and hash)
            for key in rules.data_keys:
                if key not in TASK_RULES[self.data.task].data_keys:
                    out["data"].pop(key, None)
        if self.features is not None:
            # a tabular config shows the keys it reads: the image-only ones can only be
            # at their defaults here (validation refuses anything else)
            for section in ("data", "pipeline"):
                for key in _IMAGE_ONLY[section]:
                    out[section].pop(key, None)
            out["features"] = self.features.to_dict()
            return out
        out["augment"] = {"enable_rate": self.augment.enable_rate,
                          "pixel_stage": self.augment.pixel_stage}
        for section in SECTIONS:
            out["augment"][section] = {op.name: op.to_dict() for op in self.augment.ops(section)}
        return out

    def to_yaml(self) -> str:
        """Fully resolved YAML; `load_config` of it gives back an equal Config."""
        return yaml.dump(self.to_dict(), Dumper=_Dumper, sort_keys=False, default_flow_style=False)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)
