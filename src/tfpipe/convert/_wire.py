"""`tf.train.Example` serialization in pure Python, for conversion workers.

`tfpipe.records.encode_example` builds the message with TensorFlow's protobuf
classes, and importing those imports all of TensorFlow (seconds and hundreds
of MB per spawned worker). Conversion workers use this encoder instead; it
writes the exact bytes of `SerializeToString(deterministic=True)` (map keys
sorted, packed numeric lists), which tests/convert check against
`encode_example` on every record kind the converters produce.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

from tfpipe.errors import SchemaError
from tfpipe.records.schema import SCHEMA_VERSION, VERSION_KEY, Schema

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int64 negatives are 10-byte two's complement varints
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _len_field(tag: int, payload: bytes) -> bytes:
    return bytes((tag,)) + _varint(len(payload)) + payload


def _float32(v: float) -> bytes:
    try:
        return struct.pack("<f", v)
    except OverflowError:  # protobuf stores out-of-range doubles as +-inf
        return struct.pack("<f", math.copysign(math.inf, v))


def _feature(name: str, dtype: str, items: list[Any]) -> bytes:
    if dtype == "string":
        body = b"".join(_len_field(0x0A, _to_bytes(name, v)) for v in items)
        return _len_field(0x0A, body)  # Feature.bytes_list = 1
    if dtype == "int64":
        ints = []
        for v in items:
            i = int(v)
            if not _INT64_MIN <= i <= _INT64_MAX:
                raise SchemaError(f"feature {name!r} (int64): value {i} out of range")
            ints.append(_varint(i))
        body = _len_field(0x0A, b"".join(ints)) if ints else b""
        return _len_field(0x1A, body)  # Feature.int64_list = 3
    body = b"".join(_float32(float(v)) for v in items)
    return _len_field(0x12, _len_field(0x0A, body) if body else b"")  # float_list = 2


def _to_bytes(name: str, v: Any) -> bytes:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    raise SchemaError(f"feature {name!r}: string feature needs str or bytes, "
                      f"got {type(v).__name__}")


def encode(values: Mapping[str, Any], schema: Schema) -> bytes:
    """Same contract and bytes as `tfpipe.records.encode_example`, without TensorFlow."""
    unknown = [k for k in values if k not in schema]
    if unknown:
        raise SchemaError(f"features {sorted(unknown)} are not in the schema "
                          f"(known: {sorted(schema)})")
    entries: dict[str, bytes] = {}
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
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if spec.kind == "fixed" and len(items) != max(spec.num_elements, 1):
            raise SchemaError(f"feature {name!r}: fixed shape {spec.shape} needs "
                              f"{max(spec.num_elements, 1)} values, got {len(items)}")
        try:
            entries[name] = _feature(name, spec.dtype, items)
        except (TypeError, ValueError) as e:
            raise SchemaError(f"feature {name!r} ({spec.dtype}): {e}") from e
    entries[VERSION_KEY] = _feature(VERSION_KEY, "int64", [SCHEMA_VERSION])
    features = b"".join(
        _len_field(0x0A, _len_field(0x0A, key.encode("utf-8")) + _len_field(0x12, entries[key]))
        for key in sorted(entries, key=lambda k: k.encode("utf-8")))
    return _len_field(0x0A, features)
