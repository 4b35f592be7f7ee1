"""The autouse fixture in tests/conftest.py: a global seed set by one test does not
leak into the next.

The tests below hand state from one to the next, so they run in their own pytest
session (one process, definition order), with a copy of the suite's conftest.py:
under `-n 2` the outer session could send them to different workers. The same
session without the conftest is expected to fail, which shows the check can fail.

Both inner sessions run in ONE child process (one TensorFlow start-up instead of
two), the conftest one first: it leaves the global seeds as it found them (that
is what it checks), so the session without it starts from a clean state. The two
tests below read their session's result from that one run (`inner`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# both tests read the one child run of the module fixture `inner`
pytestmark = pytest.mark.xdist_group("seed-isolation")

INNER = '''
from __future__ import annotations

import random

import numpy as np
import tensorflow as tf

''' + 'SEEDED: dict[str, object] = {}\n\n\ndef test_a_sets_every_global_seed() -> None:\n    tf.keras.utils.set_random_seed(1234)  # python, numpy, TF and Keras\' own\n    tf.random.set_seed(1234)\n    SEEDED["tf"] = tf.random.uniform([4]).numpy()\n    np.random.seed(1234)\n    SEEDED["np"] = np.random.random(4)\n    random.seed(1234)\n    SEEDED["py"] = [random.random() for _ in range(4)]\n\n\ndef test_b_sees_no_global_seed() -> None:\n    from keras.src.backend.common import global_state\n    from keras.src.utils.rng_utils import GLOBAL_RANDOM_SEED\n    from tensorflow.python.eager import context\n\n    assert SEEDED, "test_a must run first (definition order)"\n    assert context.global_seed() is None\n    assert global_state.get_global_attribute(GLOBAL_RANDOM_SEED) is None\n    # the draws right after seeding in test_a are not what this test gets\n    assert not np.array_equal(np.random.random(4), SEEDED["np"])\n    assert [random.random() for _ in range(4)] != SEEDED["py"]\n    # an unseeded stateful op draws fresh numbers, as in a fresh process\n    tf.random.set_seed(1234)\n    again = tf.random.uniform([4]).numpy()\n    tf.random.set_seed(None)\n    np.testing.assert_array_equal(again, SEEDED["tf"])  # (same seed -> same draws)\n    assert not np.array_equal(tf.random.uniform([4]).numpy(), SEEDED["tf"])\n\n\ndef test_c_seeds_like_a_keras_training_test() -> None:\n    """What tests/pipeline/test_structure.py\'s Keras test does before fit()."""\n    tf.keras.utils.set_random_seed(0)\n\n\ndef test_d_unseeded_pipelines_differ() -> None:\n    """What tests/bench\'s reproducible-check tests need: two builds of a pipeline\n    with an unseeded stateful op differ (they did not after test_c without the fixture)."""\n    def build() -> tf.data.Dataset:\n        return tf.data.Dataset.range(4).map(lambda i: tf.random.uniform([8]))\n\n    a = np.stack(list(build().as_numpy_iterator()))\n    b = np.stack(list(build().as_numpy_iterator()))\n    assert not np.array_equal(a, b)\n'


# One child, two pytest sessions in a row: with the suite's conftest, then without.
CHILD = """
import sys
import pytest
for name in sys.argv[1:]:
    print(f"=== {name}", flush=True)
    rc = pytest.main(["-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-o", "addopts=",
                      "--rootdir", name, name])
    print(f"=== {name} exit {int(rc)}", flush=True)
"""


@pytest.fixture(scope="module")
def inner(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str]]:
    """{"with": (exit code, output), "without": ...} of the inner sessions."""
    root = tmp_path_factory.mktemp("seed-isolation")
    for name, with_conftest in (("with", True), ("without", False)):
        (root / name).mkdir()
        # distinct module names: both sessions import in the same process
        (root / name / f"test_inner_{name}.py").write_text(INNER)
        if with_conftest:
            shutil.copy(Path(__file__).with_name("conftest.py"), root / name / "conftest.py")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    res = subprocess.run([sys.executable, "-c", CHILD, "with", "without"], capture_output=True,
                         text=True, env=env, timeout=300, cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    out = {}
    for name in ("with", "without"):
        part = res.stdout.split(f"=== {name}\n", 1)[1].split(f"=== {name} exit ", 1)
        out[name] = (int(part[1].split()[0]), part[0])
    return out


@pytest.mark.slow
def test_global_seeds_do_not_leak_between_tests(inner) -> None:
    code, output = inner["with"]
    assert code == 0, output[-3000:]
    assert "4 passed" in output, output[-2000:]


@pytest.mark.slow
def test_without_the_fixture_the_seed_leaks(inner) -> None:
    code, output = inner["without"]
    assert code == 1, output[-3000:]
    assert "test_b_sees_no_global_seed" in output and \
        "test_d_unseeded_pipelines_differ" in output, output[-3000:]
