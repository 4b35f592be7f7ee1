"""Seed derivation: global -> epoch -> {batch, sample} -> op.

Every seed is an int64 tensor of shape [2], the form `tf.random.stateless_*`
and `tf.image.stateless_*` take. Each step is one
`tf.random.experimental.stateless_fold_in` (Philox, pinned so the result never
depends on the device), so the derivation runs as graph ops inside
`tf.data.Dataset.map` and `tf.function` with tensor indices.

`stateless_fold_in(seed, d)` returns `[h(seed), d]`: the data is copied into the
second word. Folding the same index into the same parent therefore gives the
same seed, which is why batch and sample streams first fold in a distinct
domain tag: `batch_seed(e, k) != sample_seed(e, k)`. docs/seeds.md states the
exact formulas.
"""

from __future__ import annotations

from typing import Union

import tensorflow as tf

from tfpipe.seeds._rows import fold_rows

# Pinned, not "auto_select": auto_select may choose a different generator on
# another device type, which would break "same seed -> same batches anywhere".
ALG = "philox"

# Domain tags (ASCII of the stream name, so they are recognisable in a dump).
GLOBAL_TAG = 0x7466706970650000  # "tfpipe\0\0": first word of the global seed
BATCH_TAG = 0x6261746368  # "batch"
SAMPLE_TAG = 0x73616D706C65  # "sample"
OP_TAG = 0x6F70  # "op"

SeedLike = Union[tf.Tensor, "list[int]", "tuple[int, int]"]
IndexLike = Union[int, tf.Tensor]

_MAX_SEED = 2**63 - 1


def _as_seed(seed: SeedLike) -> tf.Tensor:
    seed = tf.convert_to_tensor(seed)
    if seed.dtype != tf.int64:
        seed = tf.cast(seed, tf.int64)
    return seed


def _as_index(value: IndexLike) -> tf.Tensor:
    value = tf.convert_to_tensor(value)
    if value.dtype != tf.int64:
        # fold_in copies the data dtype into the new seed: keep it int64.
        value = tf.cast(value, tf.int64)
    return value


def fold(seed: SeedLike, data: IndexLike) -> tf.Tensor:
    """One derivation step: `stateless_fold_in(seed, int64(data))` with Philox.

    Also vectorized: seeds `[n, 2]` (rows) and/or data `[n]` give `[n, 2]`, row i
    bit-identical to folding row i alone (`fold_rows`), so a whole block of
    samples derives its seeds with the same calls as one sample.
    """
    seed, data = _as_seed(seed), _as_index(data)
    if seed.shape.rank == 1 and data.shape.rank == 0:
        return tf.random.experimental.stateless_fold_in(seed, data, alg=ALG)
    if seed.shape.rank == 1:
        seed = tf.tile(seed[None], [tf.shape(data)[0], 1])
    return fold_rows(seed, data)


def global_seed(seed: int | tf.Tensor) -> tf.Tensor:
    """The root seed `[GLOBAL_TAG, seed]` (int64 [2]) for the config's integer seed."""
    if isinstance(seed, bool):
        raise TypeError(f"seed must be an integer in [0, 2**63 - 1], got {seed!r}")
    if isinstance(seed, int):
        if not 0 <= seed <= _MAX_SEED:
            raise ValueError(f"seed must be an integer in [0, 2**63 - 1], got {seed}")
        return tf.constant([GLOBAL_TAG, seed], dtype=tf.int64)
    seed = _as_index(seed)
    return tf.stack([tf.constant(GLOBAL_TAG, tf.int64), seed])


def epoch_seed(global_seed: SeedLike, epoch: IndexLike) -> tf.Tensor:
    """`fold_in(global_seed, epoch)`: a different stream for every epoch."""
    return fold(global_seed, epoch)


def batch_stream(epoch_seed: SeedLike) -> tf.Tensor:
    """`fold_in(epoch_seed, BATCH_TAG)`: parent of every batch seed of an epoch."""
    return fold(epoch_seed, BATCH_TAG)


def sample_stream(epoch_seed: SeedLike) -> tf.Tensor:
    """`fold_in(epoch_seed, SAMPLE_TAG)`: parent of every sample seed of an epoch."""
    return fold(epoch_seed, SAMPLE_TAG)


def batch_seed(epoch_seed: SeedLike, global_batch_index: IndexLike) -> tf.Tensor:
    """Seed of one global batch (L4 ops, augment.enable_rate)."""
    return fold(batch_stream(epoch_seed), global_batch_index)


def sample_seed(epoch_seed: SeedLike, global_sample_index: IndexLike) -> tf.Tensor:
    """Seed of one sample, keyed by its global index (L2/L3 ops)."""
    return fold(sample_stream(epoch_seed), global_sample_index)


def op_seed(seed: SeedLike, op_index: IndexLike) -> tf.Tensor:
    """Seed of the `op_index`-th op (or draw) under a sample or batch seed."""
    return fold(fold(seed, OP_TAG), op_index)


def global_index(local_index: IndexLike, worker_index: IndexLike, num_workers: IndexLike) -> tf.Tensor:
    """`local_index * num_workers + worker_index` (int64).

    Worker identity enters the seeds through this index: worker w's samples take
    the residues w mod num_workers, so two workers never share a sample seed.
    """
    return _as_index(local_index) * _as_index(num_workers) + _as_index(worker_index)
