"""TF Serving's REST predict body: built, decoded as the server does, run through the
loaded signature; the same answer as calling the signature directly."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.xdist_group("export")


def test_body_is_what_the_rest_api_expects(photo_bytes):
    from tfpipe.export import rest_predict_body

    data = [photo_bytes["astronaut.jpg"], photo_bytes["chelsea_alpha.png"]]
    doc = json.loads(rest_predict_body(data))
    assert set(doc) == {"signature_name", "instances"}
    assert doc["signature_name"] == "serving_default"
    assert [set(i) for i in doc["instances"]] == [{"b64"}, {"b64"}]
    # standard base64 (RFC 4648 alphabet, padded), what the server's JSON decoder takes
    assert [base64.standard_b64decode(i["b64"]) for i in doc["instances"]] == data
    named = json.loads(rest_predict_body(data, "preprocess", input_name="image_bytes"))
    assert named["instances"][0] == {"image_bytes": {"b64": doc["instances"][0]["b64"]}}


@pytest.mark.parametrize("named", [False, True])
def test_rest_round_trip_equals_direct_call(loaded, photo_bytes, named):
    from tfpipe.export import decode_rest_body, rest_predict, rest_predict_body

    data = list(photo_bytes.values())
    body = rest_predict_body(data, input_name="image_bytes" if named else None)
    sig, arrays, fmt = decode_rest_body(body, ["image_bytes"])
    assert (sig, fmt) == ("serving_default", "row")
    assert list(arrays["image_bytes"]) == data  # the server's b64 -> DT_STRING tensor
    answer = rest_predict(loaded, body)
    direct = loaded.signatures["serving_default"](image_bytes=tf.constant(data))
    preds = answer["predictions"]
    assert len(preds) == len(data)
    for i, p in enumerate(preds):
        assert p["classes"] == [c.decode() for c in direct["classes"][i].numpy()]
        assert p["class_ids"] == direct["class_ids"][i].numpy().tolist()
        assert np.array_equal(np.float32(p["scores"]), direct["scores"][i].numpy())
        assert np.array_equal(np.float32(p["outputs"]), direct["outputs"][i].numpy())
    json.dumps(answer)  # JSON-serializable as the server's answer is


def test_columnar_and_preprocess_signature(loaded, photo_bytes):
    from tfpipe.export import rest_predict

    data = [photo_bytes["camera_gray.jpg"], photo_bytes["chelsea.gif"]]
    body = json.dumps({"signature_name": "preprocess", "inputs": [
        {"b64": base64.b64encode(b).decode()} for b in data]})
    answer = rest_predict(loaded, body)
    want = loaded.signatures["preprocess"](image_bytes=tf.constant(data))["image"].numpy()
    assert np.array_equal(np.float32(answer["outputs"]), want)


@pytest.mark.parametrize("body,problem", [
    ('{"instances": [{"b64": "not base64!"}]}', "instances[0].b64: not standard base64"),
    ('{"instances": [{"b64": "AAAA", "x": 1}]}', "instances[0]: keys"),
    ('{"instances": [], "inputs": []}', "exactly one of"),
    ('[1, 2]', "must be a JSON object"),
])
def test_bad_bodies(body, problem):
    from tfpipe.export import RestBodyError, decode_rest_body

    with pytest.raises(RestBodyError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        decode_rest_body(body, ["image_bytes"])


def test_bad_image_in_a_rest_body_is_an_error_naming_it(loaded, photo_bytes):
    from tfpipe.export import rest_predict, rest_predict_body

    body = rest_predict_body([photo_bytes["astronaut.jpg"], b"GIF89a-but-cut"])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"image_bytes\[1\]: truncated GIF"):
        rest_predict(loaded, body)
