"""Instance masks through the detection pipeline (`data.instance_masks`, issue #24).

Output form (docs/instance-masks.md): `instance_masks` uint8 [max_boxes, Sh, Sw] per
sample, each object's mask cropped to its OUTPUT (clipped) box at the configured
size, as Mask R-CNN's mask head takes it: max_boxes * Sh * Sw bytes per sample
(100 x 28 x 28: 78 KB) whatever the image size, where full-size masks would cost
max_boxes * H * W (100 x 640 x 640: 41 MB).

Per sample (`InstanceMasks.follow`): the boxes' own transform and keep
(`BoxGeometry.objects`); only the kept objects' PNGs (at most max_boxes) are
decoded, one at a time (`tf.map_fn`: never all full-size masks at once), each
checked to have its image's size, and sampled ONCE, nearest, through the chain's
matrix composed with its box-crop matrix (`augment.box_crop_coords`); padded with
zeros. A record whose mask count differs from its box count, or with a mask that
does not decode or has another size, fails under `pipeline.on_error` (skipped and
counted, or raised, naming the record). Eval: the same with the resize matrix.
Per batch: `augment.mosaic_instance_masks` / `augment.mixup_instance_masks` with the
batch op's own seed and params (`batch_op`).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe import augment
from tfpipe.pipeline._keys import INSTANCE_MASK_KEY
from tfpipe.pipeline._settings import Settings

KEY = "instance_masks"  # the element / batch key


def _decode(encoded: tf.Tensor, hw: tf.Tensor) -> tf.Tensor:
    """One object's PNG, uint8 [h, w], asserted to have the image's size `hw`."""
    mask = tf.io.decode_png(encoded, channels=1, dtype=tf.uint8)
    mh = tf.shape(mask, out_type=tf.int32)[:2]
    same = tf.debugging.Assert(tf.reduce_all(tf.equal(mh, hw)), [
        "tfpipe: an instance mask (image/object/mask) is", mh,
        "(height, width) but its image is", hw, "; masks must have their image's size"])
    with tf.control_dependencies([same]):
        return tf.identity(mask[..., 0])


class InstanceMasks:
    """Detection's instance-mask target for one pipeline (`Settings.instance_masks`)."""

    def __init__(self, s: Settings) -> None:
        assert s.instance_masks is not None
        self.s, self.size = s, (int(s.instance_masks[0]), int(s.instance_masks[1]))

    def empty(self) -> tf.Tensor:
        """A sentinel's masks: all zero."""
        return tf.zeros([self.s.max_boxes, *self.size], tf.uint8)

    def follow(self, feats: dict[str, tf.Tensor], m: tf.Tensor, hw: tf.Tensor,
               boxes: tf.Tensor, keep: tf.Tensor) -> tf.Tensor:
        """uint8 [max_boxes, Sh, Sw]: the kept objects' masks (in the boxes' order)
        through `m`, cropped to their output boxes. `boxes`, `keep`: the record's
        boxes through `m` and which survive (`BoxGeometry.objects`)."""
        encoded = tf.reshape(feats[INSTANCE_MASK_KEY], [-1])
        counts = tf.stack([tf.size(encoded), tf.shape(boxes)[0]])
        aligned = tf.debugging.Assert(tf.equal(counts[0], counts[1]), [
            "tfpipe: the record has", counts[0], "instance masks (image/object/mask) for",
            counts[1], "boxes; one mask per box, in box order"])
        with tf.control_dependencies([aligned]):
            kept = tf.reshape(tf.where(keep), [-1])[:self.s.max_boxes]
        iy, ix = augment.box_crop_coords(m, tf.gather(boxes, kept), self.s.image_size,
                                         self.size)
        hw32 = tf.cast(hw, tf.int32)

        def one(args: tuple[tf.Tensor, tf.Tensor, tf.Tensor]) -> tf.Tensor:
            enc, y, x = args
            return augment.sample_mask(_decode(enc, hw32), y, x)

        # one full-size mask alive at a time per iteration (parallel_iterations bounds it)
        crops = tf.map_fn(one, (tf.gather(encoded, kept), iy, ix), parallel_iterations=1,
                          fn_output_signature=tf.TensorSpec(self.size, tf.uint8))
        pad = self.s.max_boxes - tf.shape(crops)[0]
        out = tf.pad(crops, [[0, pad], [0, 0], [0, 0]])
        return tf.ensure_shape(out, [self.s.max_boxes, *self.size])

    def batch_op(self, name: str, seed: tf.Tensor, kw: dict[str, Any], masks: tf.Tensor,
                 boxes: tf.Tensor, num_boxes: tf.Tensor, p: float) -> tf.Tensor:
        """The masks after batch op `name` ("mosaic" or "mixup") with the op's seed and
        params, given the batch's boxes and counts BEFORE the op."""
        if name == "mosaic":
            return augment.mosaic_instance_masks(masks, boxes, num_boxes, self.s.image_size,
                                                 seed, p=p, **kw)
        return augment.mixup_instance_masks(masks, num_boxes, seed, p=p)
