"""The geometric-op registry: each L2 op declared once, with how every target follows it.

An entry (`GeometricOp`) holds, for one op of `augment.geometry`:
- its config model (`config`, from `tfpipe.config.GEOMETRY_OPS`: the user's keys
  and defaults, `OpConfig.affine` says whether it has a matrix);
- `params`: the params its matrix honours (anything else would be silently
  ignored on the one-matrix path, so it is a ConfigError there);
- `matrix(op, seed, size, out_size) -> (3x3, new size)`: the op's matrix drawn by
  the `tfpipe.augment` samplers' own draw functions (the same seed gives the
  matrix the public op returns), before the probability coin; None for an op
  without one (elastic: a displacement field);
- `image(op, image, seed, out_size) -> image`: the op alone on one uint8 image
  through the public `tfpipe.augment` op (classification's unfused path);
- `own_coin`: its sampler takes `p` itself (flip, rot90); else `coin(seed, p)`;
- `interpolation` / `fills`: which of the one resample's settings it carries.

How each target follows an op with a matrix (`FOLLOW`): the image is resampled
with the chain's interpolation and fill (`resample_settings`), a mask with the
same matrix, nearest, filled with the ignore label, boxes through the matrix
(corners, clipped, filtered), keypoints through the matrix (absent outside the
output; a mirror swaps left/right). The
chain's matrices are composed with the final resize and every target is
resampled ONCE. docs/architecture.md, "Adding a geometric op".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import tensorflow as tf

from tfpipe import augment
from tfpipe.augment import geometry as G
from tfpipe.config import GEOMETRY_OPS, OpConfig
from tfpipe.pipeline._plan import affine_kwargs, coin, pair
from tfpipe.pipeline._settings import Op

Size = tuple[Any, Any]
MatrixFn = Callable[[Op, tf.Tensor, Size, tuple[int, int]], tuple[tf.Tensor, Size]]
ImageFn = Callable[[Op, tf.Tensor, tf.Tensor, tuple[int, int]], tf.Tensor]


@dataclass(frozen=True)
class GeometricOp:
    """One L2 op (see the module docstring)."""

    name: str
    params: frozenset[str]
    matrix: MatrixFn | None
    image: ImageFn
    own_coin: bool = False
    interpolation: bool = False
    fills: bool = False

    @property
    def config(self) -> type[OpConfig]:
        return GEOMETRY_OPS[self.name]


def _interp(op: Op) -> str:
    return str(op.params.get("interpolation", "bilinear"))


# ------------------------------------------------------------------ matrices
def _flip_matrix(op: Op, seed: tf.Tensor, size: Size, out: tuple[int, int]
                 ) -> tuple[tf.Tensor, Size]:
    fx, fy = G.sample_flip(seed, bool(op.params.get("horizontal", True)),
                           bool(op.params.get("vertical", False)), op.p)
    return augment.flip_matrix(size, fx, fy), size


def _rot90_matrix(op: Op, seed: tf.Tensor, size: Size, out: tuple[int, int]
                  ) -> tuple[tf.Tensor, Size]:
    h, w = size
    k = G.sample_rot90(seed, op.p)
    odd = tf.math.floormod(k, 2) == 1
    return augment.rot90_matrix((h, w), k), (tf.where(odd, w, h), tf.where(odd, h, w))


def _crop_out(win: Any, out: tuple[int, int]) -> tuple[tf.Tensor, Size]:
    return augment.crop_matrix(win[:2], win[2:], out), (tf.constant(out[0]), tf.constant(out[1]))


def _rrc_matrix(op: Op, seed: tf.Tensor, size: Size, out: tuple[int, int]
                ) -> tuple[tf.Tensor, Size]:
    h, w = size
    return _crop_out(augment.sample_crop_window(seed, h, w, pair(op, "scale", augment.CROP_SCALE),
                                                pair(op, "ratio", augment.CROP_RATIO)), out)


def _center_matrix(op: Op, seed: tf.Tensor, size: Size, out: tuple[int, int]
                   ) -> tuple[tf.Tensor, Size]:
    h, w = size
    frac = float(op.params.get("crop_fraction", 0.875))
    return _crop_out(augment.center_crop_window(h, w, out, frac), out)


_AFFINE_DRAWS = ("rotation", "scale", "per_axis_scale", "shear", "translate")


def _affine_matrix(op: Op, seed: tf.Tensor, size: Size, out: tuple[int, int]
                   ) -> tuple[tf.Tensor, Size]:
    kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in op.params.items()
          if k in _AFFINE_DRAWS}
    return augment.sample_affine_matrix(seed, size, **kw), size


def _pad_matrix(op: Op, seed: tf.Tensor, size: Size, out: tuple[int, int]
                ) -> tuple[tf.Tensor, Size]:
    dx, dy = G.sample_pad_shift(seed, int(op.params.get("padding", 4)))
    return augment.translate_matrix(dx, dy), size


# ------------------------------------------------------------------ one image (unfused)
def _elastic_image(op: Op, image: tf.Tensor, seed: tf.Tensor, size: tuple[int, int]
                   ) -> tf.Tensor:
    from tfpipe.augment.elastic import elastic

    return elastic(image, seed, float(op.params.get("alpha", 34.0)),
                   float(op.params.get("sigma", 4.0)))[0]


def _pad_image(op: Op, image: tf.Tensor, seed: tf.Tensor, size: tuple[int, int]) -> tf.Tensor:
    kw = {k: op.params[k] for k in ("padding", "fill_mode", "fill_value") if k in op.params}
    return augment.pad_and_crop(image, seed, **kw)[0]


#: name -> entry, in the config's order (`tfpipe.config.GEOMETRY_OPS`).
GEOMETRY: dict[str, GeometricOp] = {g.name: g for g in (
    GeometricOp("random_resized_crop", frozenset({"scale", "ratio", "interpolation"}),
                _rrc_matrix, lambda op, x, seed, size: augment.random_resized_crop(
                    x, seed, size, pair(op, "scale", augment.CROP_SCALE),
                    pair(op, "ratio", augment.CROP_RATIO), _interp(op))[0],
                interpolation=True),
    GeometricOp("center_crop", frozenset({"crop_fraction", "interpolation"}),
                _center_matrix, lambda op, x, seed, size: augment.center_crop(
                    x, size, float(op.params.get("crop_fraction", 0.875)), _interp(op))[0],
                interpolation=True),
    GeometricOp("flip", frozenset({"horizontal", "vertical"}), _flip_matrix,
                lambda op, x, seed, size: augment.random_flip(
                    x, seed, bool(op.params.get("horizontal", True)),
                    bool(op.params.get("vertical", False)), op.p)[0], own_coin=True),
    GeometricOp("rot90", frozenset(), _rot90_matrix,
                lambda op, x, seed, size: augment.random_rot90(x, seed, op.p)[0],
                own_coin=True),
    GeometricOp("affine", frozenset({*_AFFINE_DRAWS, "interpolation", "fill_mode",
                                     "fill_value"}),
                _affine_matrix, lambda op, x, seed, size: augment.random_affine(
                    x, seed, **affine_kwargs(op))[0], interpolation=True, fills=True),
    GeometricOp("pad_and_crop", frozenset({"padding", "fill_mode", "fill_value"}),
                _pad_matrix, _pad_image, fills=True),
    GeometricOp("elastic", frozenset({"alpha", "sigma"}), None, _elastic_image),
)}
assert list(GEOMETRY) == list(GEOMETRY_OPS), "one entry per config geometry op, same order"

#: The ops every target can follow (they have a matrix), in registry order.
MATRIX_OPS = tuple(name for name, g in GEOMETRY.items() if g.matrix is not None)


def matrix(op: Op, seed: tf.Tensor, size: Size, out_size: tuple[int, int]
           ) -> tuple[tf.Tensor, Size] | None:
    """(matrix, new size) of `op` with its probability applied (identity, size
    unchanged when the coin says no); None for an op without a matrix."""
    entry = GEOMETRY.get(op.name)
    if entry is None or entry.matrix is None:
        return None
    if entry.own_coin:
        return entry.matrix(op, seed, size, out_size)
    apply = coin(seed, op.p)
    m, new = entry.matrix(op, seed, size, out_size)
    m = tf.where(apply, m, augment.identity_matrix())
    if new is not size:  # the crops: the output size only when applied
        new = (tf.where(apply, new[0], size[0]), tf.where(apply, new[1], size[1]))
    return m, new


def apply_one(op: Op, image: tf.Tensor, seed: tf.Tensor, size: tuple[int, int]
              ) -> tf.Tensor | None:
    """`op` on one uint8 image through the public `tfpipe.augment` op, its
    probability applied; None for a name not in the registry."""
    entry = GEOMETRY.get(op.name)
    if entry is None:
        return None
    if entry.own_coin or op.p >= 1.0:
        return entry.image(op, image, seed, size)
    out = tf.cond(coin(seed, op.p), lambda: entry.image(op, image, seed, size), lambda: image)
    return tf.ensure_shape(out, [None, None, image.shape[-1]])


# ------------------------------------------------------------------ targets
def follow_image(image: tf.Tensor, m: tf.Tensor, size: tuple[int, int], interpolation: str,
                 fill_mode: str, fill_value: float) -> tf.Tensor:
    """The image through the chain's matrix: one resample, the configured kernel."""
    return augment.affine(image, m, size, interpolation, fill_mode, fill_value)


