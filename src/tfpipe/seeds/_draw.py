"""Draws from a seed: the one place the random ops' seed plumbing lives.

Every sampler in `tfpipe.augment` takes ONE seed `[2]` (a sample's, or a batch's)
or ROWS of seeds `[B, 2]` (one per sample of a batch, so row i's draw depends on
seed i only). These helpers dispatch on that rank: rows go through the
vectorized Philox twins in `_rows` (bit-identical to TF's op on each row,
tests/seeds/test_rows.py), a single seed through TF's own stateless op.
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

import tensorflow as tf

from tfpipe.seeds._derive import ALG
from tfpipe.seeds._rows import split_rows, uniform_rows

Number = Union[float, int, tf.Tensor]

__all__ = ["as_seed", "bernoulli", "per_seed", "split", "split_pair", "uniform"]


def as_seed(seed: object) -> tf.Tensor:
    """`seed` as an int64 tensor of shape [2] or [B, 2]; TypeError / ValueError otherwise."""
    seed = tf.convert_to_tensor(seed)
    if seed.dtype not in (tf.int32, tf.int64):
        raise TypeError(f"seed must be an int32/int64 tensor of shape [2] or [B,2], "
                        f"got {seed.dtype.name}")
    seed = tf.cast(seed, tf.int64)
    if seed.shape.rank not in (1, 2) or seed.shape[-1] != 2:
        raise ValueError(f"seed must have shape [2] or [B,2], got {seed.shape}")
    return seed


def split(seed: object, num: int) -> tf.Tensor:
    """`num` independent child seeds: [num, 2] for a seed [2], [B, num, 2] for rows
    (row i == `tf.random.experimental.stateless_split(seed[i], num, "philox")`)."""
    seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
    if seed.shape.rank == 2:
        return split_rows(seed, num)
    return tf.cast(tf.random.experimental.stateless_split(seed, num, alg=ALG), tf.int64)


def split_pair(seed: object) -> tuple[tf.Tensor, tf.Tensor]:
    """(first child, second child) of `split(seed, 2)`, each [2] or [B, 2]: e.g. the
    (parameter seed, apply seed) pair of an op with a probability `p`."""
    s = split(seed, 2)
    return s[..., 0, :], s[..., 1, :]


def per_seed(seed: object, fn: Callable[[tf.Tensor], tf.Tensor],
             dtype: tf.DType = tf.float32) -> tf.Tensor:
    """`fn(seed[2])`, or stacked `fn(seed[i])` for rows of seeds [B, 2].

    For draws that have no vectorized twin: `tf.vectorized_map` cannot vectorize
    stateless RNG kernels (TF 2.21), so rows go through `tf.map_fn` (cheap when
    the draws are small)."""
    seed = as_seed(seed)
    if seed.shape.rank == 1:
        return fn(seed)
    return tf.map_fn(fn, seed, fn_output_signature=dtype)


def uniform(seed: object, shape: Sequence[int] = (), minval: Number = 0.0,
            maxval: Number = 1.0, dtype: tf.DType = tf.float32) -> tf.Tensor:
    """U[minval, maxval) of `shape` from a seed [2]; rows [B, 2] give [B, *shape]
    (row i the same bits as the single-seed draw from seed i). int32 seeds are
    cast to int64 first (the pipeline's seeds are int64)."""
    shape = list(shape)
    seed = as_seed(seed)
    if seed.shape.rank == 2 and dtype == tf.float32:
        # one vectorized Philox pass over the rows, bit-identical to the per-row op
        return uniform_rows(seed, tuple(shape), minval, maxval)
    return per_seed(seed, lambda s: tf.random.stateless_uniform(
        shape, s, minval=tf.cast(minval, dtype), maxval=tf.cast(maxval, dtype), dtype=dtype,
        alg=ALG), dtype)


def bernoulli(seed: object, p: float, shape: Sequence[int] = ()) -> tf.Tensor:
    """True with probability p (`uniform(seed, shape) < p`; one bool per row of
    seeds [B, 2]): the coin behind every op's `p`."""
    return uniform(seed, shape, 0.0, 1.0) < p
