"""Stage order in the dataset graph, options, stage prefixes, cache, Keras fit."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfpipe.pipeline import STAGES, build_pipeline, build_stages

from .conftest import CLASSES, base_config
from .helpers import dataset_chain, graph_def


def _index(chain, op_prefix):
    return max(i for i, op in enumerate(chain) if op.startswith(op_prefix))


def test_stage_order_in_graph(dataset, tmp_path):
    cfg = base_config(dataset, **{"pipeline.cache": str(tmp_path / "cache")})
    chain = dataset_chain(graph_def(build_pipeline(cfg)))
    assert chain[-1] == "PrefetchDataset", chain
    assert chain[0] == "TensorSliceDataset"
    cache = _index(chain, "CacheDataset")
    shuffle = _index(chain, "ShuffleDataset")
    batch = _index(chain, "BatchDataset")
    read = min(i for i, op in enumerate(chain) if "InterleaveDataset" in op)
    decode = min(i for i, op in enumerate(chain) if op.startswith("ParallelMapDataset"))
    # records cached (encoded bytes) before the shuffle and before any random op;
    # the parallel decode/augment map comes after the shuffle, batching after that
    assert read < cache < shuffle < decode < batch, chain
    # eval: decoded images cached (deterministic), no shuffle
    chain = dataset_chain(graph_def(build_pipeline(cfg, split="validation")))
    assert not any(op.startswith("ShuffleDataset") for op in chain)
    assert _index(chain, "CacheDataset") < _index(chain, "BatchDataset") and \
        chain[-1] == "PrefetchDataset"


def test_cache_dir_reproduces_and_options(dataset, tmp_path):
    cfg = base_config(dataset, **{"pipeline.cache": str(tmp_path / "c"),
                                  "pipeline.private_threadpool": 2,
                                  "pipeline.ram_budget_mb": 256})
    ds = build_pipeline(cfg, split="validation")
    opts = ds.options()
    assert opts.threading.private_threadpool_size == 2
    assert opts.autotune.ram_budget == 256 << 20 and opts.deterministic
    first = [b["image"].numpy() for b in ds]
    assert any(p.name.startswith("validation-decoded") for p in (tmp_path / "c").iterdir())
    second = [b["image"].numpy() for b in build_pipeline(cfg, split="validation")]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def test_build_stages_prefixes_all_countable(dataset):
    stages = build_stages(base_config(dataset))
    assert [name for name, _ in stages] == list(STAGES)
    for name, ds in stages:
        assert next(iter(ds.take(1))) is not None, name


def test_keras_model_trains_one_epoch(dataset):
    tf.keras.utils.set_random_seed(0)
    ds = build_pipeline(base_config(dataset), as_supervised=True)
    model = tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)),
        tf.keras.layers.Conv2D(4, 3, strides=2, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(CLASSES),
    ])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(ds, epochs=1, verbose=0)
    assert np.isfinite(hist.history["loss"][0])


def test_prefetch_to_device_falls_back_on_cpu_only_host(dataset, caplog):
    if tf.config.list_logical_devices("GPU"):
        import pytest

        pytest.skip("a GPU is present: prefetch_to_device is really used")
    ds = build_pipeline(base_config(dataset, **{"pipeline.prefetch_to_device": "/gpu:0"}))
    assert dataset_chain(graph_def(ds))[-1] == "PrefetchDataset"
    assert "no such device" in caplog.text
