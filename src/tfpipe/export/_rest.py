"""TF Serving's REST predict API, both ends, without a server.

`POST /v1/models/<name>[/versions/<v>]:predict` takes JSON in the "row"
format, `{"signature_name": ..., "instances": [...]}`, or the "columnar"
format, `{"signature_name": ..., "inputs": ...}`. Binary values travel as
`{"b64": "<standard base64>"}`; for a signature with one named input each
instance may be that value alone. The server answers `{"predictions": [...]}`
(row: one entry per instance, a {output: value} object when the signature has
several outputs) or `{"outputs": {...}}` (columnar); string outputs are plain
JSON strings unless the output's name ends in `_bytes` (then `{"b64": ...}`).

`rest_predict_body` builds the request, `decode_rest_body` decodes it as the
server does (base64 -> a tf.string tensor per input), `rest_response` shapes
outputs as the server does; `rest_predict` chains them through a loaded signature.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Mapping, Sequence

import numpy as np

from tfpipe.errors import TfpipeError


class RestBodyError(TfpipeError, ValueError):
    """A REST body the server would reject (400); names the JSON path."""


def rest_predict_body(images: Sequence[bytes], signature_name: str = "serving_default",
                      input_name: str | None = None) -> str:
    """The JSON body for TF Serving's REST predict API (row format).

    Without `input_name` each instance is `{"b64": ...}` (a signature with one
    named input); with it, `{input_name: {"b64": ...}}`.
    """
    def b64(b: bytes) -> dict[str, str]:
        return {"b64": base64.b64encode(bytes(b)).decode("ascii")}

    instances = [b64(b) if input_name is None else {input_name: b64(b)} for b in images]
    return json.dumps({"signature_name": signature_name, "instances": instances})


def _value(v: Any, where: str) -> Any:
    if isinstance(v, dict):
        if set(v) != {"b64"} or not isinstance(v["b64"], str):
            raise RestBodyError(f"{where}: a binary value must be {{\"b64\": \"<base64>\"}}, "
                                f"got keys {sorted(v)}")
        try:
            return base64.b64decode(v["b64"], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise RestBodyError(f"{where}.b64: not standard base64 ({exc})") from None
    if isinstance(v, list):
        return [_value(x, f"{where}[{i}]") for i, x in enumerate(v)]
    return v


def decode_rest_body(body: str | bytes, input_names: Sequence[str]
                     ) -> tuple[str, dict[str, np.ndarray], str]:
    """Decode a predict body as TF Serving does: (signature_name, {input: array},
    "row" | "columnar"). `input_names`: the signature's inputs."""
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise RestBodyError(f"body: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise RestBodyError("body: must be a JSON object")
    sig = doc.get("signature_name", "serving_default")
    if ("instances" in doc) == ("inputs" in doc):
        raise RestBodyError("body: exactly one of 'instances' (row) or 'inputs' (columnar)")
    names = list(input_names)
    cols: dict[str, list[Any]] = {n: [] for n in names}
    if "instances" in doc:
        fmt = "row"
        inst = doc["instances"]
        if not isinstance(inst, list):
            raise RestBodyError("instances: must be a list")
        for i, item in enumerate(inst):
            where = f"instances[{i}]"
            named = isinstance(item, dict) and set(item) != {"b64"}
            if named:
                if set(item) != set(names):
                    raise RestBodyError(f"{where}: keys {sorted(item)} != the signature's "
                                        f"inputs {names}")
                for n in names:
                    cols[n].append(_value(item[n], f"{where}.{n}"))
            else:
                if len(names) != 1:
                    raise RestBodyError(f"{where}: the signature has inputs {names}; name them")
                cols[names[0]].append(_value(item, where))
    else:
        fmt = "columnar"
        inp = doc["inputs"]
        if isinstance(inp, dict) and set(inp) != {"b64"}:
            if set(inp) != set(names):
                raise RestBodyError(f"inputs: keys {sorted(inp)} != {names}")
            cols = {n: _value(inp[n], f"inputs.{n}") for n in names}
        else:
            if len(names) != 1:
                raise RestBodyError(f"inputs: the signature has inputs {names}; name them")
            cols = {names[0]: _value(inp, "inputs")}
    arrays = {n: np.array(v, dtype=object) for n, v in cols.items()}
    return sig, arrays, fmt


def _jsonable(name: str, a: np.ndarray) -> Any:
    if a.dtype == object or a.dtype.kind == "S":
        f = (lambda b: {"b64": base64.b64encode(b).decode("ascii")}) if name.endswith("_bytes") \
            else (lambda b: b.decode("utf-8", "replace") if isinstance(b, bytes) else b)
        return np.vectorize(f, otypes=[object])(a).tolist() if a.size else a.tolist()
    return a.tolist()


def rest_response(outputs: Mapping[str, Any], fmt: str = "row") -> dict[str, Any]:
    """Outputs shaped as the server's JSON answer (numbers as floats / ints)."""
    arrays = {k: np.asarray(v) for k, v in outputs.items()}
    if fmt == "columnar":
        if len(arrays) == 1:
            (k, a), = arrays.items()
            return {"outputs": _jsonable(k, a)}
        return {"outputs": {k: _jsonable(k, a) for k, a in arrays.items()}}
    lists = {k: _jsonable(k, a) for k, a in arrays.items()}
    n = len(next(iter(lists.values()))) if lists else 0
    if len(lists) == 1:
        return {"predictions": next(iter(lists.values()))}
    return {"predictions": [{k: v[i] for k, v in lists.items()} for i in range(n)]}


def _check_values(arrays: Mapping[str, np.ndarray], dtypes: Mapping[str, str]) -> None:
    """Out-of-range integers and ±inf floats fail as the server fails a bad body (400),
    naming the input and the instance, instead of a bare OverflowError or an inf that
    runs through the model (docs/serving.md, "Tabular requests")."""
    from tfpipe.export._inputs import value_problem

    for name, a in arrays.items():
        for i, v in enumerate(a.reshape(-1).tolist() if a.dtype == object else []):
            problem = value_problem(v, dtypes[name])
            if problem:
                raise RestBodyError(f"{name}: {problem} (instance {i})")


def rest_predict(loaded: Any, body: str | bytes) -> dict[str, Any]:
    """Run a REST body through a SavedModel loaded with tf.saved_model.load, as the
    server would: decode, call the named signature, shape the JSON answer."""
    import tensorflow as tf

    doc_sig = json.loads(body).get("signature_name", "serving_default")
    if doc_sig not in loaded.signatures:
        raise RestBodyError(f"signature_name: {doc_sig!r} not in the model "
                            f"(has {sorted(loaded.signatures)})")
    fn = loaded.signatures[doc_sig]
    names = sorted(fn.structured_input_signature[1])
    sig, arrays, fmt = decode_rest_body(body, names)
    specs = fn.structured_input_signature[1]
    _check_values(arrays, {n: specs[n].dtype.name for n in arrays})
    feeds = {n: tf.constant(a.tolist() if specs[n].dtype == tf.string else a,
                            dtype=specs[n].dtype) for n, a in arrays.items()}
    out = fn(**feeds)
    return rest_response({k: v.numpy() for k, v in out.items()}, fmt)
