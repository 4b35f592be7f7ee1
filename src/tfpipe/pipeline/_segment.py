"""Semantic segmentation: the mask follows the image through one matrix (issue #23).

`Segment` drives the same surface as `_detect.Detect` (`_build._assemble`):
- seeds: `_plan.SampleSeeds`, drawn per sample (`plan` is None: the matrices need
  the decoded size);
- per sample: the image decoded whole, the mask (`MASK_KEY`, one single-channel
  PNG) decoded and checked to have the image's size (else the record is bad:
  skipped and counted, or raised, under `pipeline.on_error`); train: every L2
  op's matrix (`op_matrix`, the detection path's draws) composed with the final
  resize, the image resampled ONCE (`resample_settings`: the ops' interpolation
  and fill), the mask ONCE through the SAME matrix, nearest, filled with
  `data.ignore_label` (`augment.warp_mask`; a reflect / nearest fill mode
  mirrors the mask as it mirrors the image); eval: the letterbox
  (`augment.letterbox_matrix`: the whole image scaled to fit, centred, the
  image padded with 0, the mask with ignore_label);
- per batch (train): mosaic on the uint8 batch with its masks
  (`augment.mosaic` + `augment.mosaic_masks`, one seed), L3 on the image only,
  cutmix pasting the mask's box with the image's (`augment.cutmix_with_masks`,
  classification's cutmix draws), normalize; gated per sample as the others.

Elements: image [B, H, W, C] as the other image tasks, mask int32 [B, H, W, 1];
`as_supervised` gives (image, mask).
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from tfpipe import augment
from tfpipe.errors import ConfigError
from tfpipe.pipeline._decode import decode_full
from tfpipe.pipeline._detect_geometry import op_matrix, resample_settings
from tfpipe.pipeline._host_batch import HostBatchStage
from tfpipe.pipeline._pixel_stage import PixelStage, check_pixel_stage
from tfpipe.pipeline._plan import SampleSeeds
from tfpipe.pipeline._settings import Settings
from tfpipe.pipeline._tasks import TASKS
from tfpipe.pipeline._keys import IMAGE_KEY, MASK_KEY
from tfpipe.pipeline.fast import normalizer

Batch = dict[str, tf.Tensor]


def decode_mask(encoded: tf.Tensor, image: tf.Tensor) -> tf.Tensor:
    """The record's class mask, uint8 [h, w, 1], asserted to have `image`'s height and
    width (a mismatch fails the record, named by the bad-record policy)."""
    mask = tf.io.decode_png(encoded, channels=1, dtype=tf.uint8)
    mh, ih = tf.shape(mask)[:2], tf.shape(image)[:2]
    same = tf.debugging.Assert(tf.reduce_all(tf.equal(mh, ih)), [
        "tfpipe: the mask (image/segmentation/class/encoded) is", mh,
        "(height, width) but its image is", ih, "; masks must have their image's size"])
    with tf.control_dependencies([same]):
        return tf.identity(mask)


def eval_letterbox(s: Settings, encoded: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The eval rendering of one encoded image, as the eval pipeline and the serving
    signature (`pipeline.serving`) both run it: decoded whole, letterboxed into
    `data.image_size` (`augment.letterbox_image`, padded with 0); and its decoded
    (height, width), int32 [2]."""
    decoded = decode_full(encoded, s.channels)
    size = tf.shape(decoded, out_type=tf.int32)[:2]
    return augment.letterbox_image(decoded, s.image_size, 0.0), size


