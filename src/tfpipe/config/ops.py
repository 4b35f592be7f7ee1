"""Augmentation op models: one class per op of the op table in docs/architecture.md.

Each op has `enabled` (default true), `p` (probability of applying it to a
sample, or to a batch for L4 ops; default 1.0, flip 0.5) and its own params.
`op.params` is the plain dict of params handed to the `tfpipe.augment` sampler.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tfpipe.config._types import Float, Int, Pair, Range, Unit, fmt

FillMode = Literal["constant", "reflect", "nearest"]
Interpolation = Literal["nearest", "bilinear", "bicubic"]

_COMMON = ("name", "enabled", "p")
# random_resized_crop's defaults, as Inception's: `tfpipe.augment.CROP_SCALE` /
# `CROP_RATIO` are the same numbers for the augment layer (config imports no
# augment; tests/config check that the two agree)
CROP_SCALE = (0.08, 1.0)
CROP_RATIO = (3 / 4, 4 / 3)


class OpConfig(BaseModel):
    """Fields shared by every op; subclasses add the op's params."""

    model_config = ConfigDict(extra="forbid")

    name: str
    enabled: bool = True
    p: Unit = 1.0  # type: ignore[valid-type]

    section: ClassVar[str] = ""
    # geometry: the op is a 3x3 matrix, so every target (boxes, masks) can follow it
    # (`config.tasks.TaskRules.one_matrix`; the pipeline's op registry holds the matrix)
    affine: ClassVar[bool] = True

    @property
    def params(self) -> dict[str, Any]:
        """The op's own parameters (everything but name / enabled / p), plain values."""
        dumped = self.model_dump(mode="json")
        return {k: v for k, v in dumped.items() if k not in _COMMON}

    @classmethod
    def param_names(cls) -> list[str]:
        return [k for k in cls.model_fields if k not in _COMMON]

    def to_dict(self) -> dict[str, Any]:
        """`{enabled, p, **params}`: what the YAML holds under the op's name."""
        return {k: v for k, v in self.model_dump(mode="json").items() if k != "name"}


class _LowerUpper(OpConfig):
    """Ops sampling a factor uniformly in [lower, upper]."""

    @model_validator(mode="after")
    def _ordered(self) -> "_LowerUpper":
        lower, upper = getattr(self, "lower"), getattr(self, "upper")
        if lower > upper:
            # A leading "." marks a key relative to this op (see _errors.py).
            raise ValueError(f".lower: must be <= upper ({fmt(upper)}), got {fmt(lower)}")
        return self


# ---------------------------------------------------------------- L2 geometry
class RandomResizedCrop(OpConfig):
    name: Literal["random_resized_crop"] = "random_resized_crop"
    scale: Range(0.0, 1.0, lo_open=True) = CROP_SCALE  # type: ignore[valid-type]
    ratio: Range(0.0, lo_open=True) = CROP_RATIO  # type: ignore[valid-type]


class CenterCrop(OpConfig):
    name: Literal["center_crop"] = "center_crop"
    crop_fraction: Float(0.0, 1.0, lo_open=True) = 0.875  # type: ignore[valid-type]


class Flip(OpConfig):
    name: Literal["flip"] = "flip"
    p: Unit = 0.5  # type: ignore[valid-type]
    horizontal: bool = True
    vertical: bool = False


class Rot90(OpConfig):
    name: Literal["rot90"] = "rot90"


class Affine(OpConfig):
    name: Literal["affine"] = "affine"
    rotation: Float(0.0, 180.0) = 0.0  # type: ignore[valid-type]
    scale: Range(0.0, lo_open=True) = (1.0, 1.0)  # type: ignore[valid-type]
    per_axis_scale: bool = False
    shear: Float(0.0, 89.0) = 0.0  # type: ignore[valid-type]
    translate: Pair(0.0, 1.0) = (0.0, 0.0)  # type: ignore[valid-type]
    interpolation: Interpolation = "bilinear"
    fill_mode: FillMode = "constant"
    fill_value: Float(0.0, 255.0) = 0.0  # type: ignore[valid-type]


class PadAndCrop(OpConfig):
    name: Literal["pad_and_crop"] = "pad_and_crop"
    padding: Int(0) = 4  # type: ignore[valid-type]
    fill_mode: FillMode = "constant"


class Elastic(OpConfig):
    name: Literal["elastic"] = "elastic"
    affine: ClassVar[bool] = False  # a displacement field: no matrix for the targets
    alpha: Float(0.0, lo_open=True) = 34.0  # type: ignore[valid-type]
    sigma: Float(0.0, lo_open=True) = 4.0  # type: ignore[valid-type]


# ------------------------------------------------------------------- L3 pixel
class Brightness(OpConfig):
    name: Literal["brightness"] = "brightness"
    max_delta: Unit = 0.2  # type: ignore[valid-type]


class Contrast(_LowerUpper):
    name: Literal["contrast"] = "contrast"
    lower: Float(0.0, lo_open=True) = 0.8  # type: ignore[valid-type]
    upper: Float(0.0, lo_open=True) = 1.2  # type: ignore[valid-type]


class Saturation(_LowerUpper):
    name: Literal["saturation"] = "saturation"
    lower: Float(0.0) = 0.8  # type: ignore[valid-type]
    upper: Float(0.0) = 1.2  # type: ignore[valid-type]


