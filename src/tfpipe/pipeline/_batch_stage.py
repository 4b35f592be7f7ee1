"""The batch stage of classification: labels, L3 -> L4 (mixup, cutmix) -> normalize.

L4 op k draws from `op_seed(batch_seed, k)`. Every sample carries its own
`enable_rate` decision (`_enabled`, drawn in the plan from the batch it was
planned in, the one its L2 followed), and the batch follows it per row
(`augment.on_device.augment_batch`, the one definition the device stage runs
too). With `augment.pixel_stage: device` nothing is computed here: the batch
leaves as uint8 with the L3 inputs and the L4 draws (`device_inputs`).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe import augment, seeds
from tfpipe.augment import on_device
from tfpipe.errors import ConfigError
from tfpipe.pipeline._labels import offset_and_check
from tfpipe.pipeline._pixel_stage import Inputs, PixelStage
from tfpipe.pipeline._plan import SampleSeeds
from tfpipe.pipeline._settings import Op, Settings
from tfpipe.pipeline.fast import normalizer

Batch = dict[str, tf.Tensor]


def aug(name: str) -> Any:
    """The public `tfpipe.augment` function `name`, or None."""
    return getattr(augment, name, None)


def alpha(op: Op) -> float:
    """mixup / cutmix's Beta parameter (defaults as the config's)."""
    return float(op.params.get("alpha", 0.2 if op.name == "mixup" else 1.0))


class BatchStage:
    """Per-batch work of a classification pipeline after `batch()`."""

    def __init__(self, s: Settings, sample_seeds: SampleSeeds, pixel: PixelStage,
                 batch_ops: list[Op], device: bool) -> None:
        self.s, self.seeds, self.pixel, self.ops, self.device = (
            s, sample_seeds, pixel, list(batch_ops), device)
        for op in self.ops:
            if op.name not in ("mixup", "cutmix"):
                raise ConfigError(f"augment.batch.{op.name}: not a classification op; "
                                  "allowed: mixup, cutmix (mosaic is detection-only)")
        self.float_out = s.output_dtype == "float32"
        # resolved here, not inside the traced functions (autograph would trace importlib)
        self.to_one_hot = aug("to_one_hot")
        # one native pass over the batch (plain-TF normalize costs ~10x more:
        # docs/performance-history.md); the same bits either way, on every host
        self.normalize = normalizer(s.mean, s.std)
        self.mixers = [aug(op.name) for op in self.ops]
        self.samplers = [aug(f"sample_{op.name}") for op in self.ops]

    def pixel_inputs(self, batch: Batch) -> Inputs:
        """The batch's L3 inputs, drawn row by row from each sample's own seeds."""
        return self.pixel.inputs(self.seeds.op_base(self.seeds.global_index(batch["_local"])))

    def compose(self, batch: Batch, global_batch: tf.Tensor, num_classes: int | None,
                keep_index: bool) -> Batch:
        images = batch["image"]  # uint8 (finished rows with `_written`)
        # data.label_offset, and every label in [0, num_classes) or the iteration
        # fails naming it (pipeline/_labels.py; values unchanged at offset 0)
        labels: tf.Tensor = offset_and_check(
            batch["label"], self.seeds.global_index(batch["_local"]) if "_local" in batch
            else None, num_classes, self.s.label_offset)
        if self.s.one_hot:
            if not num_classes:
                raise ConfigError("data.num_classes: needed for one-hot labels (label_format "
                                  "one_hot, mixup or cutmix) and the manifest has no class names")
            labels = self.to_one_hot(labels, int(num_classes))
        if self.device:
            out = {"image": images, "label": labels,
                   **self.device_inputs(batch, images, global_batch)}
        elif "_written" in batch:  # the block op's write-out ran L3 + normalize (pipeline/_block.py)
            out = {"image": images, "label": labels}
        else:
            x, labels = self.augment(batch, images, labels, global_batch)
            out = {"image": x, "label": labels}
        if keep_index:
            out["index"] = self.seeds.global_index(batch["_local"])
        return out

    def augment(self, batch: Batch, images: tf.Tensor, labels: tf.Tensor,
                global_batch: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """L3 (batched) -> L4 -> normalize, gated per sample by `_enabled`."""
        bseed = self.seeds.batch_seed(global_batch)
        mixers = [lambda x, y, k=k, op=op: self.mixers[k](x, y, seeds.op_seed(bseed, k),
                                                          alpha(op), op.p)
                  for k, op in enumerate(self.ops)]

        def l3(imgs: tf.Tensor, normalize: bool) -> tuple[tf.Tensor, bool]:
            return self.pixel.apply(imgs, self.pixel_inputs(batch), normalize)

        # (a batch with nothing to do carries no `_enabled`: plain, ungated)
        gate = self.s.enable_rate < 1.0 and bool(self.pixel.ops or self.ops)
        # looked up on the module at call time: the device stage's definition, one object
        return on_device.augment_batch(images, labels, batch["_enabled"] if gate else None,
                                       l3=l3 if self.pixel.ops else None, mixers=mixers,
                                       normalize=self.normalize, float_out=self.float_out)

    def device_inputs(self, batch: Batch, images: tf.Tensor, global_batch: tf.Tensor) -> Batch:
        """What `augment` would draw for this batch, as tensors for the device
        stage (`augment.on_device`, its module docstring lists the keys): the
        enable decisions, the L3 inputs, the L4 draws of each mixer's sampler from
        the same op seeds. No pixel is touched."""
        b = tf.shape(images)[0]
        out = {on_device.ENABLED: batch["_enabled"] if "_enabled" in batch
               else tf.ones([b], tf.bool)}
        if self.pixel.ops:
            out.update(self.pixel.device_fields(self.pixel_inputs(batch)))
        bseed = self.seeds.batch_seed(global_batch)
        h, w = self.s.image_size
        for k, op in enumerate(self.ops):
            seed = seeds.op_seed(bseed, k)
            if op.name == "mixup":
                out["mixup_perm"], out["mixup_lambda"] = self.samplers[k](seed, b, alpha(op), op.p)
            else:
                (out["cutmix_perm"], out["cutmix_boxes"],
                 out["cutmix_weight"]) = self.samplers[k](seed, b, h, w, alpha(op), op.p)
        return out
