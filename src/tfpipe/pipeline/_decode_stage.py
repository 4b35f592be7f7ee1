"""The decode stage of classification: per sample, L1 + L2 in uint8.

Train: the header is read, the planned crop draws (`_plan.PlanStage`) become a
window for that size, only the window is decoded (DCT-scaled towards the
output) and resized, + the planned flip; for a JPEG all of that is one native
kernel when built (`fused_l1`, window_decode.cc, the same bytes as the composed
ops). Without a random-resized-crop first, the whole image is decoded and
resized to `image_size` before the L2 ops. Eval (`eval_image`): the centre-crop
window, the one definition the eval pipeline and the serving graph both trace.
"""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from tfpipe import augment, native, seeds
from tfpipe.errors import ConfigError
from tfpipe.pipeline._decode import decode_full, decode_window, resize_uint8
from tfpipe.augment.geometry import sample_flip, sample_rot90
from tfpipe.pipeline._geometry_ops import GEOMETRY, apply_one
from tfpipe.pipeline._plan import affine_kwargs, fast_crop, fast_flip, pair
from tfpipe.pipeline._settings import Op, Settings


def apply_geometry_op(op: Op, image: tf.Tensor, seed: tf.Tensor,
                      size: tuple[int, int]) -> tf.Tensor:
    """One L2 op on one uint8 image via `tfpipe.augment` (unfused reference path):
    the op's entry in the geometric-op registry (`_geometry_ops.GEOMETRY`)."""
    out = apply_one(op, image, seed, size)
    if out is None:
        raise ConfigError(f"augment.geometry.{op.name}: unknown op; allowed: "
                          + ", ".join(GEOMETRY))
    return out


def eval_image(s: Settings, encoded: tf.Tensor, crop_in_decoder: bool = True) -> tf.Tensor:
    """Eval/serving L1 of one encoded image: centre-crop window (decoded alone for
    JPEG), bilinear resize, uint8 [H, W, channels]. The one definition that the eval
    pipeline and the exported serving graph (`pipeline.serving`) both trace. With
    `data.dct_scaling` the window is decoded at the largest DCT reduction that
    keeps it >= the output (`_decode.dct_ratio`)."""
    size, frac = s.image_size, s.eval_crop_fraction
    crop, _, _ = decode_window(
        encoded, s.channels, lambda h, w: augment.center_crop_window(h, w, size, frac),
        crop_in_decoder, target=size if s.dct_scaling else None)
    return resize_uint8(crop, size)


Row = dict[str, tf.Tensor]  # one sample's plan (`PlanStage.plan`, one row)


