"""The skew test: `preprocess` in a fresh process (no tfpipe) == the eval pipeline's
model input, bit for bit, on real photos of every format a client may send."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.xdist_group("export")

def _graph_ops(ds: tf.data.Dataset) -> set[str]:
    policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    g = tf.compat.v1.GraphDef.FromString(
        ds._as_serialized_graph(external_state_policy=policy).numpy())  # noqa: SLF001
    ops = {n.op for n in g.node}
    for f in g.library.function:
        ops |= {n.op for n in f.node_def}
    return ops


def _eval_inputs(config, n: int) -> tuple[np.ndarray, set[str]]:
    """The eval pipeline's model inputs by sample index (= record order: one shard, no
    shuffle), and its graph's ops."""
    from tfpipe import build_pipeline

    ds = build_pipeline(config, split="val", keep_index=True)
    by_index = {}
    for batch in ds:
        for i, idx in enumerate(batch["index"].numpy()):
            by_index[int(idx)] = batch["image"][i].numpy()
    assert sorted(by_index) == list(range(n))
    return np.stack([by_index[i] for i in range(n)]), _graph_ops(ds)


@pytest.mark.slow
def test_preprocess_in_fresh_process_is_bit_identical_to_eval_pipeline(
        fresh, records, config, photo_bytes, keras_model):
    from tfpipe import native

    names, blobs = records
    want, ops = _eval_inputs(config, len(blobs))
    # the records hold the client's bytes unchanged (the converter keeps originals)
    assert sorted(blobs) == sorted(photo_bytes.values())
    assert {n.split("/")[-1] for n in names} == set(photo_bytes)
    if native.available():  # then the comparison is native kernels vs their pure-TF twins
        assert {"TfpipeResizeBilinearU8", "TfpipeDecodeJpegStrict"} <= ops, ops
    assert fresh["tfpipe_loaded"] is False
    got = fresh["image"]
    assert got.dtype == want.dtype == np.float32
    assert got.shape == want.shape == (len(blobs), 48, 64, 3)
    for i, name in enumerate(names):
        assert np.array_equal(got[i], want[i]), \
            f"{name}: max |diff| {np.abs(got[i] - want[i]).max()}"
    # and serving_default is the model on exactly that input
    np.testing.assert_allclose(fresh["outputs"], keras_model(want, training=False).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_uint8_output_config_exports_the_uint8_batch(config, keras_model, tmp_path,
                                                     photo_bytes):
    """output_dtype uint8: the model input is the uint8 eval batch, no normalize."""
    import keras

    from tfpipe import build_pipeline
    from tfpipe.export import export_serving

    cfg = {**config, "data": {**config["data"], "output_dtype": "uint8"}}
    inp = keras.Input((48, 64, 3), dtype="uint8")
    model = keras.Model(inp, keras.layers.Dense(2)(keras.layers.Flatten()(
        keras.layers.Rescaling(1 / 255)(inp))))
    res = export_serving(cfg, model, tmp_path, warmup=0, serving_config=False)
    assert res.signatures["preprocess"]["outputs"]["image"]["dtype"] == "uint8"
    m = tf.saved_model.load(res.version_dir)
    batch = next(iter(build_pipeline(cfg, split="val", keep_index=True)))
    shard = sorted(__import__("pathlib").Path(cfg["data"]["path"]).glob("val-*.tfrecord"))
    recs = list(tf.data.TFRecordDataset([str(s) for s in shard]).take(3))
    enc = [tf.io.parse_single_example(r, {"image/encoded": tf.io.FixedLenFeature(
        [], tf.string)})["image/encoded"] for r in recs]
    got = m.signatures["preprocess"](image_bytes=tf.stack(enc))["image"].numpy()
    idx = batch["index"].numpy()
    assert np.array_equal(got[idx], batch["image"].numpy())
