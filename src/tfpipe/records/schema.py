"""Feature schema of a dataset: what each record holds, and how to parse it.

A schema maps feature names to `FeatureSpec` (dtype, shape, fixed/var, default).
It is stored in manifest.json and turned into the ``features`` argument of
``tf.io.parse_example`` by `Schema.parse_spec`.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tfpipe.errors import SchemaError

SCHEMA_VERSION: int = 1
"""Version of the record layout this tfpipe writes; stored in every example."""

VERSION_KEY = "tfpipe/schema_version"
DTYPES = ("string", "int64", "float32")
KINDS = ("fixed", "var")
# How a table column's values are encoded in its int64 feature (recorded by the table
# converter, docs/convert.md "Tables"): float64 bit patterns (tf.bitcast to float64),
# epoch times (UTC), times of day and durations, each in a unit.
ENCODINGS = ("float64_bits",) + tuple(f"{what}_{unit}" for what in
                                      ("timestamp", "time_of_day", "duration")
                                      for unit in ("s", "ms", "us", "ns"))


def _encode_default(value: Any) -> Any:
    """JSON form of a default: bytes become text, or {"base64": ...} if not UTF-8."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (list, tuple)):
        return [_encode_default(v) for v in value]
    return value


def _decode_default(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"base64"}:
        return base64.b64decode(value["base64"])
    if isinstance(value, list):
        return [_decode_default(v) for v in value]
    return value


@dataclass
class FeatureSpec:
    """One feature: ``dtype`` string|int64|float32, ``shape`` (fixed only), ``kind``.

    ``kind="var"`` features hold a variable-length list (shape is ignored, use
    ``[]``). ``default`` fills the feature when a record or an older dataset
    lacks it; ``None`` means the feature is required. ``encoding`` (int64 only,
    one of `ENCODINGS`) says what the integers mean; ``None``: plain integers.
    """

    name: str
    dtype: str
    shape: list[int] = field(default_factory=list)
    kind: str = "fixed"
    default: Any = None
    encoding: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError(f"feature name must be a non-empty string, got {self.name!r}")
        if self.dtype not in DTYPES:
            raise SchemaError(f"feature {self.name!r}: dtype must be one of {DTYPES}, "
                              f"got {self.dtype!r}")
        if self.kind not in KINDS:
            raise SchemaError(f"feature {self.name!r}: kind must be one of {KINDS}, "
                              f"got {self.kind!r}")
        if not isinstance(self.shape, (list, tuple)) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in self.shape):
            raise SchemaError(f"feature {self.name!r}: shape must be a list of ints >= 0, "
                              f"got {self.shape!r}")
        self.shape = list(self.shape)
        if self.encoding is not None and (self.encoding not in ENCODINGS
                                          or self.dtype != "int64"):
            raise SchemaError(f"feature {self.name!r}: encoding must be one of {ENCODINGS} "
                              f"on an int64 feature, got {self.encoding!r} ({self.dtype})")
        if self.kind == "var" and self.shape:
            raise SchemaError(f"feature {self.name!r}: var features take shape [], "
                              f"got {self.shape!r}")

    @property
    def num_elements(self) -> int:
        return math.prod(self.shape)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dtype": self.dtype, "shape": list(self.shape), "kind": self.kind}
        if self.default is not None:
            out["default"] = _encode_default(self.default)
        if self.encoding is not None:
            out["encoding"] = self.encoding
        return out

    @classmethod
    def from_json(cls, name: str, obj: Any) -> FeatureSpec:
        if not isinstance(obj, Mapping):
            raise SchemaError(f"feature {name!r}: expected an object with dtype/shape/kind, "
                              f"got {type(obj).__name__}")
        unknown = set(obj) - {"dtype", "shape", "kind", "default", "encoding"}
        if unknown:
            raise SchemaError(f"feature {name!r}: unknown keys {sorted(unknown)}; "
                              "allowed: dtype, shape, kind, default, encoding")
        if "dtype" not in obj:
            raise SchemaError(f"feature {name!r}: missing 'dtype' (one of {DTYPES})")
        return cls(name=name, dtype=obj["dtype"], shape=obj.get("shape", []),
                   kind=obj.get("kind", "fixed"), default=_decode_default(obj.get("default")),
                   encoding=obj.get("encoding"))

    def tf_dtype(self) -> Any:
        import tensorflow as tf

        return {"string": tf.string, "int64": tf.int64, "float32": tf.float32}[self.dtype]

    def default_value(self) -> Any:
        """The default as parse_example wants it (bytes for strings, list if shaped)."""
        d = self.default
        if d is None:
            return None
        if self.dtype == "string":
            conv = (lambda v: v.encode("utf-8") if isinstance(v, str) else bytes(v))
        elif self.dtype == "int64":
            conv = int
        else:
            conv = float
        if isinstance(d, (list, tuple)):
            vals = [conv(v) for v in d]
        else:
            vals = [conv(d)] * max(self.num_elements, 1)
        return vals[0] if not self.shape else vals

    def parse_feature(self) -> Any:
        """The tf.io feature description: FixedLenFeature or VarLenFeature."""
        import tensorflow as tf

        if self.kind == "var":
            return tf.io.VarLenFeature(self.tf_dtype())
        return tf.io.FixedLenFeature(self.shape, self.tf_dtype(),
                                     default_value=self.default_value())


