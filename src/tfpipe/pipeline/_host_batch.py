"""The per-batch surface the per-sample tasks share (detection, segmentation).

Both draw their seeds per sample and run L3 on the host over the uint8 batch
(`_pixel_stage.PixelStage`), so batching, the L3 inputs each sample carried and
the stage report's "pixel" prefix are the same; `compose` is each task's own.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe.pipeline._pixel_stage import KEYS, PixelStage

Batch = dict[str, tf.Tensor]


class HostBatchStage:
    """`batch`, `pixel_inputs`, `pixel_stage` and the sentinel's bookkeeping of a
    builder that carries `s`, `pixel`, `augmenting` and `l3_stage`."""

    s: Any
    pixel: list[Any]
    augmenting: bool
    l3_stage: PixelStage

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
