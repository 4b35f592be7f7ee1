"""Stage order in the dataset graph, options, stage prefixes, cache, Keras fit."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.pipeline import STAGES, _block, build_pipeline, build_stages

from .conftest import CLASSES, NUM, base_config
from .helpers import dataset_chain, graph_def

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _index(chain, op_prefix):
    return max(i for i, op in enumerate(chain) if op.startswith(op_prefix))


def test_stage_order_in_graph(dataset, tmp_path):
    cfg = base_config(dataset, **{"pipeline.cache": str(tmp_path / "cache")})
    # one epoch's pipeline (build_stages' last prefix): the order of its stages
    chain = dataset_chain(graph_def(build_stages(cfg)[-1][1]))
    assert chain[0] == "TensorSliceDataset"
    cache = _index(chain, "CacheDataset")
    shuffle = _index(chain, "ShuffleDataset")
    batch = _index(chain, "BatchDataset")
    read = min(i for i, op in enumerate(chain) if "InterleaveDataset" in op)
    decode = min(i for i, op in enumerate(chain) if op.startswith("ParallelMapDataset"))
    # records cached (encoded bytes) before the shuffle and before any random op;
    # the parallel decode/augment map comes after the shuffle, batching after that
    assert read < cache < shuffle < decode < batch, chain
    # build_pipeline: that epoch pipeline runs inside a flat_map over the epoch
    # counter (one element per iteration); the records cache stays outside it,
    # prefetch is last
    g = graph_def(build_pipeline(cfg))
    top = dataset_chain(g)
    assert top[-1] == "PrefetchDataset" and "FlatMapDataset" in top, top
    assert "CacheDatasetV2" in {n.op for n in g.node}
    inner = {n.op for f in g.library.function for n in f.node_def}
    assert {"ShuffleDatasetV3", "ParallelMapDatasetV2"} <= inner
    # eval: no shuffle; each pass runs inside a flat_map (its own iteration id:
    # docs/pipeline.md "Epochs"), the decoded uint8 batches are cached outside it
    # (deterministic) and compose (a parallel map) follows; prefetch is last
    for block, batching in ((False, "BatchDatasetV2"), (True, "RebatchDatasetV2")):
        with _block.forced(block):  # per-element path: samples batched; block path: rebatched
            g = graph_def(build_pipeline(cfg, split="validation"))
        chain = dataset_chain(g)
        inner = {n.op for f in g.library.function for n in f.node_def}
        assert not any(op.startswith("ShuffleDataset") for op in set(chain) | inner), chain
        assert _index(chain, "FlatMapDataset") < _index(chain, "CacheDataset") < \
            _index(chain, "ParallelMapDataset") and chain[-1] == "PrefetchDataset", chain
        assert batching in inner and "CacheDatasetV2" not in inner, (block, inner)


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


def test_build_stages_are_the_pipeline_cut_after_each_stage(dataset):
    """Each prefix computes what the pipeline computes up to that stage: read =
    every record, decode = the fused crop windows, geometry = per-sample uint8,
    batch = those samples batched, pixel = batch + L3 (float, not yet
    normalized), compose = the full epoch (= build_pipeline's batches)."""
    from tfpipe.augment import color

    cfg = base_config(dataset)
    stages = build_stages(cfg)
    assert [name for name, _ in stages] == list(STAGES) == [
        "read", "parse", "decode", "geometry", "batch", "pixel", "compose"]
    got = dict(stages)
    read = list(got["read"])
    assert len(read) == NUM and {int(s) for s, _, _ in read} == {0, 1, 2}
    # until="read": that stream alone (nothing later traced), the same records in order
    (only,) = build_stages(cfg, until="read")
    assert only[0] == "read"
    assert [(int(a), int(b), c.numpy()) for a, b, c in only[1]] == [
        (int(a), int(b), c.numpy()) for a, b, c in read]
    with pytest.raises(ValueError, match="until: must be None or 'read', got 'decode'"):
        build_stages(cfg, until="decode")
    parsed = [p for p in got["parse"].take(4)]
    labels = [int(p["image/class/label"]) for p in parsed]
    assert all(0 <= v < CLASSES for v in labels)
    for crop in got["decode"].take(8):  # the random-resized-crop windows, decoded
        assert crop.dtype == tf.uint8 and crop.shape[-1] == 3
    geometry = [e for e in got["geometry"].take(16)]
    assert geometry[0]["image"].shape == (32, 32, 3) and geometry[0]["image"].dtype == tf.uint8
    batch = [b for b in got["batch"].take(2)]
    for k, b in enumerate(batch):
        np.testing.assert_array_equal(
            b["image"].numpy(), np.stack([g["image"].numpy() for g in geometry[8 * k:8 * k + 8]]))
    pixel = [b for b in got["pixel"].take(2)]
    compose = [b for b in got["compose"]]
    for b, p, c in zip(batch, pixel, compose):
        x = p["image"].numpy()
        assert x.dtype == np.float32 and 0.0 <= x.min() and x.max() <= 1.0
        assert not np.allclose(x, b["image"].numpy() / 255.0, atol=1e-3)  # L3 ran
        np.testing.assert_allclose(color.normalize(x, MEAN, STD).numpy(), c["image"].numpy(),
                                   atol=1e-5)
    live = [b for b in build_pipeline(cfg)]
    assert len(live) == len(compose) == NUM // 8
    for a, b in zip(live, compose):
        np.testing.assert_array_equal(a["image"].numpy(), b["image"].numpy())
        np.testing.assert_array_equal(a["label"].numpy(), b["label"].numpy())


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
