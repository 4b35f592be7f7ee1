"""`--tflite`: convert preprocessing + model with the TFLite converter and compare.

1. Builtins only: the converter's error lists the ops TFLite has no builtin
   kernel for (the image decoders, string ops of the preprocessing: its "TF
   Select ops" line) and those with no TFLite kernel at all ("Custom ops");
   both are reported.
2. Builtins + SELECT_TF_OPS (the Flex delegate): the whole `serving_default`
   signature, run on the sample images when it converts and compared with the
   SavedModel's own outputs. With TF 2.21 it does not: `ExtractJpegShape` (the
   JPEG header read that sizes the centre crop before decoding it) is not in
   the Flex allowlist; the report says so.
2b. The same graph with JPEGs decoded fully and then sliced (the variant
   `export_serving` passes: no ExtractJpegShape; not the eval pipeline's bits at
   the window's edges under chroma subsampling) with SELECT_TF_OPS: converts;
   run and compared when the interpreter has the Flex delegate (TF 2.21's pip
   interpreter does not link it; the report says so).
3. The model alone (`predict_preprocessed`), builtins only, fed the SavedModel's
   `preprocess` output: what a mobile app that decodes with its own code gets.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

_LIST_RE = {"select": re.compile(r"TF Select ops: ([^\n]*)"),
            "custom": re.compile(r"Custom ops: ([^\n]*)")}


def _listed(message: str, kind: str) -> list[str]:
    """Op names the converter lists on its "TF Select ops:" / "Custom ops:" lines."""
    out: set[str] = set()
    for line in _LIST_RE[kind].findall(message):
        out.update(op.strip() for op in line.split(",") if op.strip())
    return sorted(out)


def _convert(loaded: Any, signature: str, select: bool, fn: Any = None
             ) -> tuple[bytes | None, str]:
    """Convert one signature of a loaded SavedModel (or `fn`, a concrete function
    of the module `loaded`). From the concrete function (variables frozen to
    constants): `from_saved_model` keeps Keras 3's resource variables, which the
    interpreter then reads uninitialized (NaN outputs)."""
    import tensorflow as tf

    conv = tf.lite.TFLiteConverter.from_concrete_functions(
        [fn if fn is not None else loaded.signatures[signature]], loaded)
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
    runner = interp.get_signature_runner()  # the one signature converted
    return {k: np.asarray(v) for k, v in runner(**feeds).items()}


def tflite_report(version_dir: str, images: Sequence[bytes], image_size: Any,
                  write_dir: str | None = None, variant: Any = None) -> dict[str, Any]:
    """JSON-able report (docs/serving.md "TFLite"). Writes the .tflite files into
    `write_dir` (default: the version dir's parent, beside the version).

    variant: a `ServingModule` built with `crop_in_decoder=False` (JPEGs decoded
    fully, then sliced: no ExtractJpegShape); its `serving_default` is converted
    with Select TF ops and compared with the SavedModel (`whole_graph_variant`)."""
    import tensorflow as tf

    loaded = tf.saved_model.load(version_dir)
    batch = tf.constant(list(images), tf.string)
    ref = {k: v.numpy() for k, v in loaded.signatures["serving_default"](image_bytes=batch).items()}
    pre = loaded.signatures["preprocess"](image_bytes=batch)["image"].numpy()
    out_dir = Path(write_dir or Path(version_dir).parent)
    report: dict[str, Any] = {"images": len(images)}

    _, err = _convert(loaded, "serving_default", select=False)
    select_ops, custom = _listed(err, "select"), _listed(err, "custom")
    report["builtins_only"] = {"converted": not err, "needs_select_tf_ops": select_ops,
                               "no_tflite_kernel": custom}
    model, err2 = _convert(loaded, "serving_default", select=True)
    full: dict[str, Any]
    if model is None:
        full = {"converted": False, "not_convertible": _listed(err2, "custom") or custom,
                "error": (err2.strip().splitlines() or [""])[-1][:300]}
    else:
        path = out_dir / "serving_default_select_tf_ops.tflite"
        path.write_bytes(model)
        full = {"converted": True, "file": str(path), "bytes": len(model)}
        try:
            got = _run(model, "serving_default",
                       {"image_bytes": np.array(list(images), dtype=object)})
            full["max_abs_diff"] = _diff(got, ref)
            full["same_classes"] = bool(np.array_equal(got.get("class_ids"), ref["class_ids"]))
        except Exception as exc:  # noqa: BLE001 - report, do not crash the export
            full["run_error"] = str(exc).strip().splitlines()[-1][:300]
    report["serving_default"] = full
    report["needs_select_tf_ops"] = select_ops
    report["not_convertible"] = full.get("not_convertible", [])

    if variant is not None:
        fn = variant.serving_default.get_concrete_function()
        vm, err4 = _convert(variant, "", select=True, fn=fn)
        var: dict[str, Any] = {"decode": "decode_image of the whole file, then the centre "
                               "window sliced (no ExtractJpegShape)"}
        if vm is None:
            var.update(converted=False, not_convertible=_listed(err4, "custom"),
                       error=(err4.strip().splitlines() or [""])[-1][:300])
        else:
            path = out_dir / "serving_default_whole_graph_select_tf_ops.tflite"
            path.write_bytes(vm)
            var.update(converted=True, file=str(path), bytes=len(vm),
                       needs_select_tf_ops=_listed(_convert(variant, "", False, fn)[1],
                                                   "select"))
            try:
                got = _run(vm, "serving_default",
                           {"image_bytes": np.array(list(images), dtype=object)})
                var["max_abs_diff"] = _diff(got, ref)
                var["same_classes"] = bool(np.array_equal(got.get("class_ids"),
                                                          ref["class_ids"]))
            except Exception as exc:  # noqa: BLE001 - report, do not crash the export
                msg = str(exc).strip().splitlines()[-1]
                var["run_error"] = msg[:300]
                # TF 2.21's pip interpreter links no Flex delegate: a model with
                # Select TF ops converts but cannot run in this process
                var["flex_delegate_missing"] = "Flex delegate" in msg
        report["whole_graph_variant"] = var

    mdl, err3 = _convert(loaded, "predict_preprocessed", select=False)
    if mdl is None:
        report["model_only"] = {"converted": False,
                                "ops": _listed(err3, "select") + _listed(err3, "custom")}
    else:
        path = out_dir / "model_builtins.tflite"
        path.write_bytes(mdl)
        got = _run(mdl, "predict_preprocessed", {"image": pre})
        report["model_only"] = {
            "converted": True, "file": str(path), "bytes": len(mdl),
            "max_abs_diff": _diff(got, ref),
            "same_classes": bool(np.array_equal(got.get("class_ids"), ref["class_ids"]))}
    return report


def _diff(got: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> dict[str, float]:
    """max |TFLite - SavedModel| per float output (NaN counts as infinitely far)."""
    out = {}
    for k in ("outputs", "probabilities", "scores"):
        if k in got:
            d = np.abs(got[k].astype(np.float64) - ref[k].astype(np.float64))
            out[k] = float("inf") if np.isnan(d).any() else float(d.max(initial=0.0))
    return out


def tflite_text(report: dict[str, Any]) -> str:
    lines = [f"TFLite check on {report['images']} sample images"]
    b = report["builtins_only"]
    lines.append("  builtins only: " + ("converts" if b["converted"] else
                 f"fails; needs Select TF ops: {', '.join(b['needs_select_tf_ops']) or '-'}; "
                 f"no TFLite kernel at all: {', '.join(b['no_tflite_kernel']) or '-'}"))
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
        lines.append(f"  serving_default with SELECT_TF_OPS: does not convert (no kernel for "
                     f"{', '.join(full.get('not_convertible') or []) or full.get('error')})")
    var = report.get("whole_graph_variant")
    if var is not None:
        if var.get("converted") and "max_abs_diff" in var:
            lines.append(f"  whole graph, JPEG decoded fully then sliced (SELECT_TF_OPS): "
                         f"{var['bytes']:,} bytes; max |TFLite - SavedModel| " + ", ".join(
                             f"{k} {v:.3g}" for k, v in var["max_abs_diff"].items())
                         + f"; same top classes: {var['same_classes']}")
        elif var.get("converted") and var.get("flex_delegate_missing"):
            lines.append(f"  whole graph, JPEG decoded fully then sliced (SELECT_TF_OPS): "
                         f"converts ({var['bytes']:,} bytes); not run here: this TensorFlow's "
                         "Python interpreter links no Flex delegate (an app adds "
                         "tensorflow-lite-select-tf-ops)")
        elif var.get("converted"):
            lines.append(f"  whole graph variant: converted, run failed: {var.get('run_error')}")
        else:
            lines.append(f"  whole graph variant: does not convert "
                         f"({', '.join(var.get('not_convertible') or []) or var.get('error')})")
    mo = report["model_only"]
    if mo.get("converted"):
        lines.append(f"  model alone (predict_preprocessed, builtins): {mo['bytes']:,} bytes; "
                     "max |TFLite - SavedModel| " + ", ".join(
                         f"{k} {v:.3g}" for k, v in mo["max_abs_diff"].items())
                     + f"; same top classes: {mo['same_classes']}")
    else:
        lines.append(f"  model alone (builtins): does not convert ({', '.join(mo['ops'])})")
    return "\n".join(lines)
