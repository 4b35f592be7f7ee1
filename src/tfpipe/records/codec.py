"""tf.train.Example encoding (pure Python wire format) and decoding (protobuf classes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tfpipe.errors import SchemaError
from tfpipe.records import _wire
from tfpipe.records.schema import SCHEMA_VERSION, VERSION_KEY, FeatureSpec, Schema


def _example_pb2() -> Any:
    from tensorflow.core.example import example_pb2

    return example_pb2


def _as_list(spec: FeatureSpec, value: Any) -> list[Any]:
    if isinstance(value, np.ndarray):
        items = value.reshape(-1).tolist()
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    if spec.kind == "fixed" and len(items) != max(spec.num_elements, 1):
        raise SchemaError(f"feature {spec.name!r}: fixed shape {spec.shape} needs "
                          f"{max(spec.num_elements, 1)} values, got {len(items)}")
    return items


def encode_example(values: Mapping[str, Any], schema: Schema) -> bytes:
    """Serialize one record as a ``tf.train.Example`` (no TensorFlow import).

    Every feature in ``values`` must be in ``schema``; schema features that are
    absent get their declared default (var features: empty), or raise
    `SchemaError` when none is declared. ``tfpipe/schema_version`` is always set.
    The bytes equal protobuf's ``SerializeToString(deterministic=True)``.
    """
    unknown = [k for k in values if k not in schema]
    if unknown:
        raise SchemaError(f"features {sorted(unknown)} are not in the schema "
                          f"(known: {sorted(schema)})")
    features: dict[str, bytes] = {}
    for name, spec in schema.items():
        if name == VERSION_KEY:
            continue
        if name in values and values[name] is not None:
            value = values[name]
        elif spec.kind == "var":
            value = []
        elif spec.default is not None:
            value = spec.default
        else:
            raise SchemaError(f"feature {name!r} is required (no default) but missing")
        items = _as_list(spec, value)
        try:
            features[name] = _wire.feature(name, spec.dtype, items)
        except (TypeError, ValueError) as e:
            raise SchemaError(f"feature {name!r} ({spec.dtype}): {e}") from e
    features[VERSION_KEY] = _wire.feature(VERSION_KEY, "int64", [SCHEMA_VERSION])
    return _wire.example(features)


def decode_example(serialized: bytes) -> dict[str, list[Any]]:
    """Python-side decode for tools (inspect, verify): name -> list of values."""
    pb = _example_pb2()
    example = pb.Example()
    example.ParseFromString(serialized)
    out: dict[str, list[Any]] = {}
    for name, feat in example.features.feature.items():
        which = feat.WhichOneof("kind")
        if which == "bytes_list":
            out[name] = list(feat.bytes_list.value)
        elif which == "int64_list":
            out[name] = list(feat.int64_list.value)
        elif which == "float_list":
            out[name] = list(feat.float_list.value)
        else:
            out[name] = []
    return out


_KIND_DTYPE = {"bytes_list": "string", "int64_list": "int64", "float_list": "float32"}


def schema_from_example(serialized: bytes) -> Schema:
    """Guess a schema from one record (bare shard globs have no manifest).

    Well-known keys keep their standard spec; other single values become fixed
    scalars and longer lists var features.
    """
    from tfpipe.records.schema import known_feature

    pb = _example_pb2()
    example = pb.Example()
    example.ParseFromString(serialized)
    specs = []
    for name in sorted(example.features.feature):
        feat = example.features.feature[name]
        which = feat.WhichOneof("kind") or "bytes_list"
        known = known_feature(name)
        dtype = _KIND_DTYPE[which]
        if known is not None and known.dtype == dtype:
            specs.append(known)
            continue
        n = len(getattr(feat, which).value)
        specs.append(FeatureSpec(name, dtype, [], "fixed" if n == 1 else "var"))
    return Schema(specs)
