"""The pixel stage: L3 after batching -- its inputs, drawn row by row, and the kernels.

Pixel op j of a sample draws from `op_seed(sample_seed, PIXEL_BASE + j)`. The
inputs are either the drawn parameters and p-coins of a scalar colour chain
(`_pparams` / `_papply` [B, n], `fast.FusedPixel`: one native pass, or plain
TF with the same bits) or, for any other chain, the op seeds themselves
(`_pseeds` [B, n, 2], each op then draws per row). Classification draws them
at batch time for every row at once (`inputs`), detection per sample
(`fields`, carried through `batch()`): the same bits (tests/pipeline/
test_plan.py). With `augment.pixel_stage: device` the inputs leave the
pipeline instead (`device_fields`) and `augment.OnDevice` applies the chain.
"""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from tfpipe import seeds
from tfpipe.augment import color, on_device
from tfpipe.errors import ConfigError
from tfpipe.pipeline._plan import PIXEL_BASE
from tfpipe.pipeline._settings import Op, Settings
from tfpipe.pipeline._tasks import device_refusal
from tfpipe.pipeline.fast import FUSABLE, FusedPixel, fusable

Inputs = dict[str, tf.Tensor]  # `_pparams` + `_papply`, or `_pseeds`
KEYS = ("_pparams", "_papply", "_pseeds")


def pixel_fn(op: Op) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """`(images [B,H,W,C], seeds [B,2]) -> images` for an L3 op (per-row parameters);
    the same resolution the device stage makes (`augment.on_device.pixel_function`)."""
    return on_device.pixel_function(op.name, op.params, op.p)


def check_pixel_stage(s: Settings) -> None:
    """`augment.pixel_stage`: host or device, and device only for the tasks whose
    rules allow it (`TaskRules.device_pixel_stage`: classification)."""
    if s.pixel_stage not in ("host", "device"):
        raise ConfigError(f"augment.pixel_stage: must be 'host' or 'device', got "
                          f"{s.pixel_stage!r}")
    refused = device_refusal(s.task) if s.pixel_stage == "device" else None
    if refused:
        raise ConfigError(refused)


class PixelStage:
    """The L3 chain `ops` of one pipeline (mean/std: for normalize fused into it)."""

    def __init__(self, ops: Sequence[Op], mean: Sequence[float], std: Sequence[float],
                 output_dtype: str) -> None:
        self.ops = list(ops)
        self.float_out = output_dtype == "float32"
        self.fused = FusedPixel(self.ops, mean, std) if fusable(self.ops) else None
        self.fns = [] if self.fused else [pixel_fn(op) for op in self.ops]

    def fields(self, sseed: Callable[[int], tf.Tensor] | None) -> Inputs:
        """One sample's inputs from its op seeds (`k -> op_seed(k)`); `sseed=None`
        gives placeholders of the same structure (a sentinel, an eval sample)."""
        n = len(self.ops)
        if not n:
            return {}
        if sseed is None:
            if self.fused:
                return {"_pparams": tf.zeros([n], tf.float32), "_papply": tf.zeros([n], tf.bool)}
            return {"_pseeds": tf.zeros([n, 2], tf.int64)}
        pseeds = tf.stack([sseed(PIXEL_BASE + j) for j in range(n)])
        if self.fused:
            params, apply = self.fused.sample(pseeds)
            return {"_pparams": params, "_papply": apply}
        return {"_pseeds": pseeds}

    def inputs(self, base: tf.Tensor) -> Inputs:
        """A batch's inputs from its rows' op-seed bases [B, 2], vectorized:
        `_pparams`/`_papply` [B, n] or `_pseeds` [B, n, 2] -- what `fields` draws
        per sample, bit for bit."""
        rows = [seeds.fold(base, PIXEL_BASE + j) for j in range(len(self.ops))]
        if not self.fused:
            return {"_pseeds": tf.stack(rows, axis=1)}
        params, applies = [], []
        for op, seed in zip(self.fused.ops, rows):
            sampler = getattr(color, FUSABLE[op.name][0])
            kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in op.params.items()}
            if op.p >= 1.0:
                params.append(tf.cast(sampler(seed, **kw), tf.float32))
                applies.append(tf.ones(tf.shape(seed)[:1], tf.bool))
            else:
                pseed, aseed = color.split_seed(seed)  # the exact random_op split
                params.append(tf.cast(sampler(pseed, **kw), tf.float32))
                applies.append(color.sample_apply(aseed, op.p))
        return {"_pparams": tf.stack(params, axis=1), "_papply": tf.stack(applies, axis=1)}

    def device_fields(self, inputs: Inputs) -> dict[str, tf.Tensor]:
        """The inputs under the device stage's keys (`augment.on_device`)."""
        if not self.ops:
            return {}
        if self.fused:
            return {on_device.PIXEL_PARAMS: inputs["_pparams"],
                    on_device.PIXEL_APPLY: inputs["_papply"]}
        return {on_device.PIXEL_SEEDS: inputs["_pseeds"]}

    def apply(self, images: tf.Tensor, inputs: Inputs, normalize: bool
              ) -> tuple[tf.Tensor, bool]:
        """L3 on the uint8 batch `images`; returns (x, normalized). x is float32 [0,1]
        (or normalized, fused into the chain's pass) for float32 output, uint8 for
        uint8 output."""
        if self.fused:
            norm = normalize and self.float_out
            return self.fused(images, inputs["_pparams"], inputs["_papply"],
                              to_float=self.float_out, normalize=norm), norm
        x = tf.cast(images, tf.float32) * (1.0 / 255.0) if self.float_out else images
        for j, fn in enumerate(self.fns):
            x = fn(x, inputs["_pseeds"][:, j])
        return x, False
