"""The per-batch surface the per-sample tasks share (detection, segmentation).

Both draw their seeds per sample and run L3 on the host over the uint8 batch
(`_pixel_stage.PixelStage`), so batching, the L3 inputs each sample carried and
the stage report's "pixel" prefix are the same; `compose` is each task's own.
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from tfpipe import seeds
from tfpipe.augment.on_device import gated
from tfpipe.pipeline._pixel_stage import KEYS, PixelStage
from tfpipe.pipeline._plan import SampleSeeds

Batch = dict[str, tf.Tensor]
Targets = tuple[tf.Tensor, ...]
# one batch op on the batch and the task's targets: (op, seed, params, x, targets)
BatchOp = Callable[[Any, tf.Tensor, dict[str, Any], tf.Tensor, Targets],
                   tuple[tf.Tensor, Targets]]


class HostBatchStage:
    """`batch`, `pixel_inputs`, `pixel_stage`, the batch ops' chain and the sentinel's
    bookkeeping of a builder that carries `s`, `pixel`, `batch_ops`, `augmenting`,
    `seeds`, `l3_stage` and `normalize`."""

    s: Any
    pixel: list[Any]
    batch_ops: list[Any]
    augmenting: bool
    seeds: SampleSeeds
    l3_stage: PixelStage
    normalize: Callable[[tf.Tensor], tf.Tensor]

    def batch(self, ds: tf.data.Dataset, drop_remainder: bool) -> tf.data.Dataset:
        return ds.batch(self.s.batch_size, drop_remainder=drop_remainder)

    def pixel_inputs(self, batch: Batch) -> Batch:
        """The L3 inputs each sample carried (`PixelStage.fields`)."""
        return {k: batch[k] for k in KEYS if k in batch}

    def pixel_stage(self, batch: Batch) -> Batch:
        """Batch + L3 alone (the stage report's "pixel" prefix)."""
        out = {k: v for k, v in batch.items() if not k.startswith("_")}
        if self.pixel:
            out["image"], _ = self.l3_stage.apply(batch["image"], self.pixel_inputs(batch),
                                                  normalize=False)
        return out

    def failed_sample(self, shard: tf.Tensor, rec: tf.Tensor, targets: Batch) -> Batch:
        """A sentinel element: the bookkeeping, a black image, `targets`, and (when
        augmenting) the draws of a sample that is not augmented."""
        h, w = self.s.image_size
        out = {"_shard": shard, "_record": rec, "_index": tf.constant(-1, tf.int64),
               **targets,
               "image": tf.zeros([h, w, self.s.channels], tf.uint8)}
        if self.augmenting:
            out["_enabled"] = tf.constant(False)
            out.update(self.l3_stage.fields(None))
        return out

    def augment_batch(self, batch: Batch, global_batch: tf.Tensor, targets: Targets,
                      apply: BatchOp, fuse_norm: bool) -> tuple[tf.Tensor, Targets]:
        """The train batch's chain: mosaic first, on the uint8 batch (4x fewer bytes
        than float32, one resample per pixel), then L3 (as YOLO's colour jitter), then
        the other batch ops on L3's output, each with its seed index k (its place in
        augment.batch); gated per sample by `_enabled` as classification is; then
        normalize (fused into L3's pass when `fuse_norm`). `apply` runs one batch op
        on the image batch and the task's `targets`."""
        float_out = self.s.output_dtype == "float32"
        x = batch["image"]

        def to_l3(x: tf.Tensor) -> tf.Tensor:
            if self.pixel:
                return self.l3_stage.apply(x, self.pixel_inputs(batch), normalize=fuse_norm)[0]
            return tf.cast(x, tf.float32) * (1.0 / 255.0) if float_out else x

        def augmented(*_: Any) -> tuple[tf.Tensor, Targets]:
            bseed = self.seeds.batch_seed(global_batch)
            y, t = x, targets
            ops = sorted(enumerate(self.batch_ops), key=lambda kop: kop[1].name != "mosaic")
            pixels_done = False
            for k, op in ops:
                kw = {key: (tuple(v) if isinstance(v, list) else v)
                      for key, v in op.params.items()}
                if op.name != "mosaic" and not pixels_done:
                    y, pixels_done = to_l3(y), True
                y, t = apply(op, seeds.op_seed(bseed, k), kw, y, t)
            return (y if pixels_done else to_l3(y)), t

        normalized = False
        if self.pixel or self.batch_ops:
            normalized = fuse_norm and bool(self.pixel)

            def plain() -> tuple[tf.Tensor, Targets]:
                if not float_out:
                    return x, targets
                plain_x = tf.cast(x, tf.float32) * (1.0 / 255.0)
                return (self.normalize(plain_x) if normalized else plain_x), targets

            if self.s.enable_rate >= 1.0:
                x, targets = augmented()
            else:
                x, targets = gated(batch["_enabled"], augmented, plain)
        if float_out and not normalized:
            x = self.normalize(x)
        return x, targets
