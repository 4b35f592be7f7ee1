"""`data.keys`: records with other keys read as tfpipe's roles, inside the graph-only parse.

The rest of the pipeline reads tfpipe's own keys (`_source.IMAGE_KEY`, ...). For
records tfpipe did not write, `KeyedParse` parses the record's keys that the
mapping names and hands back tfpipe's keys: the image bytes and label as they
are, boxes per coordinate (``image/object/bbox/{ymin,xmin,ymax,xmax}``)
normalized to [0, 1] from one key of 4 floats per box (yxyx or xyxy) or four
keys, pixel units divided by the image's height/width (the mapped height/width
keys, else the size in the encoded image's header). Graph ops only.

`resolve` checks the mapping against the records' schema at build time (the
manifest's, TFDS's metadata, or the first record of a bare shard): each key
present, with the role's dtype and one value per record where the role needs
one; errors name the role, the key, the expected and the found type and list
the keys the records have. Roles left unmapped fall back to tfpipe's own keys.
With no mapping at all the pipeline never comes here (bit-identical).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import tensorflow as tf

from tfpipe.errors import ConfigError

IMAGE_KEY = "image/encoded"
LABEL_KEY = "image/class/label"
BOX_KEYS = tuple(f"image/object/bbox/{k}" for k in ("ymin", "xmin", "ymax", "xmax"))
BOX_LABEL_KEY = "image/object/class/label"
MASK_KEY = "image/segmentation/class/encoded"  # one single-channel PNG: class per pixel
INSTANCE_MASK_KEY = "image/object/mask"  # one single-channel PNG per object (1 = object)
# K points per object, object-major, y/x normalized like the boxes, COCO visibility
KEYPOINT_KEYS = ("image/object/keypoint/y", "image/object/keypoint/x")
KEYPOINT_VISIBILITY_KEY = "image/object/keypoint/visibility"

# role -> (tfpipe's own key(s), dtype, one value per record?)
ROLES: dict[str, tuple[Any, str, bool]] = {
    "image": (IMAGE_KEY, "string", True),
    "label": (LABEL_KEY, "int64", True),
    "class_text": ("image/class/text", "string", True),
    "boxes": (BOX_KEYS, "float32", False),
    "box_labels": (BOX_LABEL_KEY, "int64", False),
    "mask": (MASK_KEY, "string", True),
    "keypoints": ("image/object/keypoint/x", "float32", False),
    "height": ("image/height", "int64", True),
    "width": ("image/width", "int64", True),
    "filename": ("image/filename", "string", True),
}
# roles each task reads; `keypoints` is not mappable yet (data.keypoints reads
# tfpipe's own three keys, KEYPOINT_KEYS + KEYPOINT_VISIBILITY_KEY: _keypoints.py)
TASK_ROLES = {"classification": ("image", "label"),
              "detection": ("image", "boxes", "box_labels"),
              "segmentation": ("image", "mask")}
NOT_YET = ("mask", "keypoints")  # refused (or, derived, dropped) unless the task reads them
_CONVENTIONS = ("box_format", "box_units")


@dataclass(frozen=True)
class KeyPlan:
    """The checked mapping: role -> record key (boxes: one key or four), conventions."""

    keys: dict[str, Any]
    carried: tuple[str, ...]  # the roles the task reads (a parse of all features)
    box_format: str = "yxyx"
    box_units: str = "normalized"

    def tfpipe_keys(self) -> list[str]:
        """tfpipe's keys this plan hands out (what `KeyedParse` returns)."""
        out: list[str] = []
        for role in self.keys:
            own = ROLES[role][0]
            out.extend(own if isinstance(own, tuple) else [own])
        return out


def _describe(spec: Any) -> str:
    if spec.kind == "var":
        return f"{spec.dtype} list"
    return f"{spec.dtype} {list(spec.shape)}" if spec.shape else f"{spec.dtype} scalar"


def _have(schema: Any) -> str:
    from tfpipe.records import VERSION_KEY

    return ", ".join(f"{k} ({_describe(schema[k])})" for k in sorted(schema) if k != VERSION_KEY)


