"""--tflite: the converter's report of what needs Select TF ops / does not convert,
and the TFLite interpreter's answer against the SavedModel's on the sample photos."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.xdist_group("export")


@pytest.mark.slow
def test_tflite_report(exported, photo_bytes, tmp_path, keras_model, config):
    from tfpipe.export import tflite_report, tflite_text

    images = list(photo_bytes.values())
    from tfpipe.export import ServingModule
    from tfpipe.pipeline.serving import eval_preprocessing

    variant = ServingModule(keras_model, eval_preprocessing(config), ["cat", "other"], 2,
                            "logits", crop_in_decoder=False)
    rep = tflite_report(exported.version_dir, images, (48, 64), write_dir=str(tmp_path),
                        variant=variant)
    json.dumps(rep)
    assert rep["images"] == len(images)
    b = rep["builtins_only"]
    assert b["converted"] is False
    # the decoders and string ops need the Flex delegate; the JPEG header read has none
    assert {"DecodeAndCropJpeg", "DecodeImage", "Substr"} <= set(b["needs_select_tf_ops"])
    assert "ExtractJpegShape" in b["no_tflite_kernel"]
    full = rep["serving_default"]
    if full["converted"]:  # a later TF whose Flex allowlist has ExtractJpegShape
        assert full["max_abs_diff"]["probabilities"] < 1e-4
    else:
        # the header read, and the per-image DCT-scale switch (data.dct_scaling)
        assert full["not_convertible"] == ["ExtractJpegShape", "StatelessCase"]
    var = rep["whole_graph_variant"]
    assert var["converted"] and "ExtractJpegShape" not in var["needs_select_tf_ops"]
    assert "DecodeImage" in var["needs_select_tf_ops"]
    if "max_abs_diff" in var:  # an interpreter with the Flex delegate
        assert var["max_abs_diff"]["probabilities"] < 0.05
    else:
        assert var["flex_delegate_missing"], var
    mo = rep["model_only"]
    assert mo["converted"] and mo["same_classes"]
    assert 0 <= mo["max_abs_diff"]["outputs"] < 1e-4
    # an independent run of the written .tflite file on the SavedModel's preprocess output
    x = tf.saved_model.load(exported.version_dir).signatures["preprocess"](
        image_bytes=tf.constant(images))["image"].numpy()
    interp = tf.lite.Interpreter(model_path=mo["file"])
    got = interp.get_signature_runner()(image=x)["outputs"]
    want = tf.saved_model.load(exported.version_dir).signatures["predict_preprocessed"](
        image=tf.constant(x))["outputs"].numpy()
    assert np.abs(got - want).max() == pytest.approx(mo["max_abs_diff"]["outputs"], abs=1e-7)
    text = tflite_text(rep)
    assert "needs Select TF ops: " in text and "ExtractJpegShape" in text
