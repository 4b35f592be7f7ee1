"""Stateless seed derivation: global -> epoch -> batch / sample -> op.

Seeds are int64 tensors of shape [2]; see docs/seeds.md for the formulas and the
guarantees (bit-identical batches whatever the parallelism, disjoint workers,
restart at (epoch, step)). `split`, `uniform`, `bernoulli`, `per_seed` are the
draws every random op makes from a seed [2] or rows of seeds [B, 2].
"""

from tfpipe.seeds._derive import (
    ALG,
    BATCH_TAG,
    GLOBAL_TAG,
    OP_TAG,
    SAMPLE_TAG,
    batch_seed,
    batch_stream,
    epoch_seed,
    fold,
    global_index,
    global_seed,
    op_seed,
    sample_seed,
    sample_stream,
)
from tfpipe.seeds._draw import as_seed, bernoulli, per_seed, split, split_pair, uniform
from tfpipe.seeds._rows import fold_rows, full_int_rows, split_rows, uniform_rows

__all__ = [
    "ALG",
    "BATCH_TAG",
    "GLOBAL_TAG",
    "OP_TAG",
    "SAMPLE_TAG",
    "as_seed",
    "batch_seed",
    "batch_stream",
    "bernoulli",
    "epoch_seed",
    "fold",
    "fold_rows",
    "full_int_rows",
    "global_index",
    "global_seed",
    "op_seed",
    "per_seed",
    "sample_seed",
    "sample_stream",
    "split",
    "split_pair",
    "split_rows",
    "uniform",
    "uniform_rows",
]