def resolve(mapping: dict[str, Any] | None, derived: dict[str, Any] | None, schema: Any,
            task: str, where: str) -> KeyPlan | None:
    """The checked `KeyPlan` for `task`, or None for tfpipe's own records read as
    always (no mapping given or derived).

    `mapping`: `data.keys` (`KeysConfig.mapped`); `derived`: what a TFDS
    directory's metadata implies (`source["keys"]`), overridden role by role by
    `mapping`. `where`: the data path and split, for the messages."""
    if not mapping and not derived:
        return None
    given = dict(mapping or {})
    needed = TASK_ROLES.get(task, ("image",))
    not_yet = [r for r in NOT_YET if r not in needed]
    for role in not_yet:
        if role in given:
            why = ("data.task 'segmentation' reads it" if role == "mask" else
                   "data.keypoints reads tfpipe's own keys image/object/keypoint/{y,x,"
                   "visibility}; a mapping for them is not built yet")
            raise ConfigError(f"data.keys.{role}: data.task {task!r} does not use the "
                              f"{role} role ({why}); drop data.keys.{role}")
    merged = {r: v for r, v in (derived or {}).items() if r not in not_yet}
    if "boxes" in given:  # the conventions belong to the boxes they describe
        for c in _CONVENTIONS:
            merged.pop(c, None)
    merged.update(given)
    conventions = {c: merged.pop(c) for c in _CONVENTIONS if c in merged}
    for role in needed:  # unmapped: tfpipe's own key, when the records have it
        own = ROLES[role][0]
        if role not in merged and all(k in schema for k in (own if isinstance(own, tuple)
                                                            else (own,))):
            merged[role] = own if not isinstance(own, tuple) else dict(
                zip(("ymin", "xmin", "ymax", "xmax"), own))
    if conventions.get("box_units") == "pixels" and ("height" in merged) != ("width" in merged):
        raise ConfigError("data.keys.height/width: pixel boxes are divided by both; map "
                          "both keys, or neither (then the encoded image's own size is used)")
    keys: dict[str, Any] = {}
    # every role the task needs, and every other one mapped: a wrong key is
    # named now, not when (#23/#24) a task starts reading it
    for role in (*needed, *(r for r in merged if r not in needed)):
        if role not in merged:
            own = ROLES[role][0]
            own_text = ", ".join(own) if isinstance(own, tuple) else own
            raise ConfigError(
                f"data.keys.{role}: not mapped, and the records of {where} have no "
                f"{own_text!r} (tfpipe's own key for it); map it, e.g. data.keys.{role}: "
                f"KEY. The records have: {_have(schema)}")
        keys[role] = _check(role, merged[role], schema, where)
    return KeyPlan(keys, needed, conventions.get("box_format", "yxyx"),
                   conventions.get("box_units", "normalized"))


def _check(role: str, key: Any, schema: Any, where: str) -> Any:
    """`key` (or the four box keys) present in `schema` with the role's type."""
    _, dtype, scalar = ROLES[role]
    four = isinstance(key, dict)
    for coord, k in (key.items() if four else [(None, key)]):
        name = f"data.keys.{role}" + (f".{coord}" if coord else "")
        spec = schema.get(k)
        expected = (f"{dtype} " + ("scalar (one value per record)" if scalar
                                   else "list" if four or role != "boxes"
                                   else "list (4 values per box)"))
        if spec is None:
            raise ConfigError(f"{name}: key {k!r} is not in the records of {where} (the "
                              f"{role} role needs {expected}). The records have: "
                              f"{_have(schema)}")
        one = spec.kind == "fixed" and spec.num_elements == 1
        if spec.dtype != dtype or (scalar and not one):
            raise ConfigError(f"{name}: key {k!r} is {_describe(spec)} in the records of "
                              f"{where}, the {role} role needs {expected}. The records have: "
                              f"{_have(schema)}")
        if role == "boxes" and not four and spec.kind == "fixed" and spec.num_elements % 4:
            raise ConfigError(f"{name}: key {k!r} holds {spec.num_elements} floats per "
                              f"record in {where}; one-key boxes are 4 floats per box")
    return dict(key) if four else key