class DecodeStage:
    """Per-sample L1 + L2 of a classification pipeline, from the sample's plan row."""

    def __init__(self, s: Settings, geometry: Sequence[Op], fused_l1: bool) -> None:
        self.s, self.geometry = s, list(geometry)
        self.fast_crop, self.fast_flip = fast_crop(self.geometry), fast_flip(self.geometry)
        # decode + crop + resize + flip of a JPEG as one native kernel (window_decode.cc)
        self.fused_l1 = self.fast_crop and fused_l1
        # the output size a JPEG window is DCT-scaled towards (None: full-size decode)
        self.dct_target = s.image_size if s.dct_scaling else None

    def eval_image(self, encoded: tf.Tensor) -> tf.Tensor:
        return eval_image(self.s, encoded)

    def crop_window(self, row: Row) -> Callable[..., tuple[tf.Tensor, ...]]:
        """(h, w) -> the planned random-resized-crop window for an image of that size."""
        ratio = pair(self.geometry[0], "ratio", augment.CROP_RATIO)

        def window(h: tf.Tensor, w: tf.Tensor) -> tuple[tf.Tensor, ...]:
            win = augment.crop_window_from_draws(row["_crop"], h, w, ratio)
            if "_crop_on" in row:  # not applied: the whole image, resized
                full = (tf.constant(0), tf.constant(0), tf.cast(h, tf.int32),
                        tf.cast(w, tf.int32))
                win = tuple(tf.where(row["_crop_on"], a, b) for a, b in zip(win, full))
            return win
        return window

    def train_image(self, encoded: tf.Tensor, row: Row) -> tf.Tensor:
        size, ops = self.s.image_size, self.geometry
        start = 0
        if self.fused_l1:
            # one native kernel for a JPEG (header, window, decode, resize, flip),
            # the same bytes as the composed ops below (tests/native)
            from tfpipe.native.jpeg import decode_crop_resize

            flip = row["_flip"] if self.fast_flip else False
            crop_on = row.get("_crop_on", True)
            ratio = pair(ops[0], "ratio", augment.CROP_RATIO)
            image = tf.cond(
                tf.io.is_jpeg(encoded),
                lambda: decode_crop_resize(encoded, row["_crop"], crop_on, flip, size, ratio,
                                           self.s.channels, self.s.dct_scaling),
                lambda: self.composed_crop(encoded, row)[0])
            start = 2 if self.fast_flip else 1
        elif self.fast_crop:
            image, start = self.composed_crop(encoded, row)
        else:
            # Resized to image_size FIRST, so the L2 ops run on image_size pixels and
            # their pixel parameters (padding, elastic alpha/sigma) are output pixels:
            # the same work whatever the stored size (an affine/elastic at a 12 MP
            # source then a resize cost ~3x more on the demo images). Sources already
            # at image_size are unchanged (same-size bilinear is the identity).
            image = resize_uint8(self.whole_image(encoded), size)
        fused = -1  # a flip done together with the rot90 before it
        for i in range(start, len(ops)):
            if f"_affine{i}" in row:  # the planned matrix: random_affine's warp
                image = self.planned_affine(ops[i], image, row, i)
                continue
            if i == fused:
                continue
            if (ops[i].name == "rot90" and i + 1 < len(ops) and ops[i + 1].name == "flip"
                    and image.shape[0] == image.shape[1] and image.shape[0] is not None):
                # rot90 then flip, from their own draws: the same pixels in <= 2 passes
                flip = ops[i + 1]
                k = sample_rot90(seeds.fold(row["_base"], i), ops[i].p)
                fx, fy = sample_flip(seeds.fold(row["_base"], i + 1),
                                     bool(flip.params.get("horizontal", True)),
                                     bool(flip.params.get("vertical", False)), flip.p)
                image, fused = augment.rot90_flip(image, k, fx, fy), i + 1
                continue
            image = apply_geometry_op(ops[i], image, seeds.fold(row["_base"], i), size)
        if image.shape[0] != size[0] or image.shape[1] != size[1]:
            image = resize_uint8(image, size)  # same-size bilinear is the identity
        return image

    def whole_image(self, encoded: tf.Tensor) -> tf.Tensor:
        """The whole image, decoded (a JPEG, with `data.dct_scaling`, at the largest DCT
        reduction that keeps it >= image_size on both sides, as the eval path's window:
        a 460x390 photo for a 32x32 output is decoded at 1/8)."""
        if self.dct_target is None:
            return decode_full(encoded, self.s.channels)
        whole = lambda h, w: (tf.constant(0, tf.int32), tf.constant(0, tf.int32),  # noqa: E731
                              tf.cast(h, tf.int32), tf.cast(w, tf.int32))
        return decode_window(encoded, self.s.channels, whole, target=self.dct_target)[0]

    def planned_affine(self, op: Op, image: tf.Tensor, row: Row, i: int) -> tf.Tensor:
        """`apply_geometry_op(affine)` with the matrix (and coin) the plan drew."""
        kw = affine_kwargs(op)
        fn = lambda: augment.affine(  # noqa: E731
            image, row[f"_affine{i}"], None, str(kw.get("interpolation", "bilinear")),
            str(kw.get("fill_mode", "constant")), float(kw.get("fill_value", 0.0)))
        if f"_affine{i}_on" not in row:
            return fn()
        out = tf.cond(row[f"_affine{i}_on"], fn, lambda: image)
        return tf.ensure_shape(out, [None, None, image.shape[-1]])

    def composed_crop(self, encoded: tf.Tensor, row: Row) -> tuple[tf.Tensor, int]:
        """Window decode + resize (+ the planned flip): (image, next geometry op)."""
        size = self.s.image_size
        crop, _, _ = decode_window(encoded, self.s.channels, self.crop_window(row),
                                   target=self.dct_target)
        if not self.fast_flip:
            return resize_uint8(crop, size), 1
        if native.available():  # the flip done by the native resize itself
            return native.resize_bilinear_u8(crop, size, row["_flip"]), 2
        image = resize_uint8(crop, size)  # random_flip's own branch, with the planned coin
        return tf.cond(row["_flip"], lambda: tf.reverse(image, [1]), lambda: image), 2

    def image(self, encoded: tf.Tensor, row: Row | None, augmenting: bool) -> tf.Tensor:
        """The sample's uint8 [H, W, C]: the train rendering, the eval one, or (with
        enable_rate < 1) the one its planned `_enabled` decision picks."""
        if augmenting and row is not None:
            if self.s.enable_rate >= 1.0:
                image = self.train_image(encoded, row)
            else:
                image = tf.cond(row["_enabled"], lambda: self.train_image(encoded, row),
                                lambda: self.eval_image(encoded))
        else:
            image = self.eval_image(encoded)
        h, w = self.s.image_size
        return tf.ensure_shape(image, [h, w, self.s.channels])

    def decode_only(self, encoded: tf.Tensor, row: Row | None) -> tf.Tensor:
        """L1 alone (stage report): decode (the planned window when training)."""
        if self.fast_crop and row is not None:
            crop, _, _ = decode_window(encoded, self.s.channels, self.crop_window(row),
                                       target=self.dct_target)
            return crop
        return decode_full(encoded, self.s.channels)
