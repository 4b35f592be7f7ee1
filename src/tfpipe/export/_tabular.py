"""`export_serving` for tabular configs: raw columns in, the pipeline's transforms, the model.

Signatures (docs/tabular.md, "Serving"):

    serving_default(<column>: dtype [None], ..., <nullable column>__missing: bool [None])
        -> outputs (the model's output, float32)
    preprocess(same inputs) -> the transformed features, exactly what the pipeline yields
    predict_preprocessed(<feature>: ...) -> outputs

The transforms are the same `FeatureTransforms` object the pipeline builds
(`tfpipe.pipeline.tabular_transforms`: same statistics, same schema), so the graph
that serves is the graph that trained; the skew test compares them bit for bit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import tensorflow as tf

from tfpipe._version import __version__
from tfpipe.errors import ConfigError
from tfpipe.export import _inputs, _manifest
from tfpipe.export import _serving_files as sf
from tfpipe.features import MISSING_SUFFIX, FeatureTransforms
from tfpipe.pipeline import raw_rows, settings, tabular_transforms


def is_tabular(config: Any) -> bool:
    return settings(config).features is not None


class TabularServingModule(tf.Module):
    """serving_default / preprocess / predict_preprocessed over one model."""

    def __init__(self, model: Any, transforms: FeatureTransforms) -> None:
        super().__init__(name="tfpipe_tabular_serving")
        self.model = model
        self.transforms = transforms
        raw = transforms.serving_spec
        feats = {n: tf.TensorSpec([None, *i.shape], tf.as_dtype(i.dtype), name=n)
                 for n, i in transforms.output_info.items()}
        self.preprocess = tf.function(self._preprocess, input_signature=[raw])
        self.predict_preprocessed = tf.function(self._predict, input_signature=[feats])
        self.serving_default = tf.function(self._serve, input_signature=[raw])

    def _preprocess(self, raw: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        # every column of one request must have the same number of rows
        n = tf.shape(next(iter(raw.values())))[0]
        checks = [tf.debugging.assert_equal(tf.shape(v)[0], n, message=(
            f"column {k!r}: every column of a request needs the same number of rows"))
            for k, v in raw.items()]
        masks = {k[: -len(MISSING_SUFFIX)]: v for k, v in raw.items()
                 if k.endswith(MISSING_SUFFIX)}
        checks += _inputs.check_finite(raw, masks)  # ±inf refused; NaN is missing
        with tf.control_dependencies(checks):
            raw = {k: tf.identity(v) for k, v in raw.items()}
        return self.transforms(raw)

    def _predict(self, feats: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        y = self.model(feats, training=False)
        if isinstance(y, (dict, list, tuple)):
            raise ConfigError("the model must return one tensor, got " + type(y).__name__)
        return {"outputs": tf.cast(y, tf.float32)}

    def _serve(self, raw: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return self._predict(self._preprocess(raw))

    def signatures(self) -> dict[str, Any]:
        return {"serving_default": self.serving_default.get_concrete_function(),
                "preprocess": self.preprocess.get_concrete_function(),
                "predict_preprocessed": self.predict_preprocessed.get_concrete_function()}


def warmup_requests(model_name: str, rows: dict[str, Any], batch_sizes: Any, count: int
                    ) -> list[bytes]:
    """`count` PredictionLog records for `serving_default`; record i sends the first
    batch_sizes[i % len] rows (cycled) of `rows`."""
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    if not 0 <= count <= sf.MAX_WARMUP:
        raise ConfigError(f"warmup: between 0 and {sf.MAX_WARMUP} records, got {count}")
    total = len(next(iter(rows.values())))
    out = []
    for i in range(count):
        n = int(batch_sizes[i % len(batch_sizes)])
        take = [j % total for j in range(n)]
        req = predict_pb2.PredictRequest()
        req.model_spec.name = model_name
        req.model_spec.signature_name = "serving_default"
        for name, values in rows.items():
            req.inputs[name].CopyFrom(tf.make_tensor_proto(values[take]))
        log = prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=req))
        out.append(log.SerializeToString())
    return out


def export_tabular(config: Any, model: Any, out_dir: str | os.PathLike[str], version: int,
                   *, model_name: str, serving_config: bool, batching: Any,
                   base_path: str | None, overwrite: bool, warmup: int = 10) -> Any:
    """The tabular branch of `export_serving` (same layout; warm-up requests made of
    the first train rows)."""
    from tfpipe.export._files import (ExportResult, _load_model, save_for_serving,
                                      signature_table, staged_version, write_serving_files)

    transforms = tabular_transforms(config)
    keras_model = _load_model(model)
    batching = batching or sf.BatchingParameters()
    out = Path(out_dir)
    model_dir = out / model_name
    final = model_dir / str(version)
    with staged_version(model_dir, version, overwrite) as tmp:
        module = TabularServingModule(keras_model, transforms)
        concrete = module.signatures()
        save_for_serving(module, concrete, tmp)
        n_warm = 0
        if warmup:
            rows = raw_rows(config, max(batching.warmup_batch_sizes))
            recs = warmup_requests(model_name, rows, batching.warmup_batch_sizes, warmup)
            sf.write_warmup(tmp, recs)
            n_warm = len(recs)
        table = signature_table(concrete)
        s = settings(config)
        meta = {"tool": "tfpipe", "tool_version": __version__, "model_name": model_name,
                "version": version, "signatures": table, "class_names": [],
                "preprocessing": {"kind": "tabular", "label": s.features.label,
                                  "features": s.features.to_dict()["columns"],
                                  "statistics_sha256": transforms.stats_sha256,
                                  "nullable": list(transforms.nullable)}}
        _manifest.write_manifest(tmp, meta)
    result = ExportResult(str(out), model_name, version, str(final), table, [],
                          warmup_records=n_warm, batching=batching.to_fields())
    if serving_config:
        result.serving_files = write_serving_files(out, model_name, model_dir, base_path,
                                                   batching)
    return result


_NP = {"float32": "float32", "int64": "int64", "string": "object", "bool": "bool"}


def tabular_request(version_dir: str | os.PathLike[str], columns: dict[str, Any]
                    ) -> dict[str, Any]:
    """Raw columns -> the exported `serving_default`'s inputs (NumPy arrays), checked.

    `columns`: column name -> list of values, `None` for a missing value (the mask
    `<column>__missing` is filled in). Reads the signature table of the export's
    manifest, so every error names the column, the row and the dtype the model
    takes: a missing or unknown column, a value of the wrong type, a null in a
    column that cannot be missing, columns of different lengths.
    """
    import json

    import numpy as np

    meta = json.loads((Path(version_dir) / _manifest.MANIFEST).read_text())
    inputs = meta["signatures"]["serving_default"]["inputs"]
    masks = {k[: -len("__missing")] for k in inputs if k.endswith("__missing")}
    wanted = [k for k in inputs if not (k.endswith("__missing") and k[:-9] in inputs)]
    absent = [c for c in wanted if c not in columns]
    unknown = [c for c in columns if c not in inputs]
    if absent or unknown:
        parts = ([f"missing column(s) {absent}"] if absent else []) + (
            [f"unknown column(s) {unknown}"] if unknown else [])
        takes = ", ".join(c + " (" + inputs[c]["dtype"] + ")" for c in wanted)
        raise ConfigError(f"request: {'; '.join(parts)}; the model takes {takes}")
    n = {len(v) for v in columns.values()}
    if len(n) > 1:
        raise ConfigError("request: columns of different lengths: "
                          + ", ".join(f"{c}: {len(v)}" for c, v in columns.items()))
    out: dict[str, Any] = {}
    for c, values in columns.items():
        dtype = inputs[c]["dtype"]
        fill = b"" if dtype == "string" else 0
        missing = [v is None for v in values]
        if any(missing) and c not in masks:
            raise ConfigError(f"request: column {c!r} row {missing.index(True)}: null, but "
                              f"{c!r} cannot be missing (it had no nulls in training)")
        vals = []
        for i, v in enumerate(values):
            v = fill if v is None else v
            ok = (isinstance(v, (str, bytes)) if dtype == "string" else
                  isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                  if dtype == "int64" else
                  isinstance(v, (int, float, np.number)) and not isinstance(v, bool))
            if not ok:
                raise ConfigError(f"request: column {c!r} row {i}: expected {dtype}, got {v!r}")
            problem = None if missing[i] else _inputs.value_problem(v, dtype)
            if problem:
                raise ConfigError(f"request: column {c!r} row {i}: {problem}")
            vals.append(v.encode() if isinstance(v, str) else v)
        out[c] = np.array(vals, _NP[dtype])
        if c in masks:
            out[c + "__missing"] = np.array(missing, bool)
    return out
