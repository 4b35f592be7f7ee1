"""What every export writes, image or table: the result type, loading the model,
the signature table, the staged version directory, the SavedModel and the TF
Serving files. `_saved` (images) and `_tabular` (tables) both use it."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import tensorflow as tf

from tfpipe._version import __version__
from tfpipe.errors import TfpipeError
from tfpipe.export import _manifest
from tfpipe.export import _serving_files as sf


class ExportError(TfpipeError):
    """The model or the export directory cannot be exported as asked."""


@dataclass
class ExportResult:
    """Where everything went and what the signatures are."""

    out_dir: str
    model_name: str
    version: int
    version_dir: str
    signatures: dict[str, dict[str, Any]]
    class_names: list[str]
    serving_files: dict[str, str] = field(default_factory=dict)
    warmup_records: int = 0
    batching: dict[str, Any] | None = None
    tflite: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "out_dir", "model_name", "version", "version_dir", "signatures", "class_names",
            "serving_files", "warmup_records", "batching", "tflite")}


def _spec(t: tf.TensorSpec | tf.Tensor) -> dict[str, Any]:
    shape = [None if d is None else int(d) for d in t.shape.as_list()]
    return {"dtype": t.dtype.name, "shape": shape}


def _load_model(model: Any) -> Any:
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.exists():
            raise ExportError(f"--model: {path} does not exist")
        if path.suffix not in (".keras", ".h5"):
            raise ExportError(f"--model: {path}: expected a Keras .keras/.h5 file")
        import keras

        return keras.models.load_model(str(path), compile=False)
    return model


def signature_table(concrete: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> {"inputs": {name: spec}, "outputs": {name: spec}} of concrete functions."""
    out = {}
    for name, fn in concrete.items():
        positional = fn.structured_input_signature[0]
        args = fn.structured_input_signature[1] or {}
        if not args and len(positional) == 1 and isinstance(positional[0], dict):
            args = positional[0]  # one dict of named columns (tabular signatures)
        elif not args:
            args = {s.name: s for s in positional}
        out[name] = {"inputs": {k: _spec(v) for k, v in args.items()},
                     "outputs": {k: _spec(v) for k, v in fn.structured_outputs.items()}}
    return out


def _custom_ops(saved_model_pb: Path) -> list[str]:
    """Op types in the SavedModel that stock TensorFlow does not register
    (tfpipe's native kernels, any other custom op)."""
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import op_def_registry

    sm = saved_model_pb2.SavedModel.FromString(saved_model_pb.read_bytes())
    ops: set[str] = set()
    for mg in sm.meta_graphs:
        ops.update(n.op for n in mg.graph_def.node)
        for f in mg.graph_def.library.function:
            ops.update(n.op for n in f.node_def)
        fnames = {f.signature.name for f in mg.graph_def.library.function}
    return sorted(o for o in ops if o.startswith("Tfpipe") or (
        o not in fnames and op_def_registry.get(o) is None))


@contextmanager
def staged_version(model_dir: Path, version: int, overwrite: bool) -> Iterator[Path]:
    """A temporary directory beside `model_dir/version`, renamed to it when the block
    succeeds and removed when it fails, so a half export never has a version's name."""
    final = model_dir / str(version)
    if final.exists():
        if not overwrite:
            raise ExportError(f"{final} exists; pick another --version or pass overwrite")
        shutil.rmtree(final)
    model_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{version}-", dir=model_dir))
    try:
        yield tmp
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def save_for_serving(module: tf.Module, concrete: dict[str, Any], tmp: Path) -> None:
    """`tf.saved_model.save`, then refuse ops stock TensorFlow (TF Serving) lacks."""
    tf.saved_model.save(module, str(tmp), signatures=concrete)
    bad = _custom_ops(tmp / "saved_model.pb")
    if bad:
        raise ExportError(f"the serving graph uses ops stock TensorFlow does not have: "
                          f"{bad}; TF Serving could not load it")


def write_serving_files(out: Path, model_name: str, model_dir: Path, base_path: str | None,
                        batching: Any) -> dict[str, str]:
    """models.config + batching_parameters.txt (+ their manifest) in `out`."""
    mc = out / sf.MODELS_CONFIG
    mc.write_text(sf.models_config_text(model_name, base_path or str(model_dir.resolve())))
    bp = out / sf.BATCHING_FILE
    bp.write_text(batching.to_text())
    _manifest.write_manifest(out, {"tool": "tfpipe", "tool_version": __version__,
                                   "contents": "TF Serving files"},
                             files=[sf.MODELS_CONFIG, sf.BATCHING_FILE])
    return {"models_config": str(mc), "batching_parameters": str(bp)}
