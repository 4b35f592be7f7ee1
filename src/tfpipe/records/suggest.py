"""What foreign records hold, and the `data.keys` block that reads them.

`tfpipe inspect` on records tfpipe did not write prints every key with its dtype
and shape (over the first records) and a suggested ``data.keys`` block in the
format of docs/own-records.md, ready to paste. Recognised, in this order:
- TFDS: ``image``, ``label``, ``objects/bbox`` (TFDS's BBoxFeature: yxyx,
  normalized), ``objects/label``, ``file_name``, ``segmentation_label``;
- the TF Object Detection API / Model Garden (tfpipe's own keys too):
  ``image/encoded``, ``image/class/label``, ``image/class/text``,
  ``image/object/bbox/{ymin,xmin,ymax,xmax}``, ``image/object/class/label``,
  ``image/height``, ``image/width``, ``image/filename`` / ``image/source_id``,
  ``image/segmentation/class/encoded``;
- generic: the one bytes feature whose values start with JPEG/PNG/GIF/BMP magic
  is the image, an int64 scalar (one named like a label first) the label. Boxes
  under other keys are suggested with a note: their order and units cannot be
  read from the records, they are declared (``box_format``, ``box_units``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tfpipe.records.codec import _KIND_DTYPE, _example_pb2

# the roles in the order docs/own-records.md lists them
ROLES = ("image", "label", "class_text", "boxes", "box_format", "box_units", "box_labels",
         "mask", "keypoints", "height", "width", "filename")
_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"BM")
_CORNERS = ("ymin", "xmin", "ymax", "xmax")
_OD_BOX = {c: f"image/object/bbox/{c}" for c in _CORNERS}
# (role, key) pairs known by name: TFDS, then the OD API / Model Garden
_KNOWN = (
    ("image", "image"), ("label", "label"), ("box_labels", "objects/label"),
    ("filename", "file_name"), ("mask", "segmentation_label"),
    ("image", "image/encoded"), ("label", "image/class/label"),
    ("class_text", "image/class/text"), ("box_labels", "image/object/class/label"),
    ("height", "image/height"), ("width", "image/width"), ("filename", "image/filename"),
    ("filename", "image/source_id"), ("mask", "image/segmentation/class/encoded"),
)
_LABELISH = re.compile(r"label|class|category|target", re.I)
_NOT_LABEL = re.compile(r"height|width|id$|_id|/id|size|count|num|index|year|time|version",
                        re.I)


@dataclass
class FeatureInfo:
    """One key over the records looked at: dtype, value counts, first value."""

    key: str
    dtype: str
    min_len: int
    max_len: int
    records: int  # how many of the records hold it
    image: bool = False  # bytes starting with image magic
    max_abs: float = 0.0  # floats: the largest |value| seen (normalized boxes <= 1)

    @property
    def shape(self) -> str:
        if self.min_len == self.max_len:
            return "[]" if self.min_len == 1 else f"[{self.min_len}]"
        return f"var ({self.min_len}..{self.max_len})"


@dataclass
class Suggestion:
    """The suggested roles (role -> key, or for four box keys a dict) and notes."""

    keys: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    own: bool = False  # tfpipe's own keys: the block is what applies without one

    def yaml(self) -> str:
        """The ``data: keys:`` block, ready to paste (docs/own-records.md format)."""
        lines = ["data:", "  keys:"]
        for role in ROLES:
            if role not in self.keys:
                continue
            v = self.keys[role]
            if isinstance(v, dict):
                inner = ", ".join(f"{c}: {_scalar(v[c])}" for c in _CORNERS)
                lines.append(f"    {role}: {{{inner}}}")
            else:
                lines.append(f"    {role}: {_scalar(v)}")
        return "\n".join(lines) + "\n"


def _scalar(v: str) -> str:
    # plain YAML where it reads back as the same string, else JSON quoting
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_./-]*", v) and v.lower() not in (
            "true", "false", "yes", "no", "on", "off", "null"):
        return v
    return json.dumps(v)


def features(records: Iterable[bytes]) -> dict[str, FeatureInfo]:
    """Every key of the records with its dtype and value counts."""
    pb = _example_pb2()
    out: dict[str, FeatureInfo] = {}
    for data in records:
        ex = pb.Example.FromString(data)
        for key, feat in ex.features.feature.items():
            which = feat.WhichOneof("kind") or "bytes_list"
            values = getattr(feat, which).value
            n = len(values)
            info = out.get(key)
            if info is None:
                info = out[key] = FeatureInfo(key, _KIND_DTYPE[which], n, n, 0)
            info.min_len, info.max_len = min(info.min_len, n), max(info.max_len, n)
            info.records += 1
            if which == "bytes_list" and n and values[0].startswith(_MAGIC):
                info.image = True
            if which == "float_list" and n:
                info.max_abs = max(info.max_abs, max(abs(v) for v in values))
    return dict(sorted(out.items()))


def suggest(feats: dict[str, FeatureInfo], total: int) -> Suggestion:
    """The `data.keys` roles for records with these features (`features`)."""
    s = Suggestion()
    keys = s.keys
    for role, key in _KNOWN:
        f = feats.get(key)
        if f is None or role in keys:
            continue
        want = {"image": "string", "class_text": "string", "filename": "string",
                "mask": "string"}.get(role, "int64")
        if f.dtype != want:
            continue
        if role == "label" and f.max_len != 1:
            continue
        keys[role] = key
    if all(k in feats and feats[k].dtype == "float32" for k in _OD_BOX.values()):
        keys["boxes"] = dict(_OD_BOX)
    elif "objects/bbox" in feats and feats["objects/bbox"].dtype == "float32":
        keys.update(boxes="objects/bbox", box_format="yxyx", box_units="normalized")
    if "image" not in keys:  # generic: the one bytes feature holding an image
        images = [f.key for f in feats.values() if f.dtype == "string" and f.image]
        if len(images) == 1:
            keys["image"] = images[0]
        elif images:
            s.notes.append(f"several keys hold images ({images}); set data.keys.image to the "
                           "one to train on")
    if "label" not in keys and "mask" not in keys:  # generic: an int64 scalar in every record
        scalars = [f.key for f in feats.values() if f.dtype == "int64" and f.min_len == 1
                   and f.max_len == 1 and f.records == total and not _NOT_LABEL.search(f.key)]
        named = [k for k in scalars if _LABELISH.search(k)]
        pick = named if named else scalars
        if len(pick) == 1:
            keys["label"] = pick[0]
        elif len(pick) > 1:
            s.notes.append(f"several int64 scalars could be the label ({pick}); set "
                           "data.keys.label to the class index")
    if "boxes" not in keys:  # generic: a float key named like boxes, 4 values per box
        boxy = [f for f in feats.values() if f.dtype == "float32" and re.search(
            r"bbox|box", f.key, re.I) and f.min_len % 4 == 0 and f.max_len % 4 == 0]
        if len(boxy) == 1:
            f = boxy[0]
            units = "normalized" if f.max_abs <= 1.0 else "pixels"
            keys.update(boxes=f.key, box_format="yxyx", box_units=units)
            s.notes.append(f"{f.key}: the order of the four numbers (yxyx or xyxy) cannot be "
                           f"read from the records: check box_format; box_units {units} "
                           f"from the largest value seen ({f.max_abs:g})")
    s.own = keys.get("image") == "image/encoded" and all(
        (v == dict(_OD_BOX) if r == "boxes" else v.startswith("image/"))
        for r, v in keys.items())
    if "image" not in keys:
        s.notes.append("no key holds JPEG/PNG/GIF/BMP bytes: not image records (a table? "
                       "see docs/tabular.md)")
    return s
