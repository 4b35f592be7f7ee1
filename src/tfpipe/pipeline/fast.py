"""Fused batched L3: per-sample parameters, one pass over the batch, same bits on every host.

The colour ops whose parameters are a scalar per sample (the one table,
`tfpipe.native.chain_ops`: brightness, contrast, saturation, hue, gamma) are
split the albumentations way: every sample's parameters are drawn from its own
seed with the `tfpipe.augment.color` samplers (exactly the draws
`random_<op>(image, seed, ..., p)` makes: the same seed split, the same
p-coin) -- for classification at batch time, all rows at once
(`PixelStage.inputs`), for detection per sample (`sample`) -- and the batch
map applies the pure kernels `adjust_<op>(images, params[B])` in config order,
then `normalize`.

How: with the native library, a chain of the table's native ops (brightness,
contrast, saturation) + normalize is ONE native op (`tfpipe.native.pixel`,
pixel.cc), parallel over the images of the batch. Without it, or when the
chain has another op (hue, gamma), the same kernels run as plain TF ops. Both
give the same bits (tests/native), and neither depends on the host's
instruction set or thread count: no XLA (its CPU backend picks vector width
and FMA contraction per host, and did change the bytes between AVX-512, AVX2
and SSE4.2 hosts), no oneDNN matmul/convolution, every channel mean in a fixed
order (exact integer sum for uint8 levels, the pairwise tree
`color._pairwise_sum` for float32). tests/pipeline/
test_host_independence.py runs the presets as narrower hosts would.
"""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from tfpipe.augment import color
from tfpipe.augment.on_device import color_chain
from tfpipe.native import chain_ops
from tfpipe.native import pixel as native_pixel
from tfpipe.pipeline._settings import Op

#: op name -> (sampler, kernel) in tfpipe.augment.color, for every op of the one
#: colour-chain table (tfpipe.native.chain_ops); a view of it, not another list
FUSABLE: dict[str, tuple[str, str]] = {
    name: (chain_ops.sampler(name), chain_ops.kernel(name)) for name in chain_ops.CHAIN_OPS}

def normalizer(mean: Sequence[float], std: Sequence[float]) -> Callable[[tf.Tensor], tf.Tensor]:
    """`color.normalize(x, mean, std)` for a batch x [B,H,W,C] (uint8, or float32 [0,1]).

    The native chain with no ops when the library is loaded (one pass, parallel
    over the images), else the plain TF ops: the same bits either way, on every
    host (the formula is elementwise: x * (1 / (scale * std)) - mean / std).
    """
    mean, std = [float(v) for v in mean], [float(v) for v in std]

    def run(x: tf.Tensor) -> tf.Tensor:
        x = tf.convert_to_tensor(x)
        if x.shape.rank == 4 and x.dtype in (tf.uint8, tf.float32) and native_pixel.available():
            empty = tf.zeros([tf.shape(x)[0], 0], tf.float32)
            return native_pixel.pixel_chain(x, empty, tf.cast(empty, tf.bool), [], [],
                                            to_float=x.dtype == tf.float32, normalize=True,
                                            mean=mean, std=std)
        return color.normalize(x, mean, std)

    return run



def fusable(ops: Sequence[Op]) -> bool:
    return bool(ops) and all(op.name in FUSABLE for op in ops)


class FusedPixel:
    """Sampler (per sample) and kernel chain (per batch, native or plain TF) for `ops`."""

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
        self._names = [op.name for op in self.ops]
        self._gated = [op.p < 1.0 for op in self.ops]

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
        """The pure-TF twin of the native chain: the color kernels, in config order
        (`augment.on_device.color_chain`, the one definition the device stage runs too)."""
        return color_chain(x, params, apply, self._names, self._gated, to_float=to_float,
                           normalize=normalize, mean=self.mean, std=self.std)

    def native(self) -> bool:
        """Whether `__call__` runs the native op now (chains of native ops only)."""
        return native_pixel.usable(self._names)

    def __call__(self, x: tf.Tensor, params: tf.Tensor, apply: tf.Tensor, *,
                 to_float: bool, normalize: bool) -> tf.Tensor:
        """Apply to a uint8 batch x [B,H,W,C]; params/apply [B, n_ops].

        to_float: run the ops in float32 [0,1] (no rounding between ops), else on
        uint8 (rounded per op, the uint8 output mode). normalize: finish with
        `(x - mean) / std` (float32 out). Any other input dtype is refused: the
        native op would take float32 [0,1] but its twin reads levels 0..255, so
        the two paths would differ (every caller hands over the uint8 batch).
        """
        x = tf.convert_to_tensor(x)
        if x.dtype != tf.uint8:
            raise ValueError(f"FusedPixel: images must be a uint8 batch [B,H,W,C] "
                             f"(levels 0..255), got {x.dtype.name}")
        if normalize and self.mean is None:
            raise ValueError("FusedPixel: normalize=True needs mean and std")
        if self.native() and x.shape.rank == 4:
            return native_pixel.pixel_chain(x, params, apply, self._names, self._gated,
                                            to_float=to_float, normalize=normalize,
                                            mean=self.mean, std=self.std)
        return self._chain(x, params, apply, to_float, normalize)