def follow_mask(mask: tf.Tensor, m: tf.Tensor, size: tuple[int, int], ignore_label: int
                ) -> tf.Tensor:
    """A class mask through the same matrix: nearest (no class is invented between
    two), the ignore label outside the source."""
    return augment.affine(mask, m, size, "nearest", "constant", float(ignore_label))


def follow_boxes(boxes: tf.Tensor, m: tf.Tensor, hw: Any, size: tuple[int, int]
                 ) -> tuple[tf.Tensor, tf.Tensor]:
    """Normalized yxyx boxes through the matrix: (boxes, keep) (`augment.transform_boxes`)."""
    return augment.transform_boxes(boxes, m, hw, size)


def follow_instance_masks(masks: tf.Tensor, m: tf.Tensor, boxes: tf.Tensor,
                          size: tuple[int, int], mask_size: tuple[int, int]) -> tf.Tensor:
    """Full-size instance masks [N, h, w] through the same matrix, each cropped to its
    output box `boxes` [N, 4] at `mask_size`: nearest, one resample from the source
    (`augment.crop_instance_masks`; the pipeline decodes them one at a time:
    `_instances.InstanceMasks`)."""
    return augment.crop_instance_masks(masks, m, boxes, size, mask_size)


def follow_keypoints(keypoints: tf.Tensor, m: tf.Tensor, hw: Any, size: tuple[int, int],
                     flip_permutation: Any = None) -> tf.Tensor:
    """[N, K, 3] (y, x, visibility) points through the matrix: absent outside the
    output, the left/right permutation under a mirror (`augment.transform_keypoints`)."""
    return augment.transform_keypoints(keypoints, m, hw, size, flip_permutation)


#: target kind -> how it follows an op's matrix.
FOLLOW: dict[str, Callable[..., Any]] = {
    "image": follow_image, "mask": follow_mask, "boxes": follow_boxes,
    "keypoints": follow_keypoints, "instance_masks": follow_instance_masks}
