"""`--tflite`: convert preprocessing + model with the TFLite converter and compare.

1. Builtins only: the converter's error lists the ops TFLite has no kernel for
   (the image decoders, string and control-flow ops of the preprocessing); they
   are parsed out and reported as `needs_select_tf_ops` / `not_convertible`.
2. Builtins + SELECT_TF_OPS (the Flex delegate, linked into TF's pip package):
   the whole `serving_default` signature; run on the sample images and compared
   with the SavedModel's own outputs (max |TFLite - SavedModel|).
3. The model alone (`predict_preprocessed`), builtins only, fed the SavedModel's
   `preprocess` output: what a mobile app that decodes with its own code gets.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

_OP_RE = re.compile(r"\btf\.([A-Za-z0-9_]+)")


def _ops_in(message: str) -> list[str]:
    return sorted(set(_OP_RE.findall(message)))


def _convert(version_dir: str, signature: str, select: bool) -> tuple[bytes | None, str]:
    import tensorflow as tf

    conv = tf.lite.TFLiteConverter.from_saved_model(version_dir, signature_keys=[signature])
    ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if select:
        ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
    conv.target_spec.supported_ops = ops
    try:
        return conv.convert(), ""
    except Exception as exc:  # noqa: BLE001 - the converter raises several types
        return None, str(exc)


def _run(model: bytes, signature: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import tensorflow as tf

    interp = tf.lite.Interpreter(model_content=model)
    runner = interp.get_signature_runner(signature)
    return {k: np.asarray(v) for k, v in runner(**feeds).items()}


def tflite_report(version_dir: str, images: Sequence[bytes], image_size: Any,
                  write_dir: str | None = None) -> dict[str, Any]:
    """JSON-able report (docs/serving.md "TFLite"). Writes the .tflite files into
    `write_dir` (default: the version dir's parent, beside the version)."""
    import tensorflow as tf

    loaded = tf.saved_model.load(version_dir)
    batch = tf.constant(list(images), tf.string)
    ref = {k: v.numpy() for k, v in loaded.signatures["serving_default"](image_bytes=batch).items()}
    pre = loaded.signatures["preprocess"](image_bytes=batch)["image"].numpy()
    out_dir = Path(write_dir or Path(version_dir).parent)
    report: dict[str, Any] = {"images": len(images)}

    _, err = _convert(version_dir, "serving_default", select=False)
    builtin_failed = _ops_in(err) if err else []
    flex_ops = []
    m = re.search(r"flex runtime[^\n]*\n?(.*?)(?:\n\S|\Z)", err, re.S)
    if m:
        flex_ops = _ops_in(m.group(1))
    custom = []
    m2 = re.search(r"custom ops[^\n]*\n?(.*?)(?:\n\S|\Z)", err, re.S)
    if m2:
        custom = _ops_in(m2.group(1))
    report["builtins_only"] = {"converted": not err, "ops_without_builtin_kernel": builtin_failed}
    report["needs_select_tf_ops"] = flex_ops or builtin_failed
    full: dict[str, Any] = {}
    model, err2 = _convert(version_dir, "serving_default", select=True)
    if model is None:
        full = {"converted": False, "error": err2.strip().splitlines()[-1][:500] if err2 else "",
                "not_convertible": _ops_in(err2)}
    else:
        path = out_dir / "serving_default_select_tf_ops.tflite"
        path.write_bytes(model)
        full = {"converted": True, "file": str(path), "bytes": len(model)}
        try:
            got = _run(model, "serving_default",
                       {"image_bytes": np.array(list(images), dtype=object)})
            full["max_abs_diff"] = {k: float(np.max(np.abs(got[k].astype(np.float64) -
                                                           ref[k].astype(np.float64))))
                                    for k in ("outputs", "probabilities", "scores") if k in got}
            full["same_classes"] = bool(np.array_equal(got.get("class_ids"), ref["class_ids"]))
        except Exception as exc:  # noqa: BLE001 - report, do not crash the export
            full["run_error"] = str(exc).strip().splitlines()[-1][:500]
    report["serving_default"] = full
    report["not_convertible"] = custom or full.get("not_convertible", [])

    mdl, err3 = _convert(version_dir, "predict_preprocessed", select=False)
    if mdl is None:
        report["model_only"] = {"converted": False, "ops": _ops_in(err3)}
    else:
        path = out_dir / "model_builtins.tflite"
        path.write_bytes(mdl)
        got = _run(mdl, "predict_preprocessed", {"image": pre})
        report["model_only"] = {
            "converted": True, "file": str(path), "bytes": len(mdl),
            "max_abs_diff": {k: float(np.max(np.abs(got[k].astype(np.float64) -
                                                    ref[k].astype(np.float64))))
                             for k in ("outputs", "probabilities", "scores") if k in got}}
    return report


def tflite_text(report: dict[str, Any]) -> str:
    lines = [f"TFLite check on {report['images']} sample images"]
    ops = report.get("needs_select_tf_ops") or []
    lines.append("  builtins only: " + ("converts" if report["builtins_only"]["converted"]
                                        else f"fails; needs Select TF ops: {', '.join(ops)}"))
    full = report["serving_default"]
    if full.get("converted"):
        if "max_abs_diff" in full:
            d = full["max_abs_diff"]
            lines.append(f"  serving_default with SELECT_TF_OPS: {full['bytes']:,} bytes; max "
                         f"|TFLite - SavedModel| "
                         + ", ".join(f"{k} {v:.3g}" for k, v in d.items())
                         + f"; same top classes: {full['same_classes']}")
        else:
            lines.append(f"  serving_default with SELECT_TF_OPS: converted, run failed: "
                         f"{full.get('run_error')}")
    else:
        lines.append(f"  serving_default with SELECT_TF_OPS: does not convert "
                     f"({', '.join(full.get('not_convertible') or []) or full.get('error')})")
    mo = report["model_only"]
    if mo.get("converted"):
        lines.append(f"  model alone (builtins): {mo['bytes']:,} bytes; max |TFLite - "
                     "SavedModel| " + ", ".join(f"{k} {v:.3g}" for k, v in
                                                mo["max_abs_diff"].items()))
    else:
        lines.append(f"  model alone (builtins): does not convert ({', '.join(mo['ops'])})")
    if report.get("not_convertible"):
        lines.append(f"  not convertible: {', '.join(report['not_convertible'])}")
    return "\n".join(lines)
