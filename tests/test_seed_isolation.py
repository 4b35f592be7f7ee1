"""The autouse fixture in tests/conftest.py: a global seed set by one test does not
leak into the next.

The tests below hand state from one to the next, so they run in their own pytest
session (one process, definition order), with a copy of the suite's conftest.py:
under `-n 2` the outer session could send them to different workers. The same
session without the conftest is expected to fail, which shows the check can fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

INNER = '''
from __future__ import annotations

import random

import numpy as np
import tensorflow as tf

''' + 'SEEDED: dict[str, object] = {}\n\n\ndef test_a_sets_every_global_seed() -> None:\n    tf.keras.utils.set_random_seed(1234)  # python, numpy, TF and Keras\' own\n    tf.random.set_seed(1234)\n    SEEDED["tf"] = tf.random.uniform([4]).numpy()\n    np.random.seed(1234)\n    SEEDED["np"] = np.random.random(4)\n    random.seed(1234)\n    SEEDED["py"] = [random.random() for _ in range(4)]\n\n\ndef test_b_sees_no_global_seed() -> None:\n    from keras.src.backend.common import global_state\n    from keras.src.utils.rng_utils import GLOBAL_RANDOM_SEED\n    from tensorflow.python.eager import context\n\n    assert SEEDED, "test_a must run first (definition order)"\n    assert context.global_seed() is None\n    assert global_state.get_global_attribute(GLOBAL_RANDOM_SEED) is None\n    # the draws right after seeding in test_a are not what this test gets\n    assert not np.array_equal(np.random.random(4), SEEDED["np"])\n    assert [random.random() for _ in range(4)] != SEEDED["py"]\n    # an unseeded stateful op draws fresh numbers, as in a fresh process\n    tf.random.set_seed(1234)\n    again = tf.random.uniform([4]).numpy()\n    tf.random.set_seed(None)\n    np.testing.assert_array_equal(again, SEEDED["tf"])  # (same seed -> same draws)\n    assert not np.array_equal(tf.random.uniform([4]).numpy(), SEEDED["tf"])\n\n\ndef test_c_seeds_like_a_keras_training_test() -> None:\n    """What tests/pipeline/test_structure.py\'s Keras test does before fit()."""\n    tf.keras.utils.set_random_seed(0)\n\n\ndef test_d_unseeded_pipelines_differ() -> None:\n    """What tests/bench\'s reproducible-check tests need: two builds of a pipeline\n    with an unseeded stateful op differ (they did not after test_c without the fixture)."""\n    def build() -> tf.data.Dataset:\n        return tf.data.Dataset.range(4).map(lambda i: tf.random.uniform([8]))\n\n    a = np.stack(list(build().as_numpy_iterator()))\n    b = np.stack(list(build().as_numpy_iterator()))\n    assert not np.array_equal(a, b)\n'


def _run_inner(tmp_path: Path, with_conftest: bool) -> subprocess.CompletedProcess:
    (tmp_path / "test_inner.py").write_text(INNER)
    if with_conftest:
        shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
         "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)


@pytest.mark.slow
def test_global_seeds_do_not_leak_between_tests(tmp_path: Path) -> None:
    res = _run_inner(tmp_path, with_conftest=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "4 passed" in res.stdout, res.stdout[-2000:]


@pytest.mark.slow
def test_without_the_fixture_the_seed_leaks(tmp_path: Path) -> None:
    res = _run_inner(tmp_path, with_conftest=False)
    assert res.returncode == 1, res.stdout[-3000:]
    assert "test_b_sees_no_global_seed" in res.stdout and \
        "test_d_unseeded_pipelines_differ" in res.stdout, res.stdout[-3000:]
