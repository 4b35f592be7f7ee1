"""Native batched colour chain + normalize (`TfpipePixelChain`, pixel.cc).

Bit-identical to the plain-TF chain of `tfpipe.augment.color` kernels that
`tfpipe.pipeline.fast.FusedPixel` runs without the library (tests/native), and
independent of the host's instruction set and thread count (fixed operation
order, no FMA, exact integer / fixed-tree channel means; see pixel.cc).
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from tfpipe import native
from tfpipe.native.chain_ops import NATIVE_OPS


def available() -> bool:
    """Native ops enabled and the built library has the chain (an older build does not)."""
    return native.available() and hasattr(native.load(), "tfpipe_pixel_chain")


def usable(ops: Sequence[str]) -> bool:
    """Whether `pixel_chain` serves this op list right now (only the table's native
    ops: `tfpipe.native.chain_ops`; the others run plain TF)."""
    return all(op in NATIVE_OPS for op in ops) and available()


def pixel_chain(images: tf.Tensor, params: tf.Tensor, apply: tf.Tensor, ops: Sequence[str],
                gated: Sequence[bool], *, to_float: bool, normalize: bool,
                mean: Sequence[float] | None = None,
                std: Sequence[float] | None = None) -> tf.Tensor:
    """Apply `ops` to a batch [B,H,W,C] (uint8; float32 [0,1] only with to_float).

    params/apply: [B, len(ops)]; apply only matters where `gated` (p < 1).
    Returns float32 when to_float or normalize, else uint8. Requires `available()`.
    """
    bad = [op for op in ops if op not in NATIVE_OPS]
    if bad:
        raise ValueError(f"pixel_chain: ops must be in {list(NATIVE_OPS)}, got {bad}")
    if not available():
        raise native.unavailable("pixel chain", "pixel.cc")
    images = tf.convert_to_tensor(images)
    out_dtype = tf.float32 if (to_float or normalize) else tf.uint8
    return native.load().tfpipe_pixel_chain(
        images, tf.convert_to_tensor(params, tf.float32), tf.convert_to_tensor(apply, tf.bool),
        out_dtype=out_dtype, ops=list(ops), gated=[bool(g) for g in gated],
        to_float=bool(to_float), normalize=bool(normalize),
        mean=[float(v) for v in (mean or [])], std=[float(v) for v in (std or [])],
        **native.isa_attrs())
