"""The autouse fixture in tests/conftest.py: a global seed set by one test does not
leak into the next (pytest runs a file's tests in definition order)."""

from __future__ import annotations

import random

import numpy as np
import tensorflow as tf

SEEDED: dict[str, object] = {}


def test_a_sets_every_global_seed() -> None:
    tf.keras.utils.set_random_seed(1234)  # python, numpy, TF and Keras' own
    tf.random.set_seed(1234)
    SEEDED["tf"] = tf.random.uniform([4]).numpy()
    np.random.seed(1234)
    SEEDED["np"] = np.random.random(4)
    random.seed(1234)
    SEEDED["py"] = [random.random() for _ in range(4)]


def test_b_sees_no_global_seed() -> None:
    from keras.src.backend.common import global_state
    from keras.src.utils.rng_utils import GLOBAL_RANDOM_SEED
    from tensorflow.python.eager import context

    assert SEEDED, "test_a must run first (definition order)"
    assert context.global_seed() is None
    assert global_state.get_global_attribute(GLOBAL_RANDOM_SEED) is None
    # the draws right after seeding in test_a are not what this test gets
    assert not np.array_equal(np.random.random(4), SEEDED["np"])
    assert [random.random() for _ in range(4)] != SEEDED["py"]
    # an unseeded stateful op draws fresh numbers, as in a fresh process
    tf.random.set_seed(1234)
    again = tf.random.uniform([4]).numpy()
    tf.random.set_seed(None)
    np.testing.assert_array_equal(again, SEEDED["tf"])  # (same seed -> same draws)
    assert not np.array_equal(tf.random.uniform([4]).numpy(), SEEDED["tf"])


def test_c_seeds_like_a_keras_training_test() -> None:
    """What tests/pipeline/test_structure.py's Keras test does before fit()."""
    tf.keras.utils.set_random_seed(0)


def test_d_unseeded_pipelines_differ() -> None:
    """What tests/bench's reproducible-check tests need: two builds of a pipeline
    with an unseeded stateful op differ (they did not after test_c without the fixture)."""
    def build() -> tf.data.Dataset:
        return tf.data.Dataset.range(4).map(lambda i: tf.random.uniform([8]))

    a = np.stack(list(build().as_numpy_iterator()))
    b = np.stack(list(build().as_numpy_iterator()))
    assert not np.array_equal(a, b)
