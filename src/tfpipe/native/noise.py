"""Native per-pixel Gaussian / speckle noise (`TfpipeNoise`, noise.cc), and the
table of tfpipe's standard normal (`normal_table`).

Bit-identical to the pure-TF twin in `tfpipe.augment.pixel` (per row
`pixel.sample_noise`: TF's Philox words through the piecewise-linear inverse
normal CDF of `normal_table`, then the elementwise formula and restore),
compiled without -march and with -ffp-contract=off
(tests/native/test_noise_native.py). Rows that are not applied are copied and
draw nothing; speckle skips the draws of all-zero pixel groups.
`tfpipe.augment.pixel.random_gaussian_noise` / `random_speckle_noise` call it
when `available()`; `TFPIPE_NATIVE=0` or a library without it falls back to the
twin.
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from tfpipe import native
from tfpipe.native._normal_table import KNOT_BITS, KNOTS_PER_OCTAVE

KINDS = ("gaussian", "speckle")
#: the normal's grid: f in [1, 2^31] in float32, KNOTS_PER_OCTAVE knots per octave
FRAC_BITS = 23 - (KNOTS_PER_OCTAVE.bit_length() - 1)  # 17: mantissa bits below the knot index


@functools.lru_cache(maxsize=None)
def normal_table() -> np.ndarray:
    """float32 [1986, 2]: row i = (A[i], D[i]) with A the 1985 knots of the inverse
    normal CDF (`_normal_table`, then a 0 pad) and D[i] = A[i+1] - A[i] (float32
    subtraction, the last 0). Read-only; the definition the kernel and the twin share."""
    a = np.array(KNOT_BITS + (0,), np.uint32).view(np.float32)
    d = np.append(a[1:] - a[:-1], np.float32(0.0))
    table = np.stack([a, d], axis=1).astype(np.float32)
    table.setflags(write=False)
    return table


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
        tf.convert_to_tensor(apply, tf.bool), tf.constant(normal_table()), kind=kind,
        stddev=float(stddev))
