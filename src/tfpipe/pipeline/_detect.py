"""Detection: boxes follow the geometry exactly (issue #4).

`Detect` composes the shared stages with detection's own geometry:
- seeds: `_plan.SampleSeeds`, drawn per sample (the geometry needs the decoded
  size first, so there is no per-block plan: `plan` is None);
- per sample: full decode (no fused crop: the window must also move the
  boxes), `_detect_geometry.BoxGeometry` (every L2 op as one matrix, one
  resample, the boxes through the same matrix), and the L3 inputs of
  `_pixel_stage.PixelStage.fields`, carried through `batch()`;
- per batch (train): mosaic on the uint8 batch (one resample per output
  pixel), L3 on the result (`PixelStage.apply`), detection mixup, normalize
  (fused into L3's pass when no mixup follows), gated per sample
  (`augment.on_device.gated`) as classification is.

Elements: image [H,W,C], boxes [max_boxes,4] normalized yxyx, classes
[max_boxes] int64 (-1 = padding), num_boxes int32; detection mixup adds
box_weights [max_boxes]; `data.instance_masks` adds instance_masks uint8
[max_boxes, Sh, Sw] (`_instances`), `data.keypoints` adds keypoints [max_boxes,
K, 3] (`_keypoints`): both follow the boxes' keep, order and cut. `as_supervised`
gives (image, {boxes, classes, num_boxes[, box_weights][, instance_masks][,
keypoints]}).
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from tfpipe.errors import ConfigError
from tfpipe.pipeline._batch_stage import aug
from tfpipe.pipeline._decode import decode_full, resize_uint8
from tfpipe.pipeline._detect_geometry import (  # noqa: F401 - re-exported
    FILL_MODES, INTERPOLATIONS, BoxGeometry, op_matrix, resample_settings)
from tfpipe.pipeline._host_batch import HostBatchStage
from tfpipe.pipeline._instances import KEY as INSTANCES, InstanceMasks
from tfpipe.pipeline._keypoints import batch_keypoints, keypoint_spec, sample_keypoints
from tfpipe.pipeline._pixel_stage import PixelStage, check_pixel_stage
from tfpipe.pipeline._plan import SampleSeeds
from tfpipe.pipeline._settings import Settings
from tfpipe.pipeline._source import IMAGE_KEY
from tfpipe.pipeline._tasks import TASKS
from tfpipe.pipeline.fast import normalizer

Batch = dict[str, tf.Tensor]


class Detect(HostBatchStage):
    """Per-sample and per-batch functions for one detection pipeline (a
    `_tasks.Builder`, the surface `_build._assemble` drives)."""

    # drawn per sample: the geometry needs the decoded size first; whole images are
    # decoded (a window would cut boxes) and L3 runs on the host (`check_pixel_stage`)
    plan = None

    def __init__(self, s: Settings, epoch_seed: tf.Tensor, worker: int, workers: int,
                 parse: Callable[..., dict[str, tf.Tensor]], train: bool) -> None:
        self.s, self.es, self.wi, self.wc, self.parse, self.train = (
            s, epoch_seed, worker, workers, parse, train)
        self.geometry = s.active("geometry") if train else []
        self.pixel = s.active("pixel") if train else []
        self.batch_ops = s.active("batch") if train else []
        for op in self.batch_ops:
            allowed = TASKS["detection"].batch_ops
            if op.name not in allowed:
                raise ConfigError(f"augment.batch.{op.name}: not a detection op; allowed: "
                                  f"{', '.join(allowed)} (detection mixup keeps both box sets)")
        self.augmenting = bool(self.geometry or self.pixel or self.batch_ops)
        self.seeds = SampleSeeds(epoch_seed, worker, workers, s.batch_size)
        self.l3_stage = PixelStage(self.pixel, s.mean, s.std, s.output_dtype)
        check_pixel_stage(s)
        self.box_geometry = BoxGeometry(s, self.geometry)
        self.normalize = normalizer(s.mean, s.std)
        # data.instance_masks (None: off, the elements as before)
        self.instances = InstanceMasks(s) if s.instance_masks else None
        self.keypoints = keypoint_spec(s)  # None: data.keypoints off

    # ------------------------------------------------------------------ per sample
    def eval_image(self, encoded: tf.Tensor) -> tf.Tensor:
        """Detection's eval rendering: the whole image resized (no box is cut)."""
        return resize_uint8(decode_full(encoded, self.s.channels), self.s.image_size)

    def decode_only(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                    serialized: tf.Tensor) -> tf.Tensor:
        return decode_full(self.parse(serialized)[IMAGE_KEY], self.s.channels)

    def process(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                serialized: tf.Tensor) -> Batch:
        feats = self.parse(serialized)
        image = decode_full(feats[IMAGE_KEY], self.s.channels)
        gidx, gbatch = self.seeds.indices(local)
        out: Batch = {"_shard": shard, "_record": rec, "_index": gidx}
        geo = self.box_geometry
        if self.augmenting:
            sseed = self.seeds.op_seeds(gidx)
            enabled = self.seeds.enabled(gbatch, self.s.enable_rate)
            if self.s.enable_rate >= 1.0:
                image, m, hw = geo.image(image, sseed)
            else:
                image, m, hw = tf.cond(enabled, lambda: geo.image(image, sseed),
                                       lambda: geo.image(image, None))
            out["_enabled"] = enabled
            out.update(self.l3_stage.fields(sseed))
        else:
            image, m, hw = geo.image(image, None)
        if self.instances is None and self.keypoints is None:
            out["boxes"], out["classes"], out["num_boxes"] = geo.boxes(feats, m, hw)
        else:  # the per-object targets of the objects the boxes keep, in their order
            boxes, classes, keep = geo.objects(feats, m, hw)
            out["boxes"], out["classes"], out["num_boxes"] = geo.pad(boxes, classes, keep)
            if self.instances is not None:
                out[INSTANCES] = self.instances.follow(feats, m, hw, boxes, keep)
            if self.keypoints is not None:
                out["keypoints"] = sample_keypoints(feats, self.keypoints, m, hw,
                                                    self.s.image_size, keep, self.s.max_boxes)
        out["image"] = image
        return out

    def sentinel(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                 serialized: tf.Tensor) -> Batch:
        n = self.s.max_boxes
        targets = {
            "boxes": tf.zeros([n, 4]), "classes": tf.fill([n], tf.constant(-1, tf.int64)),
            "num_boxes": tf.constant(0, tf.int32)}
        if self.instances is not None:
            targets[INSTANCES] = self.instances.empty()
        if self.keypoints is not None:
            targets["keypoints"] = tf.zeros([n, self.keypoints.k, 3])
        return self.failed_sample(shard, rec, targets)

    # ------------------------------------------------------------------ per batch
    def compose(self, batch: Batch, global_batch: tf.Tensor, num_classes: int | None,
                keep_index: bool) -> Batch:
        s = self.s
        float_out = s.output_dtype == "float32"
        b, c, n = batch["boxes"], batch["classes"], batch["num_boxes"]
        weights = tf.cast(tf.range(s.max_boxes)[None, :] < n[:, None], tf.float32)
        if s.label_offset:  # data.label_offset: the real boxes' classes (padding stays)
            c = tf.where(weights > 0, c - tf.constant(s.label_offset, c.dtype), c)
        mixup = any(op.name == "mixup" for op in self.batch_ops)
        # with nothing after L3 (no mixup) its fused pass also normalizes: one float32
        # pass over the batch less; same bits (both end in color.normalize's formula;
        # the detection preset's batches hash the same with and without this)
        fuse_norm = float_out and not mixup and self.l3_stage.fused is not None

        # the per-object targets carried beside the boxes, in a fixed order
        extra_keys = tuple(k for k, on in ((INSTANCES, self.instances is not None),
                                           ("keypoints", self.keypoints is not None)) if on)

        def apply(op: Any, seed: tf.Tensor, kw: dict[str, Any], x: tf.Tensor,
                  t: tuple[tf.Tensor, ...]) -> tuple[tf.Tensor, tuple[tf.Tensor, ...]]:
            b, c, n, weights = t[:4]
            # the per-object targets, each from the op's own draws on the boxes before it
            extra = tuple(self._batch_target(key, op, seed, kw, x, v, b, n)
                          for key, v in zip(extra_keys, t[4:]))
            if op.name == "mosaic":
                x, b, c, n = aug("mosaic")(x, b, c, n, seed, p=op.p, **kw)
                weights = tf.cast(tf.range(s.max_boxes)[None, :] < n[:, None], tf.float32)
                return x, (b, c, n, weights, *extra)
            x, b, c, n, weights = aug("detection_mixup")(x, b, c, n, seed, p=op.p, **kw)
            return x, (b, c, n, weights, *extra)

        targets = (b, c, n, weights)
        targets += tuple(batch[k] for k in extra_keys)
        x, targets = self.augment_batch(batch, global_batch, targets, apply, fuse_norm)
        b, c, n, weights = targets[:4]
        out = {"image": x, "boxes": b, "classes": c, "num_boxes": n,
               **dict(zip(extra_keys, targets[4:]))}
        if mixup:
            out["box_weights"] = weights
        if keep_index:
            out["index"] = batch["_index"]
        return out

    def _batch_target(self, key: str, op: Any, seed: tf.Tensor, kw: dict[str, Any],
                      x: tf.Tensor, value: tf.Tensor, boxes: tf.Tensor, num_boxes: tf.Tensor
                      ) -> tf.Tensor:
        """One per-object target after batch op `op`, given the boxes before it."""
        if key == INSTANCES:
            assert self.instances is not None
            return self.instances.batch_op(op.name, seed, kw, value, boxes, num_boxes, op.p)
        return batch_keypoints(op, seed, kw, x, value, boxes, num_boxes)