class Hue(OpConfig):
    name: Literal["hue"] = "hue"
    max_delta: Float(0.0, 0.5) = 0.05  # type: ignore[valid-type]


class Grayscale(OpConfig):
    name: Literal["grayscale"] = "grayscale"


class Gamma(_LowerUpper):
    name: Literal["gamma"] = "gamma"
    lower: Float(0.0, lo_open=True) = 0.8  # type: ignore[valid-type]
    upper: Float(0.0, lo_open=True) = 1.2  # type: ignore[valid-type]


class GaussianNoise(OpConfig):
    name: Literal["gaussian_noise"] = "gaussian_noise"
    stddev: Unit = 0.03  # type: ignore[valid-type]


class SpeckleNoise(OpConfig):
    name: Literal["speckle_noise"] = "speckle_noise"
    stddev: Unit = 0.1  # type: ignore[valid-type]


class GaussianBlur(OpConfig):
    name: Literal["gaussian_blur"] = "gaussian_blur"
    sigma: Range(0.0, lo_open=True) = (0.1, 2.0)  # type: ignore[valid-type]
    kernel_size: Int(3) = 5  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _odd(self) -> "GaussianBlur":
        if self.kernel_size % 2 == 0:
            raise ValueError(f".kernel_size: must be odd, got {self.kernel_size}")
        return self


class Sharpen(_LowerUpper):
    name: Literal["sharpen"] = "sharpen"
    lower: Float(0.0) = 0.5  # type: ignore[valid-type]
    upper: Float(0.0) = 1.5  # type: ignore[valid-type]


class RandomErasing(OpConfig):
    name: Literal["random_erasing"] = "random_erasing"
    scale: Range(0.0, 1.0, lo_open=True) = (0.02, 0.33)  # type: ignore[valid-type]
    ratio: Range(0.0, lo_open=True) = (0.3, 3.3)  # type: ignore[valid-type]
    value: Union[float, Literal["random"]] = 0.0

    @field_validator("value", mode="before")
    @classmethod
    def _value(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().lower() == "random":
            return "random"
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= v <= 1.0:
            return float(v)
        raise ValueError(f"must be a number in [0, 1] or 'random', got {fmt(v)}")


class Posterize(OpConfig):
    name: Literal["posterize"] = "posterize"
    bits: Int(1, 8) = 4  # type: ignore[valid-type]


class Solarize(OpConfig):
    name: Literal["solarize"] = "solarize"
    threshold: Unit = 0.5  # type: ignore[valid-type]


class Equalize(OpConfig):
    name: Literal["equalize"] = "equalize"


class Autocontrast(OpConfig):
    name: Literal["autocontrast"] = "autocontrast"


class JpegQuality(_LowerUpper):
    name: Literal["jpeg_quality"] = "jpeg_quality"
    lower: Int(0, 100) = 50  # type: ignore[valid-type]
    upper: Int(0, 100) = 95  # type: ignore[valid-type]


class ChannelShuffle(OpConfig):
    name: Literal["channel_shuffle"] = "channel_shuffle"


class RandAugment(OpConfig):
    name: Literal["randaugment"] = "randaugment"
    num_ops: Int(1) = 2  # type: ignore[valid-type]
    magnitude: Int(0, 30) = 9  # type: ignore[valid-type]


class TrivialAugment(OpConfig):
    name: Literal["trivialaugment"] = "trivialaugment"


# ------------------------------------------------------------------- L4 batch
class Mixup(OpConfig):
    name: Literal["mixup"] = "mixup"
    alpha: Float(0.0, lo_open=True) = 0.2  # type: ignore[valid-type]


class Cutmix(OpConfig):
    name: Literal["cutmix"] = "cutmix"
    alpha: Float(0.0, lo_open=True) = 1.0  # type: ignore[valid-type]


class Mosaic(OpConfig):
    name: Literal["mosaic"] = "mosaic"


GEOMETRY_OPS: dict[str, type[OpConfig]] = {c.model_fields["name"].default: c for c in (
    RandomResizedCrop, CenterCrop, Flip, Rot90, Affine, PadAndCrop, Elastic)}
PIXEL_OPS: dict[str, type[OpConfig]] = {c.model_fields["name"].default: c for c in (
    Brightness, Contrast, Saturation, Hue, Grayscale, Gamma, GaussianNoise, SpeckleNoise,
    GaussianBlur, Sharpen, RandomErasing, Posterize, Solarize, Equalize, Autocontrast,
    JpegQuality, ChannelShuffle, RandAugment, TrivialAugment)}
BATCH_OPS: dict[str, type[OpConfig]] = {c.model_fields["name"].default: c for c in (
    Mixup, Cutmix, Mosaic)}
SECTIONS: dict[str, dict[str, type[OpConfig]]] = {
    "geometry": GEOMETRY_OPS, "pixel": PIXEL_OPS, "batch": BATCH_OPS}
for _section, _ops in SECTIONS.items():
    for _cls in _ops.values():
        _cls.section = _section

GeometryOp = Annotated[Union[tuple(GEOMETRY_OPS.values())], Field(discriminator="name")]  # type: ignore[misc]
PixelOp = Annotated[Union[tuple(PIXEL_OPS.values())], Field(discriminator="name")]  # type: ignore[misc]
BatchOp = Annotated[Union[tuple(BATCH_OPS.values())], Field(discriminator="name")]  # type: ignore[misc]
