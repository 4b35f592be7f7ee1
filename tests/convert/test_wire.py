"""The TF-free encoder used by workers writes exactly `records.encode_example`'s bytes."""

from __future__ import annotations

import pytest

from tfpipe.convert._wire import encode
from tfpipe.errors import SchemaError
from tfpipe.records import (FeatureSpec, Schema, classification_schema, detection_schema,
                            encode_example)

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
def test_same_bytes_as_records_encoder(schema, values) -> None:
    assert encode(values, schema) == encode_example(values, schema)


def test_same_errors() -> None:
    with pytest.raises(SchemaError, match="not in the schema"):
        encode({"nope": 1}, SCHEMA)
    with pytest.raises(SchemaError, match="required"):
        encode({"b": [1, 2, 3], "z/é": [1, 2]}, SCHEMA)
    with pytest.raises(SchemaError, match="needs 3 values"):
        encode({"a": b"", "b": [1], "z/é": [1, 2]}, SCHEMA)
    with pytest.raises(SchemaError, match="out of range"):
        encode({"a": b"", "b": [1 << 63, 0, 0], "z/é": [1, 2]}, SCHEMA)