class Schema(Mapping[str, FeatureSpec]):
    """Feature name -> `FeatureSpec`. Always contains ``tfpipe/schema_version``."""

    def __init__(self, features: Iterable[FeatureSpec] | Mapping[str, FeatureSpec] = ()) -> None:
        specs = list(features.values()) if isinstance(features, Mapping) else list(features)
        self._features: dict[str, FeatureSpec] = {}
        for spec in specs:
            if not isinstance(spec, FeatureSpec):
                raise SchemaError(f"Schema takes FeatureSpec objects, got {spec!r}")
            if spec.name in self._features:
                raise SchemaError(f"duplicate feature {spec.name!r}")
            self._features[spec.name] = spec
        # Default 0: a record without the key was written before versions were stored.
        self._features.setdefault(VERSION_KEY, FeatureSpec(VERSION_KEY, "int64", [], "fixed", 0))

    def __getitem__(self, name: str) -> FeatureSpec:
        return self._features[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._features)

    def __len__(self) -> int:
        return len(self._features)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schema):
            return NotImplemented
        return self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"Schema({list(self._features)})"

    def with_features(self, *specs: FeatureSpec) -> Schema:
        """A copy with ``specs`` added or replaced."""
        merged = dict(self._features)
        for s in specs:
            merged[s.name] = s
        return Schema(merged)

    def to_json(self) -> dict[str, Any]:
        return {name: spec.to_json() for name, spec in sorted(self._features.items())}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_json(cls, obj: Any) -> Schema:
        if isinstance(obj, str):
            obj = json.loads(obj)
        if not isinstance(obj, Mapping):
            raise SchemaError(f"schema must be an object name -> feature, got {type(obj).__name__}")
        return cls(FeatureSpec.from_json(str(k), v) for k, v in obj.items())

    def parse_spec(self, names: Iterable[str] | None = None) -> dict[str, Any]:
        """``features`` for ``tf.io.parse_example``: FixedLenFeature (with the
        declared default) for fixed features, VarLenFeature for var ones."""
        keys = self._features if names is None else list(names)
        return {k: self._features[k].parse_feature() for k in keys}


# --------------------------------------------------------------------------- standard schemas

def _s(name: str, dtype: str, kind: str = "fixed", default: Any = None) -> FeatureSpec:
    return FeatureSpec(name, dtype, [], kind, default)


def _image_features() -> list[FeatureSpec]:
    return [
        _s("image/encoded", "string"),
        _s("image/format", "string"),
        _s("image/height", "int64"),
        _s("image/width", "int64"),
        _s("image/filename", "string", default=""),
        _s("image/source_id", "string", default=""),
    ]


def classification_schema() -> Schema:
    """Image + one class label (TF Object Detection API / TFDS key names)."""
    return Schema(_image_features() + [
        _s("image/class/label", "int64"),
        _s("image/class/text", "string", default=""),
    ])


INSTANCE_MASK_KEY = "image/object/mask"
"""Instance masks (OD API key): one single-channel 8-bit PNG per object, in box order,
at the image's size, 1 = the object, 0 = not."""
AREA_KEY = "image/object/area"
IS_CROWD_KEY = "image/object/is_crowd"
KEYPOINT_Y_KEY = "image/object/keypoint/y"
KEYPOINT_X_KEY = "image/object/keypoint/x"
KEYPOINT_VISIBILITY_KEY = "image/object/keypoint/visibility"
"""Keypoints (OD API keys): K per object, object-major (object i's points are
[i*K, (i+1)*K)), y and x normalized to [0, 1] like the boxes, visibility as COCO's
(0 absent, 1 occluded, 2 visible); K and the names are in the manifest."""


