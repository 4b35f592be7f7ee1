"""Suite-wide settings. Each area keeps its fixtures in its own tests/<area>/conftest.py.

Under xdist (`make test`: `-n 2 --dist loadgroup --no-loadscope-reorder`) the
workers run the collected tests longest-module-first, from the committed
serial times in tests/durations.json (README.md, "Test suite time"): a long
module started last would leave the other worker idle at the end.
"""

import json
import os
import random
import sys
from pathlib import Path

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


# ------------------------------------------------------------------ xdist order
DURATIONS = Path(__file__).with_name("durations.json")


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers this mark; declared here too for `-p no:xdist` runs
    config.addinivalue_line("markers", "xdist_group(name): run on one xdist worker")
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", default=None):
        _graph_optimizer_off()  # in the processes that run tests (not xdist's controller)


def _graph_optimizer_off() -> None:
    """TF's graph optimizer (grappler) off in this test process.

    Grappler optimizes every multi-device tf.data function each time it is
    instantiated: at every build and again for each epoch's datasets; this suite
    builds thousands of short pipelines (tests/pipeline/test_cardinality.py, quiet
    host, serial: 46.6 s with it, 34.6 s without). tfpipe's bytes do not depend on it: tests/pipeline/
    test_host_independence.py runs the presets' pipelines in fresh processes with
    it on (TF's default) and off and requires the same bytes, and every child
    process a test starts (fresh-process, resume, serving, training tests) keeps
    TF's default. Set before the first op: the eager context reads it once."""
    import tensorflow as tf

    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})


@pytest.fixture
def graph_optimizer_on():
    """TF's default (Grappler on) for one test: for tests that compare a model's
    output in this process with a fresh process's, since Grappler fuses a model's
    MatMul + BiasAdd + Relu (other last bits). Function calls read it per call."""
    import tensorflow as tf

    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})
    yield
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})


def _unit(item: pytest.Item) -> str:
    """What xdist's loadgroup schedules as one piece: the group, else the test."""
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")})
    return "group:" + "_".join(names) if names else item.nodeid


def longest_first(items: list, seconds: dict[str, float]) -> list:
    """`items` reordered: modules (and xdist groups, as one piece each) by their
    recorded serial seconds, longest first; ties and unlisted modules keep the
    collection order, and so do the tests inside a module (its module-scoped
    fixtures are built once per worker, not again for every interleaved test)."""
    def module(item) -> str:
        return item.nodeid.split("::")[0]

    weight: dict[str, float] = {}  # a group weighs what its modules weigh together
    group_modules: dict[str, set[str]] = {}
    for item in items:
        unit = _unit(item)
        if unit.startswith("group:"):
            group_modules.setdefault(unit, set()).add(module(item))
    for unit, mods in group_modules.items():
        weight[unit] = sum(seconds.get(m, 0.0) for m in mods)
    first: dict[str, int] = {}
    for k, item in enumerate(items):
        unit = _unit(item)
        key = unit if unit.startswith("group:") else module(item)
        first.setdefault(key, k)
        weight.setdefault(key, seconds.get(module(item), 0.0))
    order = sorted(first, key=lambda key: (-weight[key], first[key]))
    rank = {key: r for r, key in enumerate(order)}

    def piece(item) -> str:
        unit = _unit(item)
        return unit if unit.startswith("group:") else module(item)

    return sorted(items, key=lambda it: rank[piece(it)])  # stable: the order within


def _pin_groups(items: list) -> None:
    """Give each xdist_group test the `@group` suffix the loadgroup scheduler reads.

    pytest-xdist 3.8 writes the suffix to `item._nodeid`, which pytest 9.2 no longer
    reads (`nodeid` comes from `item._id`): every xdist_group mark was silently
    ignored, and a group's session/module fixtures were built on both workers.
    Until xdist catches up, write it where pytest reads it (a no-op once it does).
    """
    try:
        from _pytest.nodeid import NodeId  # pytest >= 9.2
    except ImportError:  # older pytest reads item._nodeid: xdist's own suffix works
        return
    for item in items:
        unit = _unit(item)
        if not unit.startswith("group:"):
            continue
        suffix = "@" + unit[len("group:"):]
        if not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)


@pytest.hookimpl(trylast=True)  # after xdist's own renaming attempt
def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """On xdist workers only (a serial run keeps the file order and plain ids):
    longest first, and the xdist_group suffixes. Deterministic: every worker
    reads the same committed file and the same collection."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if DURATIONS.is_file():
        seconds = json.loads(DURATIONS.read_text(encoding="utf-8"))["modules"]
        items[:] = longest_first(items, seconds)
    if config.getoption("loadgroup", default=False):  # unknown under -p no:xdist
        _pin_groups(items)
