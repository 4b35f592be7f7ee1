"""tfpipe.export: the eval preprocessing carried into a SavedModel for TF Serving.

`export_serving(config, model, out_dir, version)` writes
`out_dir/<model_name>/<version>/` with three signatures (docs/serving.md):

    serving_default(image_bytes: tf.string [None])
        -> outputs, probabilities, class_ids, classes, scores
    preprocess(image_bytes)  -> image: the model input [None, H, W, C]
    predict_preprocessed(image) -> as serving_default

(a segmentation config: serving_default -> class_map at each request image's
size, image_size, window, scores, model_class_map; export/_segment.py; a
detection config: -> boxes and keypoints in each request image's pixels,
classes, class_names, scores, num_detections, image_size, instance_masks;
export/_detect.py)
plus TF Serving's models.config, batching parameters and warm-up requests,
and an SHA-256 manifest checked by `verify_export` (`tfpipe verify`).
"""

from __future__ import annotations

import importlib
from typing import Any

# The manifest check needs no TensorFlow (`tfpipe verify` on a dataset stays light);
# everything else loads on first use.
from tfpipe.export._manifest import MANIFEST, ExportVerifyReport, is_export, verify_export

_LAZY: dict[str, tuple[str, str]] = {
    "INPUT_PROBLEMS": ("tfpipe.export._inputs", "PROBLEMS"),
    **{n: ("tfpipe.export._rest", n) for n in (
        "RestBodyError", "decode_rest_body", "rest_predict", "rest_predict_body",
        "rest_response")},
    **{n: ("tfpipe.export._saved", n) for n in (
        "INPUT_BYTES", "INPUT_IMAGE", "OUTPUT_NAMES", "SIGNATURE_NAMES", "ExportError",
        "ExportResult", "ServingModule", "export_serving", "sample_images", "signatures_of")},
    **{n: ("tfpipe.export._serving_files", n) for n in (
        "BATCHING_FILE", "MAX_WARMUP", "MODELS_CONFIG", "PER_MODEL_BATCHING", "WARMUP_DIR",
        "WARMUP_FILE", "BatchingParameters", "ModelEntry", "ServingFileError",
        "check_batching_file", "check_models_config", "models_config_text", "parse_batching",
        "read_warmup", "warmup_records")},
    **{n: ("tfpipe.export._detect", n) for n in ("DetectServingModule",)},
    **{n: ("tfpipe.export._masks", n) for n in ("paste_instance_masks",)},
    **{n: ("tfpipe.export._segment", n) for n in ("SegmentServingModule",
                                                   "class_map_at_size")},
    **{n: ("tfpipe.export._tflite", n) for n in ("tflite_report", "tflite_text")},
    **{n: ("tfpipe.export._tabular", n) for n in ("TabularServingModule", "tabular_request")},
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'tfpipe.export' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


__all__ = [
    "BATCHING_FILE", "DetectServingModule", "INPUT_BYTES", "INPUT_IMAGE", "INPUT_PROBLEMS",
    "MANIFEST", "MAX_WARMUP",
    "MODELS_CONFIG", "OUTPUT_NAMES", "PER_MODEL_BATCHING", "SIGNATURE_NAMES", "WARMUP_DIR",
    "WARMUP_FILE", "BatchingParameters", "ExportError", "ExportResult", "ExportVerifyReport",
    "ModelEntry", "RestBodyError", "ServingFileError", "ServingModule", "check_batching_file",
    "check_models_config", "decode_rest_body", "export_serving", "is_export",
    "models_config_text", "parse_batching", "paste_instance_masks", "read_warmup",
    "rest_predict", "rest_predict_body",
    "rest_response", "sample_images", "SegmentServingModule", "class_map_at_size",
    "signatures_of", "tabular_request", "TabularServingModule",
    "tflite_report", "tflite_text",
    "verify_export", "warmup_records",
]
