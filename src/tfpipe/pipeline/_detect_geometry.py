"""Detection's geometry: every L2 op as a 3x3 matrix, one resample, boxes through it.

Each L2 op contributes only its matrix (drawn by the `tfpipe.augment` samplers'
own draw functions from the same seeds), the matrices are composed with the
final resize to `image_size`, and the image is resampled ONCE
(`tfpipe.augment.affine`) with the ops' own interpolation / fill_mode /
fill_value (`resample_settings`: ops that set the same kind of key must agree,
since one resample has one kernel and one border rule; else ConfigError). Boxes
go through `transform_boxes` with the same matrix, are clipped, filtered (empty
after clipping) and padded to `data.max_boxes` (`pad_boxes`: box 0, class -1).
Eval: plain resize of the whole image (no crop, so no box is cut).
"""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from tfpipe import augment
from tfpipe.errors import ConfigError
from tfpipe.pipeline._decode import resize_uint8
from tfpipe.pipeline._geometry_ops import (GEOMETRY, MATRIX_OPS, follow_boxes, follow_image,
                                           matrix)
from tfpipe.pipeline._settings import Op, Settings
from tfpipe.pipeline._source import BOX_KEYS, BOX_LABEL_KEY

# The ops boxes can follow (they have a matrix) and the params each matrix honours:
# the geometric-op registry (`_geometry_ops.GEOMETRY`) declares both.
_OPS = MATRIX_OPS
_PARAMS: dict[str, frozenset[str]] = {name: GEOMETRY[name].params for name in MATRIX_OPS}
# What `tfpipe.augment.affine` (the one resample) supports.
INTERPOLATIONS = ("nearest", "bilinear", "bicubic")
# (the kernel has wrap too; the config does not offer it, so neither does detection)
FILL_MODES = ("constant", "reflect", "nearest")


def _key(op: Op, param: str) -> str:
    return f"augment.geometry.{op.name}.{param}"


def _agree(ops: list[Op], param: str, allowed: tuple[str, ...], default: str) -> str:
    """The one value the ops carrying `param` agree on (else `default`), checked
    against `allowed`; ConfigError naming every key when two ops disagree."""
    carrying = [op for op in ops if param in op.params]
    for op in carrying:
        if allowed and op.params[param] not in allowed:
            raise ConfigError(f"{_key(op, param)}: {op.params[param]!r} is not supported; "
                              f"allowed: {', '.join(allowed)}")
    values = {op.params[param] for op in carrying}
    if len(values) > 1:
        keys = ", ".join(f"{_key(op, param)} = {op.params[param]!r}" for op in carrying)
        raise ConfigError(
            f"{keys}: disagree. Detection composes the geometry into one matrix and "
            f"resamples the image ONCE, so there is one {param} for the whole chain; set "
            f"these keys to the same value (one of {', '.join(allowed)})")
    return str(values.pop()) if values else default


def resample_settings(ops: list[Op]) -> tuple[str, str, float]:
    """(interpolation, fill_mode, fill_value) of detection's single resample.

    Each op's own key is honoured; ops that set the same kind of key must agree
    (one resample has one kernel and one border rule). interpolation: from affine /
    random_resized_crop / center_crop, default bilinear. fill: from affine
    (fill_mode, fill_value) and pad_and_crop (fill_mode, constant fill 0 unless it
    carries fill_value), default constant 0; fill_value only matters for constant.
    """
    for op in ops:
        if op.name not in _PARAMS:
            raise ConfigError(f"augment.geometry.{op.name}: not supported for detection "
                              "(boxes must follow an affine matrix); allowed: "
                              + ", ".join(_OPS))
        extra = sorted(set(op.params) - _PARAMS[op.name])
        if extra:
            raise ConfigError(f"{_key(op, extra[0])}: not supported for detection; "
                              f"{op.name} takes: {', '.join(sorted(_PARAMS[op.name])) or 'no params'}")
    interpolation = _agree([op for op in ops if GEOMETRY[op.name].interpolation],
                           "interpolation", INTERPOLATIONS, "bilinear")
    fillers = [op for op in ops if GEOMETRY[op.name].fills]
    fill_mode = _agree(fillers, "fill_mode", FILL_MODES, "constant")
    fill_value = 0.0
    if fill_mode == "constant":
        values: list[tuple[str, float]] = []
        for op in fillers:
            # pad_and_crop's config has no fill_value: it pads with 0
            v = op.params.get("fill_value", 0.0)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 255:
                raise ConfigError(f"{_key(op, 'fill_value')}: must be a number in [0, 255] "
                                  f"(uint8 pixel units), got {v!r}")
            shown = (f"{_key(op, 'fill_value')} = {float(v):g}" if "fill_value" in op.params
                     else f"{_key(op, 'fill_mode')} = 'constant' (pads with 0)")
            values.append((shown, float(v)))
        if len({v for _, v in values}) > 1:
            keys = ", ".join(k for k, _ in values)
            raise ConfigError(
                f"{keys}: disagree. Detection resamples the image ONCE for the whole "
                "geometry chain, so a constant fill has one value; set the affine's "
                "fill_value to 0, or give the ops one fill_mode other than constant "
                f"(allowed: {', '.join(FILL_MODES)})")
        fill_value = values[0][1] if values else 0.0
    return interpolation, fill_mode, float(fill_value)