def detection_schema(masks: bool = False, keypoints: bool = False) -> Schema:
    """Image + normalized boxes and per-box classes (var-length lists); with `masks`,
    the instance masks, area and crowd flags; with `keypoints`, the keypoint lists."""
    extra: list[FeatureSpec] = []
    if masks:
        extra += [_s(INSTANCE_MASK_KEY, "string", "var"), _s(AREA_KEY, "float32", "var"),
                  _s(IS_CROWD_KEY, "int64", "var")]
    if keypoints:
        extra += [_s(KEYPOINT_Y_KEY, "float32", "var"), _s(KEYPOINT_X_KEY, "float32", "var"),
                  _s(KEYPOINT_VISIBILITY_KEY, "int64", "var")]
    return Schema(_image_features() + [
        _s("image/object/bbox/xmin", "float32", "var"),
        _s("image/object/bbox/ymin", "float32", "var"),
        _s("image/object/bbox/xmax", "float32", "var"),
        _s("image/object/bbox/ymax", "float32", "var"),
        _s("image/object/class/label", "int64", "var"),
        _s("image/object/class/text", "string", "var"),
    ] + extra)


MASK_KEY = "image/segmentation/class/encoded"
"""Semantic segmentation: one single-channel 8-bit PNG per image, pixel = class index."""
MASK_FORMAT_KEY = "image/segmentation/class/format"


def segmentation_schema() -> Schema:
    """Image + its class mask (TF Model Garden / OD API keys): a lossless
    single-channel PNG of the image's size, pixel = class index, 255 = ignore."""
    return Schema(_image_features() + [
        _s(MASK_KEY, "string"),
        _s(MASK_FORMAT_KEY, "string", default="png"),
    ])


def known_feature(name: str) -> FeatureSpec | None:
    """The standard spec for a well-known key (used for defaults and inference)."""
    for schema in (classification_schema(), detection_schema(True, True), segmentation_schema()):
        if name in schema:
            return schema[name]
    return None


# --------------------------------------------------------------------------- inference

def _python_dtype(name: str, value: Any) -> str:
    import numpy as np

    if isinstance(value, (bytes, bytearray, str, np.bytes_, np.str_)):
        return "string"
    if isinstance(value, (bool, int, np.integer, np.bool_)):
        return "int64"
    if isinstance(value, (float, np.floating)):
        return "float32"
    raise SchemaError(f"column {name!r}: cannot store {type(value).__name__} values; "
                      "allowed: str/bytes, int/bool, float, or lists of those")


def _infer_python(name: str, value: Any) -> FeatureSpec:
    import numpy as np

    if isinstance(value, np.ndarray) and value.dtype != object:
        if value.size == 0:
            raise SchemaError(f"column {name!r}: cannot infer a dtype from an empty array")
        dtype = _python_dtype(name, value.reshape(-1)[0])
        return FeatureSpec(name, dtype, list(value.shape), "fixed")
    if isinstance(value, (list, tuple, np.ndarray)):
        if len(value) == 0:
            raise SchemaError(f"column {name!r}: cannot infer a dtype from an empty list; "
                              "pass an explicit schema")
        dtypes = {_python_dtype(name, v) for v in value}
        if dtypes == {"int64", "float32"}:
            dtypes = {"float32"}
        if len(dtypes) != 1:
            raise SchemaError(f"column {name!r}: mixed element types {sorted(dtypes)}")
        return FeatureSpec(name, dtypes.pop(), [], "var")
    return FeatureSpec(name, _python_dtype(name, value), [], "fixed")


def _arrow_dtype(name: str, t: Any) -> str:
    import pyarrow as pa

    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "string"
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return "int64"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "float32"
    raise SchemaError(f"column {name!r}: Arrow type {t} cannot be stored; allowed: "
                      "string/binary, integer/bool, floating, or lists of those")


def infer_schema(values: Any) -> Schema:
    """Infer a schema from one row (a dict of Python/NumPy values), or from a
    ``pyarrow.Schema`` / ``pyarrow.Table``.

    Scalars are fixed ``[]`` features; lists are ``var``; NumPy arrays are
    fixed with their shape; Arrow fixed-size lists are fixed ``[n]``.
    """
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        pa = None
    if pa is not None and isinstance(values, (pa.Table, pa.RecordBatch)):
        values = values.schema
    if pa is not None and isinstance(values, pa.Schema):
        specs = []
        for f in values:
            t = f.type
            if pa.types.is_fixed_size_list(t):
                specs.append(FeatureSpec(f.name, _arrow_dtype(f.name, t.value_type),
                                         [t.list_size], "fixed"))
            elif pa.types.is_list(t) or pa.types.is_large_list(t):
                specs.append(FeatureSpec(f.name, _arrow_dtype(f.name, t.value_type), [], "var"))
            else:
                specs.append(FeatureSpec(f.name, _arrow_dtype(f.name, t), [], "fixed"))
        return Schema(specs)
    if isinstance(values, Mapping):
        return Schema(_infer_python(str(k), v) for k, v in values.items())
    raise SchemaError(f"infer_schema takes a dict row or a pyarrow Schema/Table, "
                      f"got {type(values).__name__}")
