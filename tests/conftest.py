"""Suite-wide settings. Each area keeps its fixtures in its own tests/<area>/conftest.py."""

import os
import random
import sys

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _tf_global_seed() -> "int | None":
    if "tensorflow" not in sys.modules:
        return None
    from tensorflow.python.eager import context

    return context.global_seed()


@pytest.fixture(autouse=True)
def _isolated_global_seeds():
    """Global seeds set by one test never reach the next one in the same worker.

    `tf.keras.utils.set_random_seed` (and tf.random.set_seed / np.random.seed /
    random.seed) is process state: a later test's unseeded op would draw the
    same numbers in every build, so a "two builds differ" test passes or fails
    by test order. After each test: Python's and NumPy's legacy generators get
    their state back, TF's global seed is cleared (set_seed(None): unseeded ops
    draw from fresh entropy again) and Keras' global state (its global seed and
    SeedGenerator, layer-name counters) is cleared when the test used Keras.
    """
    py_state = random.getstate()
    np_state = np.random.get_state()
    tf_seed = _tf_global_seed()
    yield
    random.setstate(py_state)
    np.random.set_state(np_state)
    if _tf_global_seed() != tf_seed:
        import tensorflow as tf

        tf.random.set_seed(tf_seed)
    keras_state = sys.modules.get("keras.src.backend.common.global_state")
    if keras_state is not None and vars(keras_state.GLOBAL_STATE_TRACKER):
        import keras

        keras.backend.clear_session(free_memory=False)