def op_matrix(op: Op, seed: tf.Tensor, size: tuple[tf.Tensor, tf.Tensor],
              out_size: tuple[int, int]) -> tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:
    """(matrix, new size) of one L2 op on an image of `size`.

    The draws are the augment samplers' own (`tfpipe.augment.geometry.sample_*`,
    `sample_crop_window`, `sample_affine_matrix`): the same seed gives the matrix
    the public sampler returns (tested). p: flip/rot90 take it as the samplers do;
    the others apply with `coin(seed, p)` exactly as classification's L2 does.
    """
    found = matrix(op, seed, size, out_size)
    if found is None:
        raise ConfigError(f"augment.geometry.{op.name}: not supported for detection (boxes "
                          "must follow an affine matrix); allowed: " + ", ".join(_OPS))
    return found


class BoxGeometry:
    """Detection's per-sample L2: the chain's matrix on the decoded image and its boxes."""

    def __init__(self, s: Settings, geometry: Sequence[Op]) -> None:
        self.s, self.ops = s, list(geometry)
        # train only: eval resizes the whole image and nothing is filled
        self.interpolation, self.fill_mode, self.fill_value = resample_settings(self.ops)

    def image(self, image: tf.Tensor, sseed: Callable[[int], tf.Tensor] | None
              ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(output image, its matrix, the decoded [h, w]); `sseed=None`: the eval
        rendering (the whole image resized)."""
        size = self.s.image_size
        shape = tf.shape(image, out_type=tf.int32)
        hw = (shape[0], shape[1])
        if sseed is None:  # eval: resize the whole image
            return resize_uint8(image, size), augment.resize_matrix(hw, size), tf.stack(hw)
        mats, cur = [], hw
        for i, op in enumerate(self.ops):
            m, cur = op_matrix(op, sseed(i), cur, size)
            mats.append(m)
        mats.append(augment.resize_matrix(cur, size))
        m = augment.compose(*mats)
        out = follow_image(image, m, size, self.interpolation, self.fill_mode,
                           self.fill_value)
        return tf.ensure_shape(out, [size[0], size[1], self.s.channels]), m, tf.stack(hw)

    def objects(self, feats: dict[str, tf.Tensor], m: tf.Tensor, hw: tf.Tensor
                ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """The record's boxes through `m`, clipped, unfiltered, unpadded:
        (boxes [N, 4], classes [N], keep [N] bool). Per-object targets filter and
        pad with the same keep (`tf.boolean_mask(t, keep)[:max_boxes]`)."""
        boxes = tf.stack([tf.reshape(tf.cast(feats[k], tf.float32), [-1]) for k in BOX_KEYS],
                         axis=-1)
        classes = tf.cast(tf.reshape(feats[BOX_LABEL_KEY], [-1]), tf.int64)
        boxes, keep = follow_boxes(boxes, m, hw, self.s.image_size)
        return boxes, classes, keep

    def pad(self, boxes: tf.Tensor, classes: tf.Tensor, keep: tf.Tensor
            ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """`objects`' output filtered by keep and padded to max_boxes."""
        boxes, classes = augment.filter_boxes(boxes, classes, keep)
        return augment.pad_boxes(boxes, classes, self.s.max_boxes)

    def boxes(self, feats: dict[str, tf.Tensor], m: tf.Tensor, hw: tf.Tensor
              ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """The record's boxes through `m`, clipped, filtered, padded:
        (boxes [max_boxes, 4], classes [max_boxes], num_boxes)."""
        return self.pad(*self.objects(feats, m, hw))
