"""TFDS-prepared directories read as they are: a `Manifest` made from TFDS's metadata.

A directory that `tfds` prepared (``~/tensorflow_datasets/NAME/VERSION``) holds
``dataset_info.json`` (splits, ``shardLengths``, the file name template),
``features.json`` (the `FeaturesDict` as JSON) and ``<feature>.labels.txt`` files
(ClassLabel names), beside shards named ``NAME-SPLIT.tfrecord-00000-of-0000N``.
`tfds_manifest` turns these into the in-memory `Manifest` a tfpipe conversion
would have written (schema, per-shard counts, class names), so cardinality, the
damage policy and exact resume work exactly as for converted data; nothing is
rewritten or re-encoded. Its ``source`` carries the derived key mapping
(``source["keys"]``, the `data.keys` format of docs/own-records.md) and the
image format.

The format read is TFDS 4.x's on-disk one (checked against tensorflow-datasets
4.9: ``features/*.py``, ``naming.py``, ``dataset_info.proto``): nested features
join their names with "/" into the record key (a `Sequence` adds nothing:
``objects/bbox``); `Image` is the encoded bytes, `ClassLabel` an int64,
`BBoxFeature` 4 floats per box (a `Sequence` of them one flat float list),
`Text` bytes, `Tensor` its dtype as int64/float/bytes lists.

A directory holding tfpipe's own ``manifest.json`` (tfpipe writes TFDS metadata
beside it too) is a tfpipe dataset, never read through this module.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from tfpipe.errors import ManifestError
from tfpipe.records.manifest import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    Manifest,
    ShardEntry,
    SplitInfo,
)
from tfpipe.records.schema import FeatureSpec, Schema

DATASET_INFO = "dataset_info.json"
FEATURES = "features.json"
# TFDS's default file name (naming.py DEFAULT_FILENAME_TEMPLATE), for metadata
# written before `filepathTemplate` was stored
DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
_SPLIT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
# TFDS BBoxFormat -> (box_format, box_units) of data.keys; XYWH has no mapping
BOX_FORMATS = {"REL_YXYX": ("yxyx", "normalized"), "REL_XYXY": ("xyxy", "normalized"),
               "YXYX": ("yxyx", "pixels"), "XYXY": ("xyxy", "pixels")}
_INT = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
_FLOAT = ("float16", "bfloat16", "float32", "float64")


def is_tfds_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a TFDS-prepared directory (TFDS metadata, no manifest.json)."""
    p = os.fspath(path)
    return (os.path.isdir(p) and os.path.isfile(os.path.join(p, DATASET_INFO))
            and os.path.isfile(os.path.join(p, FEATURES))
            and not os.path.isfile(os.path.join(p, MANIFEST_NAME)))


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """``path``'s manifest: made from TFDS's metadata in a TFDS-prepared directory
    (`tfds_manifest`), else tfpipe's manifest.json (`Manifest.load`)."""
    if is_tfds_dir(path):
        return tfds_manifest(path)
    return Manifest.load(path)


def _read_json(path: str) -> Any:
    size = os.path.getsize(path)
    if size > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{path}: {size} bytes is larger than any real TFDS metadata "
                            f"(limit {MAX_MANIFEST_BYTES}); refusing to read it")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ManifestError(f"{path}: not TFDS metadata JSON ({e})") from e