def _image_hw(encoded: tf.Tensor) -> tf.Tensor:
    """[height, width] (float32) of an encoded image from its header (JPEG, PNG);
    other formats are decoded for their size."""
    head = tf.strings.substr(encoded, 0, 8)

    def jpeg() -> tf.Tensor:
        return tf.cast(tf.image.extract_jpeg_shape(encoded)[:2], tf.float32)

    def png() -> tf.Tensor:  # IHDR: width, height as big-endian uint32 at byte 16
        b = tf.cast(tf.io.decode_raw(tf.strings.substr(encoded, 16, 8), tf.uint8), tf.float32)
        be = lambda v: ((v[0] * 256 + v[1]) * 256 + v[2]) * 256 + v[3]  # noqa: E731
        return tf.stack([be(b[4:8]), be(b[0:4])])

    def other() -> tf.Tensor:
        image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
        return tf.cast(tf.shape(image)[:2], tf.float32)

    is_jpeg = tf.strings.substr(head, 0, 3) == b"\xff\xd8\xff"
    is_png = head == b"\x89PNG\r\n\x1a\n"
    return tf.case([(is_jpeg, jpeg), (is_png, png)], default=other)


class KeyedParse:
    """`RecordSource.parse` / `parse_spec` under a `KeyPlan`: the record's keys in,
    tfpipe's keys out (boxes per coordinate, normalized). Graph ops only."""

    def __init__(self, plan: KeyPlan) -> None:
        self.plan = plan
        by_own: dict[str, str] = {}
        for role in plan.keys:
            own = ROLES[role][0]
            for k in (own if isinstance(own, tuple) else (own,)):
                by_own[k] = role
        self.role_of = by_own  # tfpipe key -> role

    def _feature(self, role: str) -> Any:
        dtype = {"string": tf.string, "int64": tf.int64, "float32": tf.float32}[ROLES[role][1]]
        return tf.io.FixedLenFeature([], dtype) if ROLES[role][2] else tf.io.VarLenFeature(dtype)

    def _roles(self, features: Iterable[str] | None) -> list[str]:
        if features is None:
            return list(self.plan.carried)
        roles: list[str] = []
        for name in features:
            role = self.role_of.get(name)
            if role is None:
                raise ConfigError(f"feature {name!r} is not mapped by data.keys (mapped: "
                                  f"{', '.join(self.plan.tfpipe_keys())})")
            if role not in roles:
                roles.append(role)
        return roles

    def parse_spec(self, features: Iterable[str] | None = None) -> dict[str, Any]:
        """``tf.io.parse_example`` features of the record keys behind the named
        tfpipe keys, in their order (the block path parses image + label with it)."""
        spec: dict[str, Any] = {}
        for role in self._roles(features):
            key = self.plan.keys[role]
            for k in (key.values() if isinstance(key, dict) else [key]):
                spec[k] = self._feature(role)
        return spec

    def __call__(self, serialized: tf.Tensor,
                 features: Iterable[str] | None = None) -> dict[str, tf.Tensor]:
        roles = self._roles(features)
        if "boxes" in roles and self.plan.box_units == "pixels":
            for extra in ("height", "width"):
                if extra in self.plan.keys and extra not in roles:
                    roles.append(extra)
            if "image" not in roles and "height" not in self.plan.keys:
                roles.append("image")
        spec: dict[str, Any] = {}
        for role in roles:
            key = self.plan.keys[role]
            for k in (key.values() if isinstance(key, dict) else [key]):
                spec[k] = self._feature(role)
        parsed = tf.io.parse_single_example(serialized, spec)
        parsed = {k: tf.sparse.to_dense(v) if isinstance(v, tf.sparse.SparseTensor) else v
                  for k, v in parsed.items()}
        out: dict[str, tf.Tensor] = {}
        for role in roles:
            key = self.plan.keys[role]
            if role == "boxes":
                out.update(self._boxes(parsed, key))
            else:
                out[ROLES[role][0]] = parsed[key]
        return out

    def _boxes(self, parsed: dict[str, tf.Tensor], key: Any) -> dict[str, tf.Tensor]:
        if isinstance(key, dict):
            cols = [tf.reshape(parsed[key[c]], [-1]) for c in ("ymin", "xmin", "ymax", "xmax")]
        else:
            flat = tf.reshape(parsed[key], [-1, 4])
            order = (0, 1, 2, 3) if self.plan.box_format == "yxyx" else (1, 0, 3, 2)
            cols = [flat[:, i] for i in order]
        if self.plan.box_units == "pixels":
            if "height" in self.plan.keys:
                h = tf.cast(parsed[self.plan.keys["height"]], tf.float32)
                w = tf.cast(parsed[self.plan.keys["width"]], tf.float32)
            else:
                hw = _image_hw(parsed[self.plan.keys["image"]])
                h, w = hw[0], hw[1]
            cols = [cols[0] / h, cols[1] / w, cols[2] / h, cols[3] / w]
        return dict(zip(BOX_KEYS, cols))