class Segment(HostBatchStage):
    """Per-sample and per-batch functions for one segmentation pipeline."""

    plan = None  # drawn per sample: the matrices need the decoded size first

    def __init__(self, s: Settings, epoch_seed: tf.Tensor, worker: int, workers: int,
                 parse: Callable[..., dict[str, tf.Tensor]], train: bool) -> None:
        self.s, self.es, self.wi, self.wc, self.parse, self.train = (
            s, epoch_seed, worker, workers, parse, train)
        self.geometry = s.active("geometry") if train else []
        self.pixel = s.active("pixel") if train else []
        self.batch_ops = s.active("batch") if train else []
        task = TASKS["segmentation"]
        for op in self.batch_ops:  # (config validation refuses these first)
            why = task.rules.refuses.get(f"batch.{op.name}")
            if why:
                raise ConfigError(f"augment.batch.{op.name}: not allowed with data.task "
                                  f"'segmentation': {why}")
            if op.name not in task.batch_ops:
                raise ConfigError(f"augment.batch.{op.name}: not a segmentation op; allowed: "
                                  + ", ".join(task.batch_ops))
        self.augmenting = bool(self.geometry or self.pixel or self.batch_ops)
        self.seeds = SampleSeeds(epoch_seed, worker, workers, s.batch_size)
        self.l3_stage = PixelStage(self.pixel, s.mean, s.std, s.output_dtype)
        check_pixel_stage(s)
        # the one resample's kernel and border (train; eval pads with 0 / ignore_label)
        self.interpolation, self.fill_mode, self.fill_value = resample_settings(self.geometry)
        self.normalize = normalizer(s.mean, s.std)

    # ------------------------------------------------------------------ per sample
    def _decode(self, serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        feats = self.parse(serialized, (IMAGE_KEY, MASK_KEY))
        image = decode_full(feats[IMAGE_KEY], self.s.channels)
        return image, decode_mask(feats[MASK_KEY], image)

    def matrix(self, hw: tuple[tf.Tensor, tf.Tensor],
               sseed: Callable[[int], tf.Tensor] | None) -> tf.Tensor:
        """The train matrix of a decoded image of size `hw`: every L2 op's matrix, then
        the resize to image_size (`sseed=None`: the resize alone)."""
        size = self.s.image_size
        mats, cur = [], hw
        for i, op in enumerate(self.geometry if sseed is not None else []):
            m, cur = op_matrix(op, sseed(i), cur, size)
            mats.append(m)
        mats.append(augment.resize_matrix(cur, size))
        return augment.compose(*mats)

    def render(self, image: tf.Tensor, mask: tf.Tensor, m: tf.Tensor
               ) -> tuple[tf.Tensor, tf.Tensor]:
        """Image and mask through the one matrix `m` (train)."""
        size = self.s.image_size
        out = augment.affine(image, m, size, self.interpolation, self.fill_mode,
                             self.fill_value)
        out_mask = augment.warp_mask(mask, m, size, self.s.ignore_label, self.fill_mode)
        return (tf.ensure_shape(out, [size[0], size[1], self.s.channels]),
                tf.ensure_shape(out_mask, [size[0], size[1], 1]))

    def letterbox(self, image: tf.Tensor, mask: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """The eval rendering: `augment.letterbox_image` (pad 0) and the mask through
        `augment.letterbox_matrix`, nearest (pad ignore_label)."""
        size = self.s.image_size
        m = augment.letterbox_matrix(tf.shape(image)[:2], size)
        out_mask = augment.warp_mask(mask, m, size, self.s.ignore_label)
        return (augment.letterbox_image(image, size, 0.0),
                tf.ensure_shape(out_mask, [size[0], size[1], 1]))

    def eval_image(self, encoded: tf.Tensor) -> tf.Tensor:
        """The eval rendering of an encoded image (the letterbox)."""
        return eval_letterbox(self.s, encoded)[0]

    def decode_only(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                    serialized: tf.Tensor) -> tf.Tensor:
        return self._decode(serialized)[0]

    def process(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                serialized: tf.Tensor) -> Batch:
        image, mask = self._decode(serialized)
        gidx, gbatch = self.seeds.indices(local)
        out: Batch = {"_shard": shard, "_record": rec, "_index": gidx}
        if not self.train:
            out["image"], out["mask"] = self.letterbox(image, mask)
            return out
        hw = (tf.shape(image)[0], tf.shape(image)[1])
        if self.augmenting:
            sseed = self.seeds.op_seeds(gidx)
            enabled = self.seeds.enabled(gbatch, self.s.enable_rate)
            if self.s.enable_rate >= 1.0:
                m = self.matrix(hw, sseed)
            else:  # only the matrix differs: one resample either way
                m = tf.cond(enabled, lambda: self.matrix(hw, sseed), lambda: self.matrix(hw, None))
            out["_enabled"] = enabled
            out.update(self.l3_stage.fields(sseed))
        else:
            m = self.matrix(hw, None)
        out["image"], out["mask"] = self.render(image, mask, m)
        return out

    def sentinel(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                 serialized: tf.Tensor) -> Batch:
        h, w = self.s.image_size
        return self.failed_sample(shard, rec, {
            "mask": tf.fill([h, w, 1], tf.constant(self.s.ignore_label, tf.uint8))})

    # ------------------------------------------------------------------ per batch
    def compose(self, batch: Batch, global_batch: tf.Tensor, num_classes: int | None,
                keep_index: bool) -> Batch:
        float_out = self.s.output_dtype == "float32"
        # L3's fused pass also normalizes when it runs: cutmix (a paste) commutes with
        # the per-pixel normalize, so nothing after L3 needs the unnormalized pixels
        fuse_norm = float_out and self.l3_stage.fused is not None

        def apply(op: Any, seed: tf.Tensor, kw: dict[str, Any], x: tf.Tensor,
                  t: tuple[tf.Tensor, ...]) -> tuple[tf.Tensor, tuple[tf.Tensor, ...]]:
            (mk,) = t
            if op.name == "mosaic":
                x, mk = self._mosaic(x, mk, seed, op.p, kw)
            else:
                x, mk = augment.cutmix_with_masks(x, mk, seed, float(kw.get("alpha", 1.0)),
                                                  op.p)
            return x, (mk,)

        x, (mk,) = self.augment_batch(batch, global_batch, (batch["mask"],), apply, fuse_norm)
        out = {"image": x, "mask": tf.cast(mk, tf.int32)}
        if keep_index:
            out["index"] = batch["_index"]
        return out

    def _mosaic(self, x: tf.Tensor, mk: tf.Tensor, seed: tf.Tensor, p: float,
                kw: dict[str, Any]) -> tuple[tf.Tensor, tf.Tensor]:
        """`augment.mosaic` on the images (no boxes) and its masks, one seed."""
        b = tf.shape(x)[0]
        scale = float(kw.get("scale", 0.5))
        center = tuple(kw.get("center_range", (0.25, 0.75)))
        x, _, _, _ = augment.mosaic(x, tf.zeros(tf.stack([b, 1, 4])),
                                    tf.fill(tf.stack([b, 1]), tf.constant(-1, tf.int64)),
                                    tf.zeros([b], tf.int32), seed, p=p, scale=scale,
                                    center_range=center,
                                    fill_value=float(kw.get("fill_value", 0.0)))
        mk = augment.mosaic_masks(mk, seed, p=p, scale=scale, center_range=center,
                                  ignore_label=self.s.ignore_label)
        return x, mk
