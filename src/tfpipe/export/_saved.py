"""`export_serving`: a SavedModel whose signatures carry the eval preprocessing.

Layout (docs/serving.md):

    OUT/models.config                      (serving_config=True)
    OUT/batching_parameters.txt            (serving_config=True)
    OUT/export_manifest.json               (SHA-256 of the two above)
    OUT/<model_name>/<version>/saved_model.pb, variables/, fingerprint.pb
    OUT/<model_name>/<version>/assets.extra/tf_serving_warmup_requests  (warmup > 0)
    OUT/<model_name>/<version>/batching_params.pbtxt   (per_model_batching=True)
    OUT/<model_name>/<version>/export_manifest.json    (SHA-256 of every file above it)

The version directory is written under a temporary name beside it and renamed
when complete: TF Serving polls base_path for numeric directories and would
otherwise load a half-written model.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence

import tensorflow as tf

from tfpipe._version import __version__
from tfpipe.errors import ConfigError
from tfpipe.export import _detect, _inputs, _manifest, _segment
from tfpipe.export import _serving_files as sf
from tfpipe.export._files import (  # noqa: F401 - also this module's names
    ExportError, ExportResult, _custom_ops, _load_model, _spec, save_for_serving,
    signature_table, staged_version, write_serving_files)
from tfpipe.pipeline.serving import EvalPreprocessing, class_names, eval_preprocessing

INPUT_BYTES = "image_bytes"
INPUT_IMAGE = "image"
OUTPUT_NAMES = ("outputs", "probabilities", "class_ids", "classes", "scores")
SIGNATURE_NAMES = ("serving_default", "preprocess", "predict_preprocessed")


def _ends_in_softmax(model: Any) -> bool:
    layers = getattr(model, "layers", None) or []
    act = getattr(layers[-1], "activation", None) if layers else None
    return getattr(act, "__name__", "") == "softmax"


class ServingModule(tf.Module):
    """The three signatures over one model (exported with tf.saved_model.save)."""

    def __init__(self, model: Any, pre: EvalPreprocessing, names: Sequence[str],
                 top_k: int, outputs_are: str, crop_in_decoder: bool = True) -> None:
        super().__init__(name="tfpipe_serving")
        self.model = model
        self._pre = pre
        h, w = pre.image_size
        self._image_spec = tf.TensorSpec([None, h, w, pre.channels], pre.dtype, name=INPUT_IMAGE)
        self._names = list(names)
        self._top_k = top_k
        self._softmax = outputs_are == "logits"
        self._crop_in_decoder = crop_in_decoder  # False: the TFLite variant only
        bytes_spec = tf.TensorSpec([None], tf.string, name=INPUT_BYTES)
        self.preprocess = tf.function(self._preprocess, input_signature=[bytes_spec])
        self.predict_preprocessed = tf.function(self._predict, input_signature=[self._image_spec])
        self.serving_default = tf.function(self._serve, input_signature=[bytes_spec])

    def _model_input(self, image_bytes: tf.Tensor) -> tf.Tensor:
        # On the CPU, pinned in the graph: tf.data runs the eval pipeline there, so a
        # GPU server computes the same bits with the same kernels (a GPU resize need
        # not round alike); the decoders are CPU-only anyway.
        with tf.device("/device:CPU:0"):
            with tf.control_dependencies([_inputs.check_images(image_bytes)]):
                image_bytes = tf.identity(image_bytes)
            h, w = self._pre.image_size
            images = tf.map_fn(
                lambda b: self._pre.image(b, crop_in_decoder=self._crop_in_decoder),
                image_bytes, fn_output_signature=tf.TensorSpec([h, w, self._pre.channels],
                                                               tf.uint8))
            return tf.ensure_shape(self._pre.finish(images), self._image_spec.shape)

    def _preprocess(self, image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
        return {INPUT_IMAGE: self._model_input(image_bytes)}

    def _outputs(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
        y = self.model(x, training=False)
        if isinstance(y, (dict, list, tuple)):
            raise ExportError("the model must return one [batch, num_classes] tensor, got "
                              f"{type(y).__name__}")
        y = tf.cast(y, tf.float32)
        if y.shape.rank != 2:
            raise ExportError(f"the model must return [batch, num_classes], got shape {y.shape}")
        probs = tf.nn.softmax(y, axis=-1) if self._softmax else y
        k = min(self._top_k, int(y.shape[-1]))
        scores, ids = tf.math.top_k(probs, k=k)
        ids = tf.cast(ids, tf.int64)
        n = int(y.shape[-1])
        names = self._names if len(self._names) == n else [str(i) for i in range(n)]
        classes = tf.gather(tf.constant(names), ids)
        return {"outputs": y, "probabilities": probs, "class_ids": ids, "classes": classes,
                "scores": scores}

    def _predict(self, image: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._outputs(image)

    def _serve(self, image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._outputs(self._model_input(image_bytes))

    def signatures(self) -> dict[str, Any]:
        return {"serving_default": self.serving_default.get_concrete_function(),
                "preprocess": self.preprocess.get_concrete_function(),
                "predict_preprocessed": self.predict_preprocessed.get_concrete_function()}


def _check_model_input(model: Any, pre: EvalPreprocessing) -> None:
    """The model must take what the eval pipeline yields: [B, H, W, C] of its dtype."""
    inputs = getattr(model, "inputs", None)
    if not inputs or len(inputs) != 1:
        return  # a subclassed model without a build signature: its call decides
    shape = tuple(inputs[0].shape[1:])
    want = (*pre.image_size, pre.channels)
    if len(shape) != 3 or any(d is not None and d != w for d, w in zip(shape, want)):
        raise ExportError(f"the model takes {shape}, the config's pipeline yields {want} "
                          "(data.image_size + data.channels); export with the config the "
                          "model was trained on")


def sample_images(image_size: tuple[int, int], n: int = 4) -> list[bytes]:
    """Deterministic JPEGs (smooth colour fields) for warm-up requests and the
    TFLite check when no images are given: warm-up only has to run every shape."""
    import numpy as np

    h, w = int(image_size[0] * 1.25), int(image_size[1] * 1.25)
    yy, xx = np.mgrid[0:h, 0:w]
    out = []
    for i in range(n):
        img = np.stack([(xx * (i + 1) * 255 // w) % 256, (yy * 255 // h),
                        ((xx + yy) * 128 // (h + w) + 64 * i) % 256], -1).astype(np.uint8)
        out.append(tf.io.encode_jpeg(img, quality=90).numpy())
    return out


def export_serving(config: Any, model: Any, out_dir: str | os.PathLike[str], version: int = 1,
                   *, model_name: str = "model", top_k: int = 5, outputs_are: str = "auto",
                   serving_config: bool = True, warmup: int = 10,
                   batching: sf.BatchingParameters | None = None,
                   per_model_batching: bool = False, base_path: str | None = None,
                   images: Sequence[bytes] | None = None, tflite: bool = False,
                   overwrite: bool = False) -> ExportResult:
    """Export `model` (Keras model or .keras path) with `config`'s eval preprocessing.

    outputs_are: "logits" (softmax applied for probabilities/scores),
    "probabilities" (used as is) or "auto" (probabilities when the last layer's
    activation is softmax). warmup: number of PredictionLog warm-up records (0:
    none). batching: TF Serving batching (default `BatchingParameters()`);
    written as batching_parameters.txt when serving_config, and into the version
    directory when per_model_batching. images: encoded images for warm-up and the
    TFLite check (default `sample_images`). base_path: models.config's base_path
    (default: the absolute model directory; a container would use e.g.
    /models/<model_name>).
    """
    if not (isinstance(version, int) and version >= 1):
        raise ConfigError(f"version: must be an integer >= 1, got {version!r}")
    if not model_name or not all(c.isalnum() or c in "-_." for c in model_name):
        raise ConfigError(f"model_name: letters, digits, '-', '_' or '.', got {model_name!r}")
    if outputs_are not in ("auto", "logits", "probabilities"):
        raise ConfigError(f"outputs_are: one of auto, logits, probabilities; got {outputs_are!r}")
    if top_k < 1:
        raise ConfigError(f"top_k: must be >= 1, got {top_k}")
    if warmup or serving_config:
        _need_serving_protos()
    out = Path(out_dir)
    if out.exists():  # a new version beside others: staged_version keeps it whole
        return _export(config, model, out, version, model_name=model_name, top_k=top_k,
                       outputs_are=outputs_are, serving_config=serving_config, warmup=warmup,
                       batching=batching, per_model_batching=per_model_batching,
                       base_path=base_path, images=images, tflite=tflite, overwrite=overwrite)
    # a new export root: everything is written into a directory beside it and renamed
    # when complete, so a failed export leaves no OUT (not even an empty one)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        res = _export(config, model, tmp, version, model_name=model_name, top_k=top_k,
                      outputs_are=outputs_are, serving_config=serving_config, warmup=warmup,
                      batching=batching, per_model_batching=per_model_batching,
                      base_path=base_path or str((out / model_name).resolve()),
                      images=images, tflite=tflite, overwrite=overwrite)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _moved(res, str(tmp), str(out))


def _need_serving_protos() -> None:
    """Warm-up records and models.config are TF Serving's protos: say what to install
    before anything is written (it was a ModuleNotFoundError half-way through)."""
    try:
        import tensorflow_serving.apis.prediction_log_pb2  # noqa: F401
        import tensorflow_serving.config.model_server_config_pb2  # noqa: F401
    except ImportError as exc:
        raise ExportError(
            "export writes TF Serving's warm-up requests and models.config with the protos "
            "of tensorflow-serving-api, which is not installed: pip install 'tfpipe[serving]' "
            "(or pip install --no-deps 'tensorflow-serving-api>=2.16'); or export the "
            "SavedModel alone with warmup=0, serving_config=False (--warmup 0 "
            f"--no-serving-config) ({exc})") from None


def _moved(res: ExportResult, old: str, new: str) -> ExportResult:
    """`res` with the staging directory's paths replaced by the final ones."""
    def fix(v: Any) -> Any:
        if isinstance(v, str) and (v == old or v.startswith(old + os.sep)):
            return new + v[len(old):]
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        return v

    res.out_dir, res.version_dir = fix(res.out_dir), fix(res.version_dir)
    res.serving_files = fix(res.serving_files)
    res.tflite = fix(res.tflite)
    return res


