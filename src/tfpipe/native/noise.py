"""Native per-pixel Gaussian / speckle noise (`TfpipeNoise`, noise.cc).

Bit-identical to the pure-TF twin in `tfpipe.augment.pixel` (per-row
`tf.random.stateless_normal(shape, seed, alg="philox")`, then the elementwise
formula and restore): the normals come from TF's own Philox and
NormalDistribution headers, compiled without -march and with
-ffp-contract=off (tests/augment/test_noise_native.py). Rows that are not
applied are copied and draw nothing. `tfpipe.augment.pixel.random_gaussian_noise`
/ `random_speckle_noise` call it when `available()`; `TFPIPE_NATIVE=0` or an
older library falls back to the twin.
"""

from __future__ import annotations

import tensorflow as tf

from tfpipe import native

KINDS = ("gaussian", "speckle")


def available() -> bool:
    """Native ops enabled and the built library has the noise kernel."""
    return native.available() and hasattr(native.load(), "tfpipe_noise")


def noise(images: tf.Tensor, seeds: tf.Tensor, apply: tf.Tensor, kind: str,
          stddev: float) -> tf.Tensor:
    """images [B,H,W,C] uint8 or float32 [0,1]; seeds int64 [B,2] (the noise seeds,
    already split from the op seed when p < 1); apply bool [B]. Requires `available()`."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    if not available():
        raise native.unavailable("noise kernel", "noise.cc")
    return native.load().tfpipe_noise(
        tf.convert_to_tensor(images), tf.cast(tf.convert_to_tensor(seeds), tf.int64),
        tf.convert_to_tensor(apply, tf.bool), kind=kind, stddev=float(stddev))
