"""Epochs of a train dataset: the seeded shuffle and the per-iteration epoch counter.

Shared by the image pipeline (`_build`, `_pipeline`), the tf.data service client
(`_service`), materialized epochs (`_materialize`) and tables (`_tabular`).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe import seeds
from tfpipe.errors import TfpipeError

SHUFFLE_TAG = 0x73687566  # "shuf": the shuffle seed is its own stream of the epoch seed
# The (seed, seed2) pair of the shuffle op is (SHUFFLE_SEED, word 0 of
# fold(epoch_seed, SHUFFLE_TAG) mod 2**31 - 1). SHUFFLE_SEED is tf.data's own
# default graph seed, so the order is the one `Dataset.shuffle(seed=that word)`
# gives when no global seed is set; we pass both words ourselves so that a user's
# `tf.random.set_seed` / `keras.utils.set_random_seed` cannot change it.
SHUFFLE_SEED = 87654321
_MAXINT32 = 2**31 - 1
TRAIN_SPLITS = ("train",)


def shuffle_seeds(epoch_seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(seed, seed2) of the epoch's shuffle, int64 scalars (tensor epoch seeds too)."""
    word = seeds.fold(epoch_seed, SHUFFLE_TAG)[0]  # fold_in puts the data in word 1
    seed2 = tf.math.floormod(tf.bitwise.bitwise_and(word, tf.constant(2**63 - 1, tf.int64)),
                             tf.constant(_MAXINT32, tf.int64))
    return tf.constant(SHUFFLE_SEED, tf.int64), seed2


def _shuffle(ds: tf.data.Dataset, buffer: int, epoch_seed: tf.Tensor) -> tf.data.Dataset:
    """`ds.shuffle(buffer, reshuffle_each_iteration=False)` with both seed words ours.

    `Dataset.shuffle(seed=...)` mixes in the global seed (`random_seed.get_seed`);
    the op itself takes the pair as inputs, so it is called directly
    (`tf.raw_ops`, then `from_variant`: same op and semantics as `Dataset.shuffle`).
    """
    seed, seed2 = shuffle_seeds(epoch_seed)
    flat = tf.nest.flatten(ds.element_spec)
    variant = tf.raw_ops.ShuffleDatasetV3(
        input_dataset=tf.data.experimental.to_variant(ds),
        buffer_size=tf.constant(buffer, tf.int64), seed=seed, seed2=seed2,
        seed_generator=tf.raw_ops.DummySeedGenerator(),
        output_types=[t.dtype for t in flat], output_shapes=[t.shape for t in flat],
        reshuffle_each_iteration=False)
    return tf.data.experimental.from_variant(variant, ds.element_spec)


class EpochCounter:
    """How many iterations of a train dataset have started (a one-row int64 table).

    `next_epoch(first)` runs once per iteration, inside the dataset: it returns
    `first + n` for the n-th iteration and counts it. A table rather than a
    `tf.Variable`: a variable created under a `tf.distribute` strategy's scope
    would become a distributed variable.
    """

    def __init__(self) -> None:
        with tf.init_scope():
            self.table = tf.lookup.experimental.MutableHashTable(
                key_dtype=tf.int64, value_dtype=tf.int64, default_value=0,
                name="tfpipe_epoch_counter")

    def next_epoch(self, first: tf.Tensor) -> tf.Tensor:
        key = tf.constant([0], tf.int64)
        n = self.table.lookup(key)
        with tf.control_dependencies([self.table.insert(key, n + 1)]):
            return tf.reshape(first + n, [])  # a scalar: the seed functions read the rank

    @property
    def iterations(self) -> int:
        """Iterations started so far (eager)."""
        return int(self.table.lookup(tf.constant([0], tf.int64))[0])


def epochs_from(first: int, per_epoch: Any, counter: EpochCounter | None = None
                ) -> tf.data.Dataset:
    """A dataset whose n-th iteration is `per_epoch(first + n)` (epoch a tensor)."""
    counter = counter or EpochCounter()
    start = tf.data.Dataset.from_tensors(tf.constant(first, tf.int64))
    raised: list[TfpipeError] = []

    # Not converted by AutoGraph: this function builds a whole epoch in Python
    # (reading manifests, os.path calls, config logic); converted, AutoGraph walks
    # all of it and warns about every builtin it cannot transform (isfile, getsize)
    # on each build. Its tensors need no Python control flow.
    @tf.autograph.experimental.do_not_convert
    def epoch_pipeline(e: tf.Tensor) -> tf.data.Dataset:
        try:
            return per_epoch(e)
        except TfpipeError as exc:  # a config error found while tracing
            raised.append(exc)
            raise

    try:
        ds = start.map(tf.autograph.experimental.do_not_convert(counter.next_epoch)
                       ).flat_map(epoch_pipeline)
    except Exception:
        # flat_map traces the function and wraps what it raises (StagingError):
        # the user gets our error, naming the key, not a trace through autograph
        if raised:
            raise raised[0] from None
        raise
    ds._tfpipe_epoch_counter = counter  # noqa: SLF001 - keep the table alive with the dataset
    return ds


shuffle = _shuffle
