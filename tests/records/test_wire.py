"""`encode_example` (pure-Python wire format, no TensorFlow import) writes exactly the
bytes of TensorFlow's protobuf classes with `SerializeToString(deterministic=True)`."""

from __future__ import annotations

import pytest

from tensorflow.core.example import example_pb2

from tfpipe.errors import SchemaError
from tfpipe.records import (SCHEMA_VERSION, FeatureSpec, Schema, classification_schema,
                            detection_schema, encode_example)

encode = encode_example


def protobuf_oracle(values, schema) -> bytes:
    """The same record built with the protobuf classes (defaults filled as documented)."""
    ex = example_pb2.Example()
    fmap = ex.features.feature
    for name, spec in schema.items():
        if name == "tfpipe/schema_version":
            continue
        value = values.get(name)
        if value is None:
            value = [] if spec.kind == "var" else spec.default
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        items = [v.encode() if isinstance(v, str) else v for v in items]
        kind = {"string": "bytes_list", "int64": "int64_list", "float32": "float_list"}[spec.dtype]
        getattr(fmap[name], kind).value.extend(items)
    fmap["tfpipe/schema_version"].int64_list.value.append(SCHEMA_VERSION)
    return ex.SerializeToString(deterministic=True)

SCHEMA = Schema([FeatureSpec("a", "string"), FeatureSpec("b", "int64", [3]),
                 FeatureSpec("c", "float32", [], "var"), FeatureSpec("d", "string", [], "var"),
                 FeatureSpec("e", "int64", [], "var"), FeatureSpec("z/é", "float32", [2]),
                 FeatureSpec("f", "string", [], "fixed", "dflt")])

CASES = [
    (SCHEMA, {"a": b"x" * 300, "b": [1, -5, (1 << 63) - 1], "c": [], "d": [], "e": [],
              "z/é": [1.5, float("nan")]}),
    (SCHEMA, {"a": "", "b": [0, 0, -(1 << 63)], "c": [1e39, -3.3, 1e-50], "d": [b"", b"q"],
              "e": [-1, 2**40], "z/é": [0.1, 2], "f": b"g"}),
    (classification_schema(), {"image/encoded": bytes(range(256)) * 3,
                               "image/format": b"jpeg", "image/height": 300,
                               "image/width": 1, "image/class/label": 0}),
    (detection_schema(), {"image/encoded": b"abc", "image/format": b"png",
                          "image/height": 3, "image/width": 4,
                          "image/object/bbox/xmin": [0.0, 0.25],
                          "image/object/bbox/ymin": [0.1, 0.2],
                          "image/object/bbox/xmax": [1.0, 0.5],
                          "image/object/bbox/ymax": [0.3, 0.9],
                          "image/object/class/label": [3, 0],
                          "image/object/class/text": [b"cat", "dog"]}),
]


@pytest.mark.parametrize("schema,values", CASES)
def test_same_bytes_as_protobuf(schema, values) -> None:
    assert encode_example(values, schema) == protobuf_oracle(values, schema)


def test_same_errors() -> None:
    with pytest.raises(SchemaError, match="not in the schema"):
        encode({"nope": 1}, SCHEMA)
    with pytest.raises(SchemaError, match="required"):
        encode({"b": [1, 2, 3], "z/é": [1, 2]}, SCHEMA)
    with pytest.raises(SchemaError, match="needs 3 values"):
        encode({"a": b"", "b": [1], "z/é": [1, 2]}, SCHEMA)
    with pytest.raises(SchemaError, match="out of range"):
        encode({"a": b"", "b": [1 << 63, 0, 0], "z/é": [1, 2]}, SCHEMA)