def _export(config: Any, model: Any, out: Path, version: int, *, model_name: str,
            top_k: int, outputs_are: str, serving_config: bool, warmup: int,
            batching: sf.BatchingParameters | None, per_model_batching: bool,
            base_path: str | None, images: Sequence[bytes] | None, tflite: bool,
            overwrite: bool) -> ExportResult:
    """export_serving into an existing (or staging) `out`; a model directory this call
    creates is removed again when the export fails."""
    model_dir = out / model_name
    created = not model_dir.exists()
    try:
        return _export_into(config, model, out, version, model_name=model_name, top_k=top_k,
                            outputs_are=outputs_are, serving_config=serving_config,
                            warmup=warmup, batching=batching,
                            per_model_batching=per_model_batching, base_path=base_path,
                            images=images, tflite=tflite, overwrite=overwrite)
    except BaseException:
        if created:
            shutil.rmtree(model_dir, ignore_errors=True)
        raise


def _export_into(config: Any, model: Any, out: Path, version: int, *, model_name: str,
                 top_k: int, outputs_are: str, serving_config: bool, warmup: int,
                 batching: sf.BatchingParameters | None, per_model_batching: bool,
                 base_path: str | None, images: Sequence[bytes] | None, tflite: bool,
                 overwrite: bool) -> ExportResult:
    from tfpipe.export import _tabular

    if _tabular.is_tabular(config):  # raw columns in (docs/tabular.md, "Serving")
        return _tabular.export_tabular(config, model, out, version, model_name=model_name,
                                       serving_config=serving_config, batching=batching,
                                       base_path=base_path, overwrite=overwrite,
                                       warmup=warmup)
    pre = eval_preprocessing(config)
    names = class_names(config)
    keras_model = _load_model(model)
    _check_model_input(keras_model, pre)
    segment = pre.per_pixel  # per-pixel classes (export/_segment.py)
    detect = pre.serves == "detections"  # boxes in request pixels (export/_detect.py)
    if segment or detect:
        problem = (_segment if segment else _detect).output_problem(keras_model, pre)
        if problem:
            raise ExportError(problem)
        if tflite:
            raise ExportError("tflite: the TFLite check is built for classification "
                              f"exports only, not data.task {pre.task!r}")
    if outputs_are == "auto":
        outputs_are = "probabilities" if _ends_in_softmax(keras_model) else "logits"
    batching = batching or sf.BatchingParameters()

    model_dir = out / model_name
    final = model_dir / str(version)
    with staged_version(model_dir, version, overwrite) as tmp:
        module = (_segment.SegmentServingModule(keras_model, pre, outputs_are) if segment
                  else _detect.DetectServingModule(keras_model, pre, names) if detect
                  else ServingModule(keras_model, pre, names, top_k, outputs_are))
        concrete = module.signatures()
        save_for_serving(module, concrete, tmp)
        table = signature_table(concrete)
        imgs = list(images) if images else sample_images(pre.image_size)
        n_warm = 0
        if warmup:
            recs = sf.warmup_records(model_name, imgs, batching.warmup_batch_sizes, warmup)
            sf.write_warmup(tmp, recs)
            n_warm = len(recs)
        if per_model_batching:
            (tmp / sf.PER_MODEL_BATCHING).write_text(batching.to_text())
        meta = {"tool": "tfpipe", "tool_version": __version__, "model_name": model_name,
                "version": version, "signatures": table, "class_names": names,
                "outputs_are": outputs_are, "top_k": min(top_k, len(names) or top_k),
                "preprocessing": {
                    "image_size": list(pre.image_size), "channels": pre.channels,
                    "eval_crop_fraction": pre.settings.eval_crop_fraction,
                    "output_dtype": pre.settings.output_dtype,
                    "mean": list(pre.settings.mean), "std": list(pre.settings.std),
                    "dct_scaling": pre.settings.dct_scaling,
                    "decode": "JPEG: decode_and_crop_jpeg (TF's default dct_method) of the "
                              "centre window, at the largest DCT ratio that keeps it >= "
                              "image_size when dct_scaling; PNG/GIF/BMP: decode_image then "
                              "the same window",
                    "resize": "bilinear, half-pixel centres, rounded + saturated to uint8"}}
        if segment:
            del meta["top_k"]
            meta["preprocessing"] = _segment.preprocessing_meta(pre)
        if detect:  # scores as the model gives them: no softmax, no top k
            del meta["top_k"], meta["outputs_are"]
            meta["preprocessing"] = _detect.preprocessing_meta(pre)
        _manifest.write_manifest(tmp, meta)

    result = ExportResult(str(out), model_name, version, str(final), table, names,
                          warmup_records=n_warm, batching=batching.to_fields())
    if serving_config:
        result.serving_files = write_serving_files(out, model_name, model_dir, base_path,
                                                   batching)
    if tflite:
        from tfpipe.export._tflite import tflite_report

        # the whole graph for TFLite: JPEGs decoded fully, then the window sliced
        variant = ServingModule(keras_model, pre, names, top_k, outputs_are,
                                crop_in_decoder=False)
        result.tflite = tflite_report(str(final), imgs, pre.image_size, variant=variant)
    return result


def signatures_of(version_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The signature table recorded in an export's manifest."""
    meta = json.loads((Path(version_dir) / _manifest.MANIFEST).read_text())
    return meta["signatures"]
