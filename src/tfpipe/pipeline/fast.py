"""Fused batched L3: per-sample parameters, one XLA-compiled pass over the batch.

The colour ops whose parameters are a scalar per sample (brightness, contrast,
saturation, hue, gamma) are split the albumentations way: every sample's
parameters are drawn from its own seed with the `tfpipe.augment.color`
samplers (exactly the draws `random_<op>(image, seed, ..., p)` makes: the same
seed split, the same p-coin) -- for classification at batch time, all rows at
once (`Classify.pixel_inputs`), for detection per sample (`sample`) -- and the
batch map applies the pure kernels `adjust_<op>(images, params[B])` in config
order, then `normalize`, inside ONE `tf.function(jit_compile=True)`.

Why: the same chain in plain TF ops costs ~2-3 ms/img here (six full passes
over a float batch); XLA fuses it into one or two loops, and with the channel
mean written as a dot and saturation's max/min taken from channel slices (forms
XLA:CPU fuses) brightness + contrast + normalize costs ~2.2-2.4x normalize
alone (benchmarks/pixel_bench.py --fused, docs/performance.md). Semantics are
the sequential ops' (clip after each op); XLA only reorders float rounding
(|diff| <= 1e-5, tested).
"""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from tfpipe.augment import color
from tfpipe.pipeline._settings import Op

# op name -> (sampler, kernel) in tfpipe.augment.color
FUSABLE: dict[str, tuple[str, str]] = {
    "brightness": ("sample_brightness", "adjust_brightness"),
    "contrast": ("sample_contrast", "adjust_contrast"),
    "saturation": ("sample_saturation", "adjust_saturation"),
    "hue": ("sample_hue", "adjust_hue"),
    "gamma": ("sample_gamma", "adjust_gamma"),
}

# Same semantics, formulations XLA:CPU compiles better (see the kernels' docstrings):
# XLA:CPU sends every reduce to a library call that cannot fuse the ops before it, so
# each one writes the whole float32 batch out and reads it back. Contrast's channel
# mean becomes a dot with ones (fused into one loop over the uint8 input), the
# saturation's channel max/min elementwise max/min of slices. Brightness + contrast
# + normalize went from 4.2-4.7x to 2.2-2.4x the cost of normalize alone, + saturation
# from 12-17x to 3.2-3.8x (docs/performance.md, "Fused batched L3 chain").
_XLA_KERNELS: dict[str, Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = {
    "contrast": color._adjust_contrast_xla,
    "saturation": color._adjust_saturation_xla,
}


def jit_normalize(mean: Sequence[float], std: Sequence[float]) -> Callable[[tf.Tensor], tf.Tensor]:
    """`color.normalize(x, mean, std)` compiled with XLA (uint8 or float [0,1] batch in)."""
    mean, std = [float(v) for v in mean], [float(v) for v in std]
    return tf.function(lambda x: color.normalize(x, mean, std), jit_compile=True,
                       reduce_retracing=True)


def fusable(ops: Sequence[Op]) -> bool:
    return bool(ops) and all(op.name in FUSABLE for op in ops)


class FusedPixel:
    """Sampler (per sample) and jit-compiled kernel chain (per batch) for `ops`."""

    def __init__(self, ops: Sequence[Op], mean: Sequence[float] | None,
                 std: Sequence[float] | None) -> None:
        self.ops = list(ops)
        self.mean = None if mean is None else [float(v) for v in mean]
        self.std = None if std is None else [float(v) for v in std]
        self._samplers: list[Callable[[tf.Tensor], tf.Tensor]] = []
        self._kernels: list[Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = []
        for op in self.ops:
            sample_name, kernel_name = FUSABLE[op.name]
            sampler = getattr(color, sample_name)
            params = {k: (tuple(v) if isinstance(v, list) else v) for k, v in op.params.items()}
            self._samplers.append(lambda s, f=sampler, kw=params: f(s, **kw))
            self._kernels.append(getattr(color, kernel_name))
        self._jit: dict[tuple[bool, bool], Callable[..., tf.Tensor]] = {}

    def sample(self, seeds: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Per-sample draws for seeds [n_ops, 2]: (params [n_ops] f32, apply [n_ops] bool).

        Same as `color.random_op`: p >= 1 draws from the op seed itself; p < 1 splits
        it into (parameter seed, apply seed).
        """
        params, applies = [], []
        for j, op in enumerate(self.ops):
            seed = seeds[j]
            if op.p >= 1.0:
                params.append(tf.cast(self._samplers[j](seed), tf.float32))
                applies.append(tf.constant(True))
            else:
                pseed, aseed = color.split_seed(seed)  # the exact random_op split
                params.append(tf.cast(self._samplers[j](pseed), tf.float32))
                applies.append(color.sample_apply(aseed, op.p))
        return tf.stack(params), tf.stack(applies)

    def _chain(self, x: tf.Tensor, params: tf.Tensor, apply: tf.Tensor, to_float: bool,
               normalize: bool) -> tf.Tensor:
        # inside the compiled function: the cast fuses with the first op. uint8 mode
        # carries integer-valued float32 levels between the ops (`color._Levels`):
        # the same rounded values without an f32 -> u8 -> f32 round trip per op.
        y = tf.cast(x, tf.float32)
        y = y * (1.0 / 255.0) if to_float else color._Levels(y)
        for j, op in enumerate(self.ops):
            kernel = _XLA_KERNELS.get(op.name, self._kernels[j])
            out = kernel(y, params[:, j])
            if op.p < 1.0:
                if to_float:
                    out = color.maybe_apply(apply[:, j], out, y)
                else:
                    out = color._Levels(color.maybe_apply(apply[:, j], out.x, y.x))
            y = out
        if not to_float:
            y = tf.cast(y.x, tf.uint8)  # exact: integer values in [0, 255]
        if normalize:
            y = color.normalize(y, self.mean, self.std)
        return y

    def __call__(self, x: tf.Tensor, params: tf.Tensor, apply: tf.Tensor, *,
                 to_float: bool, normalize: bool) -> tf.Tensor:
        """Apply to a uint8 batch x [B,H,W,C]; params/apply [B, n_ops].

        to_float: run the ops in float32 [0,1] (no rounding between ops), else on
        uint8 (rounded per op, the uint8 output mode). normalize: finish with
        `(x - mean) / std` (float32 out).
        """
        key = (to_float, normalize)
        if key not in self._jit:
            self._jit[key] = tf.function(
                lambda x, p, a: self._chain(x, p, a, to_float, normalize),
                jit_compile=True, reduce_retracing=True)
        return self._jit[key](x, params, apply)