def _count(value: Any, where: str) -> int:
    """A proto int64 (JSON string or int) >= 0."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = -1
    if n < 0 or isinstance(value, bool):
        raise ManifestError(f"{where}: expected a count >= 0, got {value!r}")
    return n


def shard_file_names(info: dict[str, Any], split: dict[str, Any], where: str) -> list[str]:
    """The shard file names of one `dataset_info.json` split, in order, from its
    ``filepathTemplate`` (TFDS naming.py: SHARD_X_OF_Y is ``00000-of-00004``)."""
    template = split.get("filepathTemplate") or DEFAULT_TEMPLATE
    n = len(split.get("shardLengths") or [])
    names = []
    for i in range(n):
        name = template
        for field, value in (("{DATASET}", info.get("name", "")),
                             ("{SPLIT}", split["name"]),
                             ("{FILEFORMAT}", info.get("fileFormat") or "tfrecord"),
                             ("{SHARD_X_OF_Y}", f"{i:05d}-of-{n:05d}"),
                             ("{SHARD_INDEX}", f"{i:05d}"), ("{NUM_SHARDS}", f"{n:05d}")):
            name = name.replace(field, str(value))
        if "{" in name or "/" in name or "\\" in name or name in ("", ".", ".."):
            raise ManifestError(f"{where}: splits[{split['name']!r}].filepathTemplate "
                                f"{template!r} gives {name!r}, not a file name in the "
                                "dataset directory; refusing to read it")
        names.append(name)
    return names


class _Features:
    """What `features.json` declares: the record schema and the features a key
    mapping is derived from (images, class labels, boxes, texts)."""

    def __init__(self, directory: str, obj: Any) -> None:
        self.directory = directory
        self.specs: list[FeatureSpec] = []
        self.images: dict[str, dict[str, Any]] = {}  # key -> {format, channels}
        self.labels: dict[str, list[str]] = {}  # key -> class names ([] if unnamed)
        self.boxes: dict[str, str] = {}  # key -> TFDS bboxFormat
        self.texts: list[str] = []
        self.unread: list[str] = []  # feature kinds tfpipe does not parse
        self.walk(obj, "", None, False)

    def walk(self, obj: Any, key: str, file_name: str | None, in_seq: bool) -> None:
        if not isinstance(obj, dict):
            raise ManifestError(f"{os.path.join(self.directory, FEATURES)}: feature "
                                f"{key or '(top level)'!r}: expected an object, got "
                                f"{type(obj).__name__}")
        cls = str(obj.get("pythonClassName", "")).rsplit(".", 1)[-1]
        if cls == "FeaturesDict" or (not cls and "featuresDict" in obj):
            children = (obj.get("featuresDict") or {}).get("features") or {}
            for child, sub in children.items():
                # TFDS feature.convert_feature_name_to_filename: "/" -> "." in the
                # child's name, joined to its parent's with "-"
                leaf = str(child).replace("/", ".")
                self.walk(sub, f"{key}/{child}" if key else str(child),
                          leaf if file_name is None else f"{file_name}-{leaf}", in_seq)
            return
        if cls == "Sequence":
            # a Sequence adds no name: its feature's values are flattened per record
            self.walk((obj.get("sequence") or {}).get("feature") or {}, key, file_name, True)
            return
        kind = "var" if in_seq else "fixed"
        if cls == "Image":
            image = obj.get("image") or {}
            dims = (image.get("shape") or {}).get("dimensions") or []
            self.images[key] = {"format": image.get("encodingFormat"),
                                "channels": int(dims[-1]) if dims and int(dims[-1]) > 0
                                else None, "in_sequence": in_seq}
            self.specs.append(FeatureSpec(key, "string", [], kind))
        elif cls == "ClassLabel":
            label = obj.get("classLabel") or {}
            names = [str(n) for n in label.get("names", [])] or self._names(file_name or key)
            self.labels[key] = names
            self.specs.append(FeatureSpec(key, "int64", [], kind))
        elif cls == "BBoxFeature":
            self.boxes[key] = str((obj.get("boundingBox") or {}).get("bboxFormat")
                                  or "REL_YXYX")
            self.specs.append(FeatureSpec(key, "float32", [] if in_seq else [4], kind))
        elif cls == "Text":
            self.texts.append(key)
            self.specs.append(FeatureSpec(key, "string", [], kind))
        elif cls in ("Tensor", "Scalar") or "tensor" in obj:
            tensor = obj.get("tensor") or {}
            dims = [int(d) for d in (tensor.get("shape") or {}).get("dimensions") or []]
            dtype = str(tensor.get("dtype", ""))
            if tensor.get("encoding", "none") not in ("none", "", None) or dtype == "string":
                dt = "string"
            elif dtype in _INT:
                dt = "int64"
            elif dtype in _FLOAT:
                dt = "float32"
            else:
                self.unread.append(f"{key} ({dtype} tensor)")
                return
            fixed = not in_seq and all(d >= 0 for d in dims) and (dt != "string" or not dims)
            self.specs.append(FeatureSpec(key, dt, dims if fixed else [],
                                          "fixed" if fixed else "var"))
        else:
            self.unread.append(f"{key} ({cls or 'unknown feature'})")

    def _names(self, file_name: str) -> list[str]:
        path = os.path.join(self.directory, f"{file_name}.labels.txt")
        if not os.path.isfile(path):
            return []
        with open(path, encoding="utf-8") as f:  # TFDS _load_names_from_file
            return [n.strip() for n in f.read().split("\n") if n.strip()]

    def keys(self) -> dict[str, Any]:
        """The `data.keys` mapping TFDS's metadata implies (roles it cannot tell are
        left out: the user maps them)."""
        out: dict[str, Any] = {}
        top_images = [k for k, v in self.images.items() if not v["in_sequence"]]
        masks = [k for k in top_images if "segmentation" in k or "mask" in k]
        pictures = [k for k in top_images if k not in masks]
        image = _pick(pictures, ("image", "image/encoded"))
        if image:
            out["image"] = image
        label = _pick([k for k in self.labels if "/" not in k
                       or k == "image/class/label"], ("label", "image/class/label"))
        if label:
            out["label"] = label
        boxes = _pick(list(self.boxes), ("objects/bbox", "bbox"))
        if boxes and self.boxes[boxes] in BOX_FORMATS:
            out["boxes"] = boxes
            out["box_format"], out["box_units"] = BOX_FORMATS[self.boxes[boxes]]
            prefix = boxes.rsplit("/", 1)[0] + "/" if "/" in boxes else ""
            box_labels = _pick([k for k in self.labels if k.startswith(prefix) and k != label],
                               (prefix + "label",))
            if box_labels:
                out["box_labels"] = box_labels
        name = _pick([t for t in self.texts if t in ("file_name", "filename", "image/filename")],
                     ("file_name", "filename", "image/filename"))
        if name:
            out["filename"] = name
        mask = _pick(masks, ("segmentation_label",))
        if mask:
            out["mask"] = mask
        return out


def _pick(candidates: list[str], preferred: tuple[str, ...]) -> str | None:
    """The preferred name among ``candidates``, else the only one, else None."""
    for p in preferred:
        if p in candidates:
            return p
    return candidates[0] if len(candidates) == 1 else None


def tfds_manifest(directory: str | os.PathLike[str]) -> Manifest:
    """The `Manifest` of a TFDS-prepared directory, from its metadata alone.

    Per shard: the file TFDS's own naming gives, ``shardLengths`` as its record
    count, its size on disk (0 when missing, which the readers report by name)
    and no sha256 (TFDS stores none). ``class_names``: the ClassLabel of the
    derived ``label`` (else of the box labels). ``source``: ``format: tfds``,
    the dataset's name and version, ``keys`` (the derived mapping),
    ``image_format`` and ``unread`` (features tfpipe does not parse)."""
    d = os.fspath(directory)
    info_path = os.path.join(d, DATASET_INFO)
    info = _read_json(info_path)
    if not isinstance(info, dict) or not isinstance(info.get("splits"), list):
        raise ManifestError(f"{info_path}: expected TFDS's DatasetInfo JSON with a "
                            "'splits' list")
    file_format = info.get("fileFormat") or "tfrecord"
    if file_format != "tfrecord":
        raise ManifestError(f"{info_path}: fileFormat {file_format!r}; tfpipe reads TFDS "
                            "datasets prepared as 'tfrecord' (prepare it with "
                            "file_format='tfrecord', e.g. `tfds build --file_format=tfrecord`)")
    features = _Features(d, _read_json(os.path.join(d, FEATURES)))
    splits: dict[str, SplitInfo] = {}
    for i, split in enumerate(info["splits"]):
        where = f"{info_path}: splits[{i}]"
        if not isinstance(split, dict) or not _SPLIT_RE.match(str(split.get("name", ""))):
            raise ManifestError(f"{where}: expected an object with a split 'name' "
                                "(letters, digits, '_', '-', '.')")
        lengths = split.get("shardLengths") or []
        if not isinstance(lengths, list):
            raise ManifestError(f"{where}.shardLengths: expected a list of counts")
        shards = []
        for name, n in zip(shard_file_names(info, split, info_path), lengths):
            path = os.path.join(d, name)
            size = os.path.getsize(path) if os.path.isfile(path) else 0
            shards.append(ShardEntry(name, _count(n, f"{where}.shardLengths"), size, ""))
        splits[str(split["name"])] = SplitInfo(shards)
    keys = features.keys()
    names = features.labels.get(keys.get("label", ""), []) or \
        features.labels.get(keys.get("box_labels", ""), [])
    image = features.images.get(keys.get("image", ""), {})
    source = {"format": "tfds", "name": str(info.get("name", "")),
              "version": str(info.get("version", "")), "keys": keys,
              "image_format": image.get("format"), "unread": features.unread}
    return Manifest(schema=Schema(features.specs), splits=splits, class_names=names,
                    compression=None, tool_version=f"tfds:{info.get('version', '')}",
                    schema_version=0, source=source)
