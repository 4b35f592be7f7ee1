"""`tf.train.Example` wire format in pure Python.

TensorFlow's protobuf classes would import all of TensorFlow (seconds and
hundreds of MB per spawned conversion worker), so `encode_example` writes the
bytes itself: exactly those of `SerializeToString(deterministic=True)` (map keys
sorted, packed numeric lists); tests/records/test_wire.py checks that against
the protobuf classes on every record kind the converters produce.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

from tfpipe.errors import SchemaError

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


def feature(name: str, dtype: str, items: list[Any]) -> bytes:
    """One serialized `Feature` message holding `items` of `dtype`."""
    return _feature(name, dtype, items)


def example(features: Mapping[str, bytes]) -> bytes:
    """A serialized `Example` from name -> serialized `Feature`, keys in byte order."""
    body = b"".join(
        _len_field(0x0A, _len_field(0x0A, key.encode("utf-8")) + _len_field(0x12, features[key]))
        for key in sorted(features, key=lambda k: k.encode("utf-8")))
    return _len_field(0x0A, body)
