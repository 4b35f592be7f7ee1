"""Batched stateless draws, bit-identical to TF's per-seed Philox ops.

`tf.random.stateless_*` take ONE seed, so a pipeline that draws per-sample
parameters runs several small kernels per sample, and `tf.vectorized_map` cannot
batch them ("No pfor vectorization defined for StatelessRandomUniformFullIntV2").
This module recomputes the same numbers for a whole batch of seeds with ordinary
elementwise TF ops on uint64 lanes: no loops, map_fn, py_function or custom op.
The Philox body is traced once per process per (output kind, generator calls)
into a shared `tf.function` (`_shared`), so each draw site adds one
PartitionedCall node to its graph rather than ~300 ops (build time: see
docs/performance-history.md, "Pipeline build time").

What is reproduced (TF 2.21, `alg="philox"`; tests/seeds/test_rows.py compares
every function bit for bit with TF's own op on each row):

* seed -> (key, counter): `random_ops_util._philox_scramble_seed` (the Python
  copy of `GenerateKey` in core/kernels/stateless_random_ops.cc): ONE
  Philox4x32-10 call with key (0x3ec8f720, 0x02461e29) on the counter
  (lo(s0), hi(s0), lo(s1), hi(s1)) gives mix[0..3]; then key = (mix0, mix1) and
  counter = (0, 0, mix2, mix3).
* Philox4x32-10 (core/lib/random/philox_random.h): ten rounds of
  `ComputeSingleRound` (multipliers 0xD2511F53 / 0xCD9E8D57, 32x32->64 bit
  products split into hi/lo words) with the key raised by (0x9E3779B9,
  0xBB67AE85) between rounds. Generator call k uses counter (k, 0, mix2, mix3):
  the CPU fill loop (`FillPhiloxRandomTask`) `Skip`s output group g to call g,
  so element j of the output comes from call j // kResultElementCount.
* float32 (`Uint32ToFloat` in random_distributions.h): 4 elements per call,
  bits 0x3f800000 | (w & 0x7fffff) read as a float in [1, 2), minus 1.0.
* int64 full range (`UniformFullIntDistribution64`): 2 elements per call,
  w[2i] | w[2i+1] << 32.

Shapes: `seeds` is int64 [..., 2] (normally [B, 2]; B may be unknown). Leading
dimensions are all batch dimensions, so `uniform_rows(split_rows(s, 4), (10,))`
draws four [10] vectors per row in one go.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Sequence, Union

import numpy as np
import tensorflow as tf

__all__ = ["fold_rows", "full_int_rows", "split_rows", "uniform_rows"]

Number = Union[int, float, tf.Tensor]

_M32 = np.uint64(0xFFFFFFFF)
# Philox4x32 constants (philox_random.h).
_MULT = np.array([0xD2511F53, 0xCD9E8D57], np.uint64)  # kPhiloxM4x32A, kPhiloxM4x32B
_WEYL = np.array([0x9E3779B9, 0xBB67AE85], np.uint64)  # kPhiloxW32A, kPhiloxW32B
_ROUNDS = 10
# Round r uses key + r * weyl (mod 2**32): precomputed, not raised between rounds.
_ROUND_OFFSETS = np.arange(_ROUNDS, dtype=np.uint64)[:, None] * _WEYL  # [10, 2]
# Fixed key of the seed scramble (_philox_scramble_seed: 0x02461E293EC8F720).
_SCRAMBLE_KEY = np.array([0x3EC8F720, 0x02461E29], np.uint64)
_SCRAMBLE_KEYS = (_SCRAMBLE_KEY + _ROUND_OFFSETS) & _M32  # [10, 2]


def _philox(c: list, round_keys: Sequence[tuple]) -> list:
    """Philox4x32-10: the four 32-bit counter words c0..c3 as uint64 tensors.

    One round (ComputeSingleRound), with 32x32->64 bit products that fit uint64
    exactly:  c0 * A = (hi0, lo0), c2 * B = (hi1, lo1),
        r0 = hi1 ^ c1 ^ k0, r1 = lo1, r2 = hi0 ^ c3 ^ k1, r3 = lo0.
    Four separate word tensors rather than one [..., 4] tensor: that needs a lane
    swap (ReverseV2/Gather) per round, which costs more than the 10 elementwise
    ops here, all of them same-shape or with a scalar constant (TF's fast paths).
    """
    # One Const node each, shared by the rounds (a numpy operand adds a Const per use).
    mul_a, mul_b = tf.constant(_MULT[0]), tf.constant(_MULT[1])
    mask, shift = tf.constant(_M32), tf.constant(np.uint64(32))
    c0, c1, c2, c3 = c
    for k0, k1 in round_keys:
        p0, p1 = c0 * mul_a, c2 * mul_b
        c0, c1, c2, c3 = (
            tf.bitwise.bitwise_xor(tf.bitwise.right_shift(p1, shift), tf.bitwise.bitwise_xor(c1, k0)),
            tf.bitwise.bitwise_and(p1, mask),
            tf.bitwise.bitwise_xor(tf.bitwise.right_shift(p0, shift), tf.bitwise.bitwise_xor(c3, k1)),
            tf.bitwise.bitwise_and(p0, mask),
        )
    return [c0, c1, c2, c3]


def _as_seeds(seeds: tf.Tensor) -> tf.Tensor:
    seeds = tf.convert_to_tensor(seeds)
    if seeds.shape.rank is None or seeds.shape.rank < 1:
        raise ValueError(f"seeds must be an int64 tensor of shape [..., 2] with a known rank, got shape {seeds.shape}")
    if seeds.shape[-1] is not None and seeds.shape[-1] != 2:
        raise ValueError(f"seeds must have shape [..., 2], got {seeds.shape}")
    if seeds.dtype != tf.int64:
        if not seeds.dtype.is_integer:
            raise TypeError(f"seeds must be an integer tensor (int64), got {seeds.dtype.name}")
        # Sign-extending cast, as TF's scramble does (cast(seed, uint64)).
        seeds = tf.cast(seeds, tf.int64)
    if seeds.shape[-1] is None:  # checked at run time only when not known statically
        seeds = tf.ensure_shape(seeds, seeds.shape[:-1].concatenate([2]))
    return seeds


def _static_shape(shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(shape)
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueError(f"shape must be a static tuple of non-negative ints, got {shape!r}")
    return tuple(int(d) for d in shape)


def _round_keys(key: tf.Tensor, weyl: np.uint64, full_shape: tf.Tensor) -> list:
    """key + r * weyl (mod 2**32) for the 10 rounds, each broadcast to full_shape.

    Broadcasting once here keeps every xor of the rounds same-shape (a broadcasting
    BitwiseXor is several times slower than a same-shape one at these sizes).
    """
    offsets = (np.arange(_ROUNDS, dtype=np.uint64) * weyl).reshape((_ROUNDS,) + (1,) * key.shape.rank)
    keys = tf.bitwise.bitwise_and(key[None] + offsets, _M32)
    return tf.unstack(tf.broadcast_to(keys, tf.concat([[_ROUNDS], full_shape], 0)))


def _raw_words(seeds: tf.Tensor, calls: int) -> list:
    """Philox outputs w0..w3 (uint64 [N, calls]) of generator calls 0..calls-1 per seed [N, 2]."""
    s0, s1 = tf.unstack(tf.bitcast(seeds, tf.uint64), axis=-1)
    shift = tf.constant(np.uint64(32))
    # Scramble: counter (lo s0, hi s0, lo s1, hi s1) on the fixed key.
    scramble_keys = [(tf.constant(k0), tf.constant(k1)) for k0, k1 in _SCRAMBLE_KEYS]
    m0, m1, m2, m3 = _philox([tf.bitwise.bitwise_and(s0, _M32), tf.bitwise.right_shift(s0, shift),
                              tf.bitwise.bitwise_and(s1, _M32), tf.bitwise.right_shift(s1, shift)], scramble_keys)
    # key = (m0, m1); call k runs on counter (k, 0, m2, m3) (Skip(k) never carries: k < 2**32).
    full = tf.concat([tf.shape(m0), [calls]], 0)
    k0s = _round_keys(m0[..., None], _WEYL[0], full)
    k1s = _round_keys(m1[..., None], _WEYL[1], full)
    counter = [tf.broadcast_to(tf.constant(np.arange(calls, dtype=np.uint64)), full),
               tf.zeros(full, tf.uint64),
               tf.broadcast_to(m2[..., None], full),
               tf.broadcast_to(m3[..., None], full)]
    return _philox(counter, list(zip(k0s, k1s)))


def _int64_body(seeds: tf.Tensor, calls: int) -> tf.Tensor:
    """int64 [N, 2 * calls]: element 2k + i of a row = w[2i] | w[2i+1] << 32 of call k."""
    w = _raw_words(seeds, calls)
    pairs = tf.bitwise.bitwise_or(tf.stack([w[0], w[2]], axis=-1),
                                  tf.bitwise.left_shift(tf.stack([w[1], w[3]], axis=-1), np.uint64(32)))
    return tf.reshape(tf.bitcast(pairs, tf.int64), [-1, 2 * calls])


def _uniform01_body(seeds: tf.Tensor, calls: int) -> tf.Tensor:
    """float32 [N, 4 * calls] in [0, 1): element 4k + j = Uint32ToFloat(w[j]) of call k."""
    words = tf.stack(_raw_words(seeds, calls), axis=-1)  # [N, calls, 4]
    # 1.mantissa in [1, 2), minus 1: exact (Sterbenz), the same on every host.
    bits = tf.bitwise.bitwise_or(tf.bitwise.bitwise_and(words, np.uint64(0x7FFFFF)), np.uint64(0x3F800000))
    floats = tf.bitcast(tf.cast(bits, tf.uint32), tf.float32) - tf.constant(1.0, tf.float32)
    return tf.reshape(floats, [-1, 4 * calls])


_BODIES = {"int64": _int64_body, "uniform01": _uniform01_body}


@functools.lru_cache(maxsize=None)
def _shared(kind: str, calls: int) -> Callable[[tf.Tensor], tf.Tensor]:
    """One traced `tf.function` per (output kind, generator calls), shared by every site.

    WHY: the Philox body is ~300 integer ops; built inline, each draw site of a
    pipeline re-creates them in Python (most of `build_pipeline`'s time, and a
    bigger graph for tf.data to optimize on every new iterator). Traced once per
    process with a fixed signature, each site becomes one PartitionedCall node and
    the body sits once in the function library. The ops are the same integer math
    as the inline version, so the bits are too (tests/seeds/test_rows.py).
    """
    body = _BODIES[kind]

    def philox_rows(seeds: tf.Tensor) -> tf.Tensor:
        return body(seeds, calls)

    philox_rows.__name__ = f"tfpipe_philox_{kind}_{calls}"  # the library function's name
    # _noinline: inlined, Grappler would paste the body back into every call site
    # and optimize each copy on every new iterator (every epoch); as a call it is
    # instantiated once per iterator. Measured: benchmarks/pipeline_build_bench.py.
    return tf.function(philox_rows, autograph=False,
                       input_signature=[tf.TensorSpec([None, 2], tf.int64)],
                       experimental_attributes={"_noinline": True})


def _draw(kind: str, seeds: tf.Tensor, calls: int) -> tf.Tensor:
    """Seeds [..., 2] -> the shared function's output on their rows flattened: [N, m]."""
    return _shared(kind, calls)(tf.reshape(seeds, [-1, 2]))


def _finish(flat: tf.Tensor, seeds: tf.Tensor, n: int, shape: tuple[int, ...]) -> tf.Tensor:
    """[N, m >= n] -> [..., *shape]: the first n elements of each row, in the seeds' lead shape."""
    lead = tf.shape(seeds)[:-1]
    out = tf.reshape(flat[:, :n], tf.concat([lead, tf.constant(shape, tf.int32)], axis=0))
    out.set_shape(seeds.shape[:-1].concatenate(shape))
    return out


def full_int_rows(seeds: tf.Tensor, shape: Sequence[int]) -> tf.Tensor:
    """int64 [..., *shape]: row i == `stateless_random_uniform_full_int(shape, seeds[i], int64, "philox")`."""
    seeds, shape = _as_seeds(seeds), _static_shape(shape)
    n = math.prod(shape)
    return _finish(_draw("int64", seeds, max(1, -(-n // 2))), seeds, n, shape)


def _uniform01(seeds: tf.Tensor, n: int) -> tf.Tensor:
    return _draw("uniform01", seeds, max(1, -(-n // 4)))


def uniform_rows(seeds: tf.Tensor, shape: Sequence[int], minval: Number = 0.0, maxval: Number = 1.0) -> tf.Tensor:
    """float32 [..., *shape]: row i == `stateless_uniform(shape, seeds[i], minval, maxval, float32, "philox")`.

    `minval` / `maxval` are scalars or tensors of shape `seeds.shape[:-1]` (one range
    per row). The result is `rnd * (maxval - minval) + minval` in float32, the op
    order of TF's wrapper, so it matches bit for bit.
    """
    seeds, shape = _as_seeds(seeds), _static_shape(shape)
    n = math.prod(shape)
    rnd = _finish(_uniform01(seeds, n), seeds, n, shape)
    lo = tf.cast(minval, tf.float32)
    hi = tf.cast(maxval, tf.float32)
    span = hi - lo
    if lo.shape.rank != 0 or hi.shape.rank != 0:
        # Per-row range: trailing 1s so it broadcasts over the row's elements.
        tail = tf.ones([len(shape)], tf.int32)
        lead = tf.shape(seeds)[:-1]
        lo = tf.reshape(tf.broadcast_to(lo, lead), tf.concat([lead, tail], 0))
        span = tf.reshape(tf.broadcast_to(span, lead), tf.concat([lead, tail], 0))
    return rnd * span + lo


def fold_rows(seeds: tf.Tensor, data: Number) -> tf.Tensor:
    """int64 [..., 2]: row i == `stateless_fold_in(seeds[i], int64(data[i]), alg="philox")`.

    `data` is a scalar (the same for every row) or a tensor of shape `seeds.shape[:-1]`.
    """
    seeds = _as_seeds(seeds)
    data = tf.convert_to_tensor(data)
    if data.dtype != tf.int64:
        data = tf.cast(data, tf.int64)
    first = full_int_rows(seeds, ())
    return tf.stack([first, tf.broadcast_to(data, tf.shape(first))], axis=-1)


def split_rows(seeds: tf.Tensor, num: int = 2) -> tf.Tensor:
    """int64 [..., num, 2]: row i == `stateless_split(seeds[i], num, alg="philox")` (int64 seeds)."""
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 1:
        raise ValueError(f"num must be a positive int, got {num!r}")
    return full_int_rows(seeds, (int(num), 2))
