"""Signature names, dtypes and shapes: fixed, recorded, and what saved_model_cli shows."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.xdist_group("export")

OUTPUTS = {"outputs": ("float32", [None, 2]), "probabilities": ("float32", [None, 2]),
           "class_ids": ("int64", [None, 2]), "classes": ("string", [None, 2]),
           "scores": ("float32", [None, 2])}


def test_layout_and_signature_table(exported, loaded):
    v = Path(exported.version_dir)
    assert v == Path(exported.out_dir) / "tiny" / "3"
    assert (v / "saved_model.pb").is_file() and (v / "variables").is_dir()
    assert not [p for p in v.parent.iterdir() if p.name.startswith(".tmp")]
    assert sorted(loaded.signatures) == ["predict_preprocessed", "preprocess", "serving_default"]
    for name, fn in loaded.signatures.items():
        ins = {k: (s.dtype.name, s.shape.as_list()) for k, s in
               fn.structured_input_signature[1].items()}
        outs = {k: (s.dtype.name, s.shape.as_list()) for k, s in fn.structured_outputs.items()}
        if name == "preprocess":
            assert ins == {"image_bytes": ("string", [None])}
            assert outs == {"image": ("float32", [None, 48, 64, 3])}
        elif name == "serving_default":
            assert ins == {"image_bytes": ("string", [None])}
            assert outs == OUTPUTS
        else:
            assert ins == {"image": ("float32", [None, 48, 64, 3])}
            assert outs == OUTPUTS
        # what the manifest records is what the SavedModel has
        rec = exported.signatures[name]
        assert {k: (d["dtype"], d["shape"]) for k, d in rec["inputs"].items()} == ins
        assert {k: (d["dtype"], d["shape"]) for k, d in rec["outputs"].items()} == outs


def test_classes_and_scores(loaded, photo_bytes, keras_model):
    data = list(photo_bytes.values())
    out = loaded.signatures["serving_default"](image_bytes=tf.constant(data))
    x = loaded.signatures["preprocess"](image_bytes=tf.constant(data))["image"]
    logits = keras_model(x, training=False).numpy()
    probs = tf.nn.softmax(logits).numpy()
    np.testing.assert_allclose(out["probabilities"].numpy(), probs, rtol=1e-5, atol=1e-6)
    order = np.argsort(-probs, axis=1, kind="stable")
    assert np.array_equal(out["class_ids"].numpy(), order)
    names = np.array([b"cat", b"other"])  # the manifest's class names (folder names)
    assert np.array_equal(out["classes"].numpy(), names[order])
    np.testing.assert_allclose(out["scores"].numpy(), np.take_along_axis(probs, order, 1),
                               rtol=1e-5, atol=1e-6)
    # predict_preprocessed(preprocess(x)) == serving_default(x)
    again = loaded.signatures["predict_preprocessed"](image=x)
    for k in OUTPUTS:
        assert np.array_equal(again[k].numpy(), out[k].numpy()), k


@pytest.mark.slow  # starts the fresh process (conftest.fresh) when run alone
def test_saved_model_cli_shows_the_signatures(fresh):
    """`saved_model_cli show --all` (its console script's main, run in the fresh
    process of conftest.fresh) lists every signature with these names and types."""
    text = fresh["cli"]
    blocks = dict(re.findall(r"signature_def\['(\w+)'\]:\n(.*?)(?=\nsignature_def|\n\n|\Z)",
                             text, re.S))
    assert {"serving_default", "preprocess", "predict_preprocessed"} <= set(blocks)

    def tensors(block: str, kind: str) -> dict[str, tuple[str, str]]:
        part = block.split(f"The given SavedModel SignatureDef contains the following {kind}")[1]
        if kind == "input(s):":
            part = part.split("The given SavedModel SignatureDef contains the following output")[0]
        return {m[0]: (m[1], m[2]) for m in re.findall(
            r"\['(\w+)'\] tensor_info:\s+dtype: (\w+)\s+shape: ([^\n]+)", part)}

    sd = blocks["serving_default"]
    assert tensors(sd, "input(s):") == {"image_bytes": ("DT_STRING", "(-1)")}
    assert tensors(sd, "output(s):") == {
        "outputs": ("DT_FLOAT", "(-1, 2)"), "probabilities": ("DT_FLOAT", "(-1, 2)"),
        "class_ids": ("DT_INT64", "(-1, 2)"), "classes": ("DT_STRING", "(-1, 2)"),
        "scores": ("DT_FLOAT", "(-1, 2)")}
    assert tensors(blocks["preprocess"], "output(s):") == {
        "image": ("DT_FLOAT", "(-1, 48, 64, 3)")}
    assert tensors(blocks["predict_preprocessed"], "input(s):") == {
        "image": ("DT_FLOAT", "(-1, 48, 64, 3)")}


def test_graph_has_only_stock_ops(exported):
    """No tfpipe native kernel in the serving graph (TF Serving could not load it)."""
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel.FromString(
        (Path(exported.version_dir) / "saved_model.pb").read_bytes())
    ops = set()
    for mg in sm.meta_graphs:
        ops |= {n.op for n in mg.graph_def.node}
        for f in mg.graph_def.library.function:
            ops |= {n.op for n in f.node_def}
    assert not [o for o in ops if o.startswith("Tfpipe")]
    # the eval decode options: TF's default dct_method (""), as the pipeline's ops
    for mg in sm.meta_graphs:
        for f in mg.graph_def.library.function:
            for n in f.node_def:
                if n.op == "DecodeAndCropJpeg":
                    assert n.attr["dct_method"].s == b""
                    assert n.attr["channels"].i == 3
                # preprocessing pinned to the CPU, where tf.data runs the eval pipeline
                if n.op in ("DecodeAndCropJpeg", "DecodeImage", "ResizeBilinear"):
                    assert n.device == "/device:CPU:0", (f.signature.name, n.op, n.device)


def test_export_refuses_existing_version_and_bad_names(config, keras_model, exported):
    from tfpipe.errors import ConfigError
    from tfpipe.export import ExportError, export_serving

    with pytest.raises(ExportError, match="exists"):
        export_serving(config, keras_model, exported.out_dir, version=3, model_name="tiny")
    with pytest.raises(ConfigError, match="model_name"):
        export_serving(config, keras_model, exported.out_dir, model_name="a b")
    with pytest.raises(ConfigError, match="version"):
        export_serving(config, keras_model, exported.out_dir, version=0)
    wrong = {**config, "data": {**config["data"], "image_size": [64, 48]}}
    with pytest.raises(ExportError, match=r"the model takes \(48, 64, 3\), the config's "
                                          r"pipeline yields \(64, 48, 3\)"):
        export_serving(wrong, keras_model, exported.out_dir, version=9)
