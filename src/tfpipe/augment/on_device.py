"""L3 + normalize + L4 where the model runs: the device half of `augment.pixel_stage: device`.

With `augment.pixel_stage: device` a classification train pipeline stops after
L2: each batch carries the uint8 images and, as extra tensors, everything the
rest of the recipe drew on the host -- each sample's L3 parameters (or, for ops
whose draw is a per-pixel field or has no scalar parameter, its L3 op seeds),
its `augment.enable_rate` decision, and the batch's L4 draws (partners,
mixup lambdas, cutmix boxes and label weights). `OnDevice` (a Keras layer) or
`DeviceStage` (a plain callable, fine inside any `tf.function` / train step)
turns that batch into exactly what the all-host pipeline (`pixel_stage: host`)
emits: the same colour chain, the same normalize, the same mixup/cutmix, the
same per-sample gating (both run `augment_batch`, the one definition of
"L3 -> L4 -> normalize, gated per row"). On CPU the result is bit-identical
(tested for the presets); on an accelerator the same TF ops run with that
device's kernels
(docs/augment-pixel.md, "On-device pixel stage", says what may round
differently and how to measure it).

The element keys (`FEATURE_KEYS`):

| key | shape, dtype | what |
|---|---|---|
| `image` | [B,H,W,C] uint8 | after L1 + L2 (plain rows: the eval rendering) |
| `augment_enabled` | [B] bool | the sample's `enable_rate` decision |
| `pixel_params`, `pixel_apply` | [B, n] f32, [B, n] bool | scalar colour chains (brightness, contrast, saturation, hue, gamma): each op's drawn parameter and p-coin |
| `pixel_seeds` | [B, n, 2] int64 | any other L3 chain: each op's per-sample op seed (the device draws with the same stateless op) |
| `mixup_perm`, `mixup_lambda` | [B] int32, [B] f32 | mixup's partners and weights (1: not mixed) |
| `cutmix_perm`, `cutmix_boxes`, `cutmix_weight` | [B] int32, [B,4] int32, [B] f32 | cutmix's partners, integer boxes, partner label weight |

This module may import only `tfpipe.seeds` and the leaves (DESIGN.md), so the
layer is built from plain values (`DeviceSpec`); `tfpipe.pipeline.device_stage(config)`
builds it from a config.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Mapping, Sequence

import tensorflow as tf

from tfpipe.augment import batch as _batch
from tfpipe.augment import color as _color
from tfpipe.augment import pixel as _pixel
from tfpipe.augment import policies as _policies
from tfpipe.errors import ConfigError
from tfpipe.native import chain_ops as _chain_ops

__all__ = ["DeviceSpec", "DeviceStage", "OnDevice", "apply_on_device", "augment_batch",
           "color_chain", "pixel_function", "select_rows", "gated", "FEATURE_KEYS", "CHAIN_OPS"]

IMAGE = "image"
ENABLED = "augment_enabled"
PIXEL_PARAMS, PIXEL_APPLY, PIXEL_SEEDS = "pixel_params", "pixel_apply", "pixel_seeds"
FEATURE_KEYS = (IMAGE, ENABLED, PIXEL_PARAMS, PIXEL_APPLY, PIXEL_SEEDS, "mixup_perm",
                "mixup_lambda", "cutmix_perm", "cutmix_boxes", "cutmix_weight")
#: the ops of a scalar-parameter colour chain (the one table: tfpipe.native.chain_ops)
CHAIN_OPS: tuple[str, ...] = _chain_ops.CHAIN_OPS
_MODULES = (_color, _pixel, _policies)


# --------------------------------------------------------------------------- kernels
def color_chain(x: tf.Tensor, params: tf.Tensor, apply: tf.Tensor, ops: Sequence[str],
                gated_ops: Sequence[bool], *, to_float: bool, normalize: bool,
                mean: Sequence[float] | None = None, std: Sequence[float] | None = None
                ) -> tf.Tensor:
    """The scalar colour chain on a uint8 batch x [B,H,W,C]: `adjust_<op>(x, params[:, j])`
    in order, each selected per row by `apply[:, j]` where `gated_ops[j]` (p < 1),
    then `normalize` (float32 out). Plain TF ops only: the twin of the native
    `TfpipePixelChain` (same bits, tests/native) and what runs on an accelerator.

    to_float: run in float32 [0, 1]; else on uint8 levels, rounded per op (carried
    as integer-valued float32 `color.Levels`: the same values without a
    f32 -> u8 -> f32 round trip per op).
    """
    y = tf.cast(x, tf.float32)
    y = y * (1.0 / 255.0) if to_float else _color.Levels(y)
    for j, name in enumerate(ops):
        out = getattr(_color, _chain_ops.kernel(name))(y, params[:, j])
        if gated_ops[j]:
            if to_float:
                out = _color.maybe_apply(apply[:, j], out, y)
            else:
                out = _color.Levels(_color.maybe_apply(apply[:, j], out.x, y.x))
        y = out
    if not to_float:
        y = tf.cast(y.x, tf.uint8)  # exact: integer values in [0, 255]
    if normalize:
        y = _color.normalize(y, mean, std)
    return y


def pixel_function(name: str, params: Mapping[str, Any], p: float
                   ) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """`(images [B,H,W,C], seeds [B,2]) -> images` for the L3 op `name`: its
    `random_<name>` (or `<name>`, the policies) with per-row seeds."""
    fn = None
    for attr in (f"random_{name}", name):  # as `tfpipe.augment`'s namespace resolves them
        for mod in _MODULES:
            fn = fn or getattr(mod, attr, None)
    if fn is None:
        raise ConfigError(f"augment.pixel.{name}: no such op in tfpipe.augment "
                          f"(looked for random_{name} / {name})")
    kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in params.items()}
    return lambda images, s: fn(images, s, **kw, p=p)


def select_rows(mask: tf.Tensor, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """Row i of `a` where mask[i], else row i of `b` (mask [B], a/b [B, ...])."""
    a = tf.convert_to_tensor(a)
    shape = tf.concat([tf.shape(mask), tf.ones([a.shape.rank - 1], tf.int32)], 0)
    return tf.where(tf.reshape(mask, shape), a, tf.cast(b, a.dtype))


def gated(mask: tf.Tensor, augmented: Callable[..., Any], plain: Callable[[], Any]) -> Any:
    """Per-sample `enable_rate` gate of a batch: `augmented()` where the batch's
    rows are all enabled, `plain()` where none is, else `augmented(mask)` with
    every disabled row replaced by its `plain()` row (each output a [B, ...]
    tensor). Only the branch a batch needs runs."""
    def mixed() -> Any:
        return tf.nest.map_structure(lambda a, b: select_rows(mask, a, b),
                                     augmented(mask), plain())

    return tf.cond(tf.reduce_all(mask), augmented,
                   lambda: tf.cond(tf.reduce_any(mask), mixed, plain))


L3 = Callable[[tf.Tensor, bool], tuple[tf.Tensor, bool]]
Mixer = Callable[[tf.Tensor, Any], tuple[tf.Tensor, Any]]


def augment_batch(images: tf.Tensor, labels: Any, enabled: tf.Tensor | None, *,
                  l3: L3 | None, mixers: Sequence[Mixer],
                  normalize: Callable[[tf.Tensor], tf.Tensor], float_out: bool
                  ) -> tuple[tf.Tensor, Any]:
    """L3 -> L4 -> normalize of a uint8 batch, gated PER SAMPLE by `enabled` [B]
    (None: enable_rate 1, every row augmented). The one definition the host
    pipeline (`pixel_stage: host`) and `DeviceStage` both run.

    l3: `(images, normalize) -> (x, normalized)`, the batch's chain with its
    inputs bound (None: no L3); x float32 [0, 1] (or already normalized) for
    float32 output, uint8 for uint8 output. mixers: `(x, y) -> (x, y)`, the L4
    ops in order with their draws bound. A batch whose rows agree runs one
    branch; one whose rows disagree (after a skipped record, or under
    `deterministic: false`) runs L3 and selects per row, then L4 on the whole
    batch -- a plain row takes part as a mixing partner with its plain pixels
    and label -- and finally every plain row gets exactly its plain rendering
    back (image and label), so a plain sample is always the eval rendering and
    only enabled samples are augmented (docs/pipeline.md).
    """
    def plain() -> tuple[tf.Tensor, Any]:
        return (normalize(images) if float_out else images), labels

    if l3 is None and not mixers:
        return plain()

    def augmented(mask: tf.Tensor | None = None) -> tuple[tf.Tensor, Any]:
        x, y, normalized = images, labels, False
        if l3 is not None:
            # normalize fused into L3's pass when no L4 follows (same bits)
            x, normalized = l3(images, not mixers)
            if mask is not None and mixers:  # L4 sees plain rows unaugmented
                x = select_rows(mask, x, tf.cast(images, tf.float32) * (1.0 / 255.0)
                                if float_out else images)
        elif float_out:
            x = tf.cast(images, tf.float32) * (1.0 / 255.0)
        for mix in mixers:
            x, y = mix(x, y)
        if float_out and not normalized:
            x = normalize(x)
        return x, y

    if enabled is None:
        return augmented()
    return gated(enabled, augmented, plain)


# --------------------------------------------------------------------------- spec
def _op(entry: Any) -> dict[str, Any]:
    if isinstance(entry, Mapping):
        name, p, params = entry["name"], entry.get("p", 1.0), entry.get("params", {})
    else:  # an object with name / p / params (tfpipe.pipeline's Op)
        name, p, params = entry.name, entry.p, entry.params
    return {"name": str(name), "p": float(p), "params": json.loads(json.dumps(dict(params)))}


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """What the device stage applies: the L3 ops (in order; `fused` when they form a
    scalar colour chain, whose parameters come drawn), the L4 ops, normalize, the
    output dtype and `enable_rate` -- the values of the pipeline config it pairs
    with (`tfpipe.pipeline.device_stage(config)` fills them in)."""

    pixel: tuple[dict[str, Any], ...] = ()
    batch: tuple[dict[str, Any], ...] = ()
    mean: tuple[float, ...] = (0.485, 0.456, 0.406)
    std: tuple[float, ...] = (0.229, 0.224, 0.225)
    output_dtype: str = "float32"
    enable_rate: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "pixel", tuple(_op(o) for o in self.pixel))
        object.__setattr__(self, "batch", tuple(_op(o) for o in self.batch))
        object.__setattr__(self, "mean", tuple(float(v) for v in self.mean))
        object.__setattr__(self, "std", tuple(float(v) for v in self.std))
        if self.output_dtype not in ("float32", "uint8"):
            raise ValueError(f"DeviceSpec.output_dtype must be 'float32' or 'uint8', "
                             f"got {self.output_dtype!r}")
        if any(s <= 0 for s in self.std):
            raise ValueError(f"DeviceSpec.std must be > 0, got {list(self.std)}")
        for op in self.batch:
            if op["name"] not in ("mixup", "cutmix"):
                raise ConfigError(f"augment.batch.{op['name']}: not a classification op; "
                                  "allowed: mixup, cutmix")

    @property
    def fused(self) -> bool:
        """The L3 ops form a scalar colour chain (their parameters travel drawn)."""
        return bool(self.pixel) and all(op["name"] in CHAIN_OPS for op in self.pixel)

    def to_dict(self) -> dict[str, Any]:
        return {"pixel": [dict(o) for o in self.pixel], "batch": [dict(o) for o in self.batch],
                "mean": list(self.mean), "std": list(self.std),
                "output_dtype": self.output_dtype, "enable_rate": self.enable_rate}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DeviceSpec":
        return cls(pixel=tuple(d.get("pixel", ())), batch=tuple(d.get("batch", ())),
                   mean=tuple(d["mean"]), std=tuple(d["std"]),
                   output_dtype=str(d.get("output_dtype", "float32")),
                   enable_rate=float(d.get("enable_rate", 1.0)))


# --------------------------------------------------------------------------- stage
class DeviceStage:
    """`(features, labels) -> (images, labels)`: L3 + L4 + normalize of one batch,
    from the tensors a `pixel_stage: device` pipeline emits (module docstring).

    Plain TF ops, no state, no Python side effects: call it inside a
    `tf.function` train step, under `strategy.run`, or eagerly. `labels` are what
    the pipeline emits (one-hot float when mixup/cutmix are on; mixed here).
    """

    def __init__(self, spec: DeviceSpec | Mapping[str, Any]) -> None:
        self.spec = spec if isinstance(spec, DeviceSpec) else DeviceSpec.from_dict(spec)
        sp = self.spec
        self._names = [op["name"] for op in sp.pixel]
        self._gated = [op["p"] < 1.0 for op in sp.pixel]
        self._fns = [] if sp.fused else [pixel_function(op["name"], op["params"], op["p"])
                                         for op in sp.pixel]

    def _check(self, features: Mapping[str, tf.Tensor], labels: Any) -> None:
        sp = self.spec
        need = [IMAGE]
        if sp.pixel or sp.batch:
            need.append(ENABLED)
        if sp.pixel:
            need += [PIXEL_PARAMS, PIXEL_APPLY] if sp.fused else [PIXEL_SEEDS]
        for op in sp.batch:
            need += ["mixup_perm", "mixup_lambda"] if op["name"] == "mixup" else [
                "cutmix_perm", "cutmix_boxes", "cutmix_weight"]
        missing = [k for k in need if k not in features]
        if missing:
            raise ValueError(f"on_device: the batch lacks {missing} (has {sorted(features)}); "
                             "build the pipeline with augment.pixel_stage: device and the same "
                             "config as this stage")
        if sp.batch and labels is None:
            raise ValueError("on_device: mixup/cutmix mix the labels too: pass labels "
                             "(stage(features, labels))")

    def normalize(self, x: tf.Tensor) -> tf.Tensor:
        return _color.normalize(x, self.spec.mean, self.spec.std)

    def l3(self, features: Mapping[str, tf.Tensor], images: tf.Tensor, normalize: bool
           ) -> tuple[tf.Tensor, bool]:
        """The batch's L3 (as the host pipeline's `PixelStage.apply`): (x, normalized)."""
        float_out = self.spec.output_dtype == "float32"
        if self.spec.fused:
            norm = normalize and float_out
            return color_chain(images, features[PIXEL_PARAMS], features[PIXEL_APPLY],
                               self._names, self._gated, to_float=float_out, normalize=norm,
                               mean=self.spec.mean, std=self.spec.std), norm
        x = tf.cast(images, tf.float32) * (1.0 / 255.0) if float_out else images
        for j, fn in enumerate(self._fns):
            x = fn(x, features[PIXEL_SEEDS][:, j])
        return x, False

    def __call__(self, features: Mapping[str, tf.Tensor], labels: Any = None) -> Any:
        self._check(features, labels)
        sp = self.spec
        images = tf.convert_to_tensor(features[IMAGE])
        if images.dtype != tf.uint8:
            raise TypeError(f"on_device: features['image'] must be uint8, got {images.dtype.name}")
        mixers: list[Mixer] = []
        for op in sp.batch:
            if op["name"] == "mixup":
                mixers.append(lambda x, y: _batch.apply_mixup(
                    x, y, features["mixup_perm"], features["mixup_lambda"]))
            else:
                mixers.append(lambda x, y: _batch.apply_cutmix(
                    x, y, features["cutmix_perm"], features["cutmix_boxes"],
                    features["cutmix_weight"]))
        gate = sp.enable_rate < 1.0 and bool(sp.pixel or sp.batch)
        enabled = tf.convert_to_tensor(features[ENABLED]) if gate else None
        x, y = augment_batch(
            images, labels, enabled, mixers=mixers, normalize=self.normalize,
            l3=(lambda imgs, norm: self.l3(features, imgs, norm)) if sp.pixel else None,
            float_out=sp.output_dtype == "float32")
        return x if labels is None else (x, y)


def apply_on_device(features: Mapping[str, tf.Tensor], labels: Any = None, *,
                    spec: DeviceSpec | Mapping[str, Any]) -> Any:
    """One-shot `DeviceStage(spec)(features, labels)`."""
    return DeviceStage(spec)(features, labels)


@tf.keras.utils.register_keras_serializable(package="tfpipe")
class OnDevice(tf.keras.layers.Layer):
    """Keras layer around `DeviceStage`: `layer(features)` -> images, or
    `layer(features, labels)` -> (images, labels) when mixup/cutmix mix them.

    Not trainable, no weights, computes in float32 whatever the model's dtype
    policy (the model casts its input itself). It belongs to the TRAIN step
    (`tfpipe.train.fit` and `tfpipe.train.device_model` put it there), not into
    the model that is exported: serving runs the eval preprocessing only.
    """

    def __init__(self, spec: DeviceSpec | Mapping[str, Any], **kwargs: Any) -> None:
        kwargs.setdefault("trainable", False)
        kwargs.setdefault("autocast", False)
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.stage = DeviceStage(spec)
        self.built = True

    @property
    def spec(self) -> DeviceSpec:
        return self.stage.spec

    def call(self, features: Mapping[str, tf.Tensor], labels: Any = None) -> Any:
        return self.stage(features, labels)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["spec"] = self.stage.spec.to_dict()
        return config
