"""Classification: per-block plan, per-sample L1 + L2 in uint8, batched L3, L4 on the batch.

`Classify` is the composition `_build._assemble` drives, made of four stages:
- `_plan.PlanStage` (`plan`, once per block of samples): the draws that need no
  pixels -- op-seed bases, random-resized-crop numbers, flip coin, enable coin;
- `_decode_stage.DecodeStage` (`process`, per sample): parse, header, window
  decode + resize (+ flip), the remaining L2 ops; the eval rendering;
- `_pixel_stage.PixelStage` (after `batch`): L3 inputs drawn per row, then the
  kernels on the whole batch at once (equal to running the op per sample;
  tested), avoiding per-sample broadcasting, the hotspot PERF-NOTES found;
- `_batch_stage.BatchStage` (`compose`): labels, L4, normalize, gated per row.

Seeds: docs/seeds.md and `_plan`. Whether a sample is augmented at all
(`augment.enable_rate`) is drawn in the plan; the sample carries that decision
(`_enabled`) and every stage follows it per sample, so a batch formed after a
skipped record or under `deterministic: false` never mixes the decisions up.
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from tfpipe.augment import on_device
from tfpipe.augment.on_device import gated, select_rows  # noqa: F401 - re-exported
from tfpipe.errors import ConfigError
from tfpipe.pipeline._batch_stage import BatchStage, aug  # noqa: F401 - re-exported
from tfpipe.pipeline._decode_stage import DecodeStage, apply_geometry_op, eval_image  # noqa: F401
from tfpipe.pipeline._pixel_stage import PixelStage, check_pixel_stage, pixel_fn  # noqa: F401
from tfpipe.pipeline._plan import (  # noqa: F401 - re-exported
    COIN_TAG, ENABLE_OP, PIXEL_BASE, PlanStage, SampleSeeds, batch_enabled, coin, pair)
from tfpipe.pipeline._settings import Settings
from tfpipe.pipeline._source import IMAGE_KEY, LABEL_KEY
from tfpipe.pipeline._tasks import device_refusal

_pair = pair  # the old private name


def _has_fused_l1() -> bool:
    from tfpipe.native import jpeg as native_jpeg

    return native_jpeg.has_decode_crop_resize()


class Classify:
    """Per-block, per-sample and per-batch functions for one classification pipeline."""

    def __init__(self, s: Settings, epoch_seed: tf.Tensor, worker: int, workers: int,
                 parse: Callable[..., dict[str, tf.Tensor]], train: bool) -> None:
        self.s, self.es, self.wi, self.wc, self.parse, self.train = (
            s, epoch_seed, worker, workers, parse, train)
        self.geometry = s.active("geometry") if train else []
        self.pixel = s.active("pixel") if train else []
        self.batch_ops = s.active("batch") if train else []
        self.augmenting = bool(self.geometry or self.pixel or self.batch_ops)
        self.seeds = SampleSeeds(epoch_seed, worker, workers, s.batch_size)
        self.plan_stage = PlanStage(self.seeds, self.geometry, s.enable_rate, s.image_size)
        # (asked only when the window is planned: the question loads the library)
        self.decode_stage = DecodeStage(s, self.geometry,
                                        self.plan_stage.fast_crop and _has_fused_l1())
        self.l3_stage = PixelStage(self.pixel, s.mean, s.std, s.output_dtype)
        check_pixel_stage(s)
        # device mode: the train batches leave uint8 + the draws (`device_inputs`);
        # `augment.OnDevice` applies L3, L4 and normalize in the train step
        self.device = train and s.pixel_stage == "device"
        self.batch_stage = BatchStage(s, self.seeds, self.l3_stage, self.batch_ops, self.device)
        self.fast_crop, self.fast_flip = self.plan_stage.fast_crop, self.plan_stage.fast_flip
        self.fused_l1, self.dct_target = self.decode_stage.fused_l1, self.decode_stage.dct_target
        self.fused = self.l3_stage.fused
        self.planned_affine = self.plan_stage.planned_affine

    # ------------------------------------------------------------------ seeds
    def op_base(self, gidx: tf.Tensor) -> tf.Tensor:
        return self.seeds.op_base(gidx)

    def op_seeds(self, gidx: tf.Tensor) -> Callable[[int], tf.Tensor]:
        return self.seeds.op_seeds(gidx)

    def _indices(self, local: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return self.seeds.indices(local)

    # ------------------------------------------------------------------ per block, per sample
    def plan(self, local: tf.Tensor) -> dict[str, tf.Tensor]:
        """`PlanStage.plan`: the image-independent draws of a block (local indices [n])."""
        return self.plan_stage.plan(local)

    def eval_image(self, encoded: tf.Tensor) -> tf.Tensor:
        return self.decode_stage.eval_image(encoded)

    def decode_only(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                    serialized: tf.Tensor, row: dict[str, tf.Tensor] | None = None) -> tf.Tensor:
        """L1 alone (stage report): parse + decode (fused window when training)."""
        feats = self.parse(serialized, (IMAGE_KEY,))
        return self.decode_stage.decode_only(feats[IMAGE_KEY], row)

    def process(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                serialized: tf.Tensor, row: dict[str, tf.Tensor] | None = None
                ) -> dict[str, tf.Tensor]:
        # only the two features used: a converted dataset carries nine, and every
        # parsed string feature is a copy
        feats = self.parse(serialized, (IMAGE_KEY, LABEL_KEY))
        label = tf.cast(tf.reshape(feats[LABEL_KEY], []), tf.int64)
        out: dict[str, tf.Tensor] = {"_local": local, "label": label}
        if self.augmenting and row is not None and self.s.enable_rate < 1.0:
            out["_enabled"] = row["_enabled"]
        out["image"] = self.decode_stage.image(feats[IMAGE_KEY], row, self.augmenting)
        return out

    def sentinel(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                 serialized: tf.Tensor, row: dict[str, tf.Tensor] | None = None
                 ) -> dict[str, tf.Tensor]:
        h, w = self.s.image_size
        out = {"_local": local, "label": tf.constant(-1, tf.int64),
               "image": tf.zeros([h, w, self.s.channels], tf.uint8)}
        if self.augmenting and self.s.enable_rate < 1.0:
            out["_enabled"] = tf.constant(False)
        return out

    # ------------------------------------------------------------------ per batch
    def batch(self, ds: tf.data.Dataset, drop_remainder: bool) -> tf.data.Dataset:
        return ds.batch(self.s.batch_size, drop_remainder=drop_remainder)

    def pixel_fields(self, sseed: Callable[[int], tf.Tensor] | None) -> dict[str, tf.Tensor]:
        return self.l3_stage.fields(sseed)

    def pixel_inputs(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return self.batch_stage.pixel_inputs(batch)

    def pixel_stage(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Batch + L3 alone (the stage report's "pixel" prefix): what `compose`
        computes before L4 and normalize, for every row."""
        out = {k: v for k, v in batch.items() if not k.startswith("_")}
        if self.pixel and not self.device:  # device mode: no L3 on the host
            out["image"], _ = self.l3_stage.apply(batch["image"], self.pixel_inputs(batch),
                                                  normalize=False)
        return out

    def compose(self, batch: dict[str, tf.Tensor], global_batch: tf.Tensor,
                num_classes: int | None, keep_index: bool) -> dict[str, tf.Tensor]:
        return self.batch_stage.compose(batch, global_batch, num_classes, keep_index)


def device_spec(config: Any) -> on_device.DeviceSpec:
    """The `augment.DeviceSpec` of a config: its train L3 ops, L4 ops, normalize,
    output dtype and enable rate, for the device stage of `pixel_stage: device`."""
    from tfpipe.pipeline._settings import settings

    s = settings(config)
    refused = device_refusal(s.task)
    if refused:
        raise ConfigError(refused)
    return on_device.DeviceSpec(pixel=tuple(s.active("pixel")), batch=tuple(s.active("batch")),
                                mean=s.mean, std=s.std, output_dtype=s.output_dtype,
                                enable_rate=s.enable_rate)


def device_stage(config: Any, **layer_kwargs: Any) -> on_device.OnDevice:
    """`augment.OnDevice` for `config`: apply it in the train step to the batches of
    `build_pipeline(config)` with `augment.pixel_stage: device` (docs/training.md)."""
    return on_device.OnDevice(device_spec(config), **layer_kwargs)
