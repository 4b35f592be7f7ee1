"""TFDS metadata beside manifest.json, so `tfds.builder_from_directory(OUT)` reads a dataset.

`tensorflow_datasets` is a dev dependency, never imported here: the files are
written by hand in the format TFDS 4.x reads (checked against TFDS 4.9's
`read_only_builder.py`, `dataset_info.py`, `features/*.py`, `naming.py`):

- ``dataset_info.json``: the `DatasetInfo` proto as JSON: name, version, file
  format, and per split `shardLengths` / `numBytes` / `filepathTemplate`
  (``{SPLIT}-{SHARD_X_OF_Y}.tfrecord``, which formats to tfpipe's shard names).
- ``features.json``: the `FeaturesDict` proto as JSON. Its keys ARE the record
  keys (``image/encoded``, ``image/class/label``, ...): TFDS joins nested keys with
  "/" to get the `tf.train.Example` keys it parses, and a flat key that already
  contains "/" is used as is, so TFDS parses the records as written.
- ``<feature>.labels.txt``: class names of each `ClassLabel`, one per line.
- ``metadata.json`` (keypoints only): ``{"keypoints": {"names": [...], "skeleton":
  [[i, j], ...]}}``, what TFDS serves as ``builder.info.metadata``.

The record keys are mapped to feature connectors in `tfds_features` (table in
docs/storage.md "Reading with TFDS").
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from tfpipe.records import (INSTANCE_MASK_KEY, KEYPOINT_VISIBILITY_KEY, KEYPOINT_X_KEY,
                            KEYPOINT_Y_KEY, MASK_KEY, Manifest, shard_name)

DATASET_INFO = "dataset_info.json"
FEATURES = "features.json"
METADATA = "metadata.json"  # TFDS's MetadataDict file (builder.info.metadata)
_KEYPOINT_KEYS = (KEYPOINT_Y_KEY, KEYPOINT_X_KEY, KEYPOINT_VISIBILITY_KEY)
# tfpipe's `{split}-{index:05d}-of-{count:05d}.tfrecord`: SHARD_X_OF_Y formats as
# `{index:05d}-of-{count:05d}` (5 digits, more past 99999 shards, as shard_name does).
FILEPATH_TEMPLATE = "{SPLIT}-{SHARD_X_OF_Y}.tfrecord"
# TFDS needs a version; tfpipe datasets have none of their own (schema_version is
# the record layout, not the data), so every dataset reads as 1.0.0.
VERSION = "1.0.0"

_PY = "tensorflow_datasets.core.features."
_DICT = _PY + "features_dict.FeaturesDict"
_OBJECT_PREFIX = "image/object/"
# `as_dataset(split=...)` accepts only these names (TFDS splits._SUB_SPEC_RE).
_TFDS_SPLIT_RE = re.compile(r"^[\w-]+$")


def _tensor(dtype: str, shape: list[int | None]) -> dict[str, Any]:
    tensor: dict[str, Any] = {"dtype": dtype, "encoding": "none", "shape": {}}
    if shape:
        tensor["shape"] = {"dimensions": [str(-1 if d is None else d) for d in shape]}
    return {"pythonClassName": _PY + "tensor_feature.Tensor", "tensor": tensor}


def _text() -> dict[str, Any]:
    return {"pythonClassName": _PY + "text_feature.Text", "text": {}}


def _class_label(num_classes: int) -> dict[str, Any]:
    return {"pythonClassName": _PY + "class_label_feature.ClassLabel",
            "classLabel": {"numClasses": str(num_classes)}}


def _image() -> dict[str, Any]:
    # 3 channels: TFDS decodes with tf.image.decode_image(channels=3), so gray
    # images come back as RGB and RGBA loses alpha (what the pipeline's decode does).
    # No encodingFormat: TFDS uses it only to *encode* arrays; decode_image reads
    # JPEG, PNG and BMP alike, and a folder may mix them (GIF and WebP come back
    # [frames, H, W, 3] and fail TFDS's shape check: documented, not mappable).
    return {"pythonClassName": _PY + "image_feature.Image",
            "image": {"dtype": "uint8", "shape": {"dimensions": ["-1", "-1", "3"]}}}


def _mask_image() -> dict[str, Any]:
    # The class mask: one channel, read back as uint8 [H, W, 1] class indices
    # (TFDS decodes PNG losslessly; encodingFormat png is what convert stores).
    return {"pythonClassName": _PY + "image_feature.Image",
            "image": {"dtype": "uint8", "encodingFormat": "png",
                      "shape": {"dimensions": ["-1", "-1", "1"]}}}


def _features_dict(features: dict[str, Any]) -> dict[str, Any]:
    return {"pythonClassName": _DICT, "featuresDict": {"features": features}}


def _labels_survive(names: list[str]) -> bool:
    """Whether `names` round-trip through a TFDS ``.labels.txt`` (one per line,
    TFDS strips each line and drops empty ones, and refuses duplicates)."""
    return (bool(names) and len(set(names)) == len(names)
            and all(n and n == n.strip() and "\n" not in n and "\r" not in n for n in names))


def tfds_features(manifest: Manifest) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """(features.json content, {labels file name: class names}) for `manifest`'s schema.

    - ``image/encoded`` -> Image (uint8, [H, W, 3]);
    - ``image/segmentation/class/encoded`` -> Image (uint8, [H, W, 1]: class indices);
    - ``image/class/label`` -> ClassLabel with the manifest's class names;
    - every ``image/object/*`` (all var) -> one Sequence under ``image/object``, so
      ``ex["image/object"]["bbox"]["xmin"]`` is a [num_boxes] float32 tensor and
      ``ex["image/object"]["class"]["label"]`` a ClassLabel sequence. The boxes stay
      four separate lists: TFDS's BBoxFeature reads one [4] float list per box
      (ymin, xmin, ymax, xmax interleaved), which these records do not have;
      ``image/object/mask`` is an Image (uint8, [H, W, 1]) per object, so
      ``ex["image/object"]["mask"]`` is [num_boxes, H, W, 1]; the keypoint lists are a
      Tensor([K]) per object (K from the manifest's ``source.keypoints``), so
      ``ex["image/object"]["keypoint"]["y"]`` is [num_boxes, K];
    - other string scalars -> Text; other fixed features -> Tensor(shape, dtype);
      other var features -> Tensor([None], dtype).
    """
    names = list(manifest.class_names)
    with_names = _labels_survive(names)
    points = ((manifest.source or {}).get("keypoints") or {}).get("names") or []
    specs = dict(manifest.schema)
    labels: dict[str, list[str]] = {}

    def connector(name: str, spec: Any, in_sequence: bool) -> dict[str, Any]:
        if name == "image/encoded" and spec.dtype == "string" and spec.kind == "fixed" \
                and not spec.shape:
            return _image()
        if name == MASK_KEY and spec.dtype == "string" and spec.kind == "fixed" \
                and not spec.shape:
            return _mask_image()
        if spec.dtype == "int64" and with_names and (
                (name == "image/class/label" and spec.kind == "fixed" and not spec.shape)
                or (name == "image/object/class/label" and in_sequence)):
            return _class_label(len(names))
        if in_sequence and name == INSTANCE_MASK_KEY and spec.dtype == "string":
            return _mask_image()
        if in_sequence and name in _KEYPOINT_KEYS:  # K per box, object-major
            return _tensor(spec.dtype, [len(points)])
        if in_sequence:  # var: one value per box, the Sequence adds the length
            return _text() if spec.dtype == "string" else _tensor(spec.dtype, [])
        if spec.kind == "var":
            return _tensor(spec.dtype, [None])
        if spec.dtype == "string" and not spec.shape:
            return _text()
        return _tensor(spec.dtype, list(spec.shape))

    # Keypoint lists are K per box: in the box Sequence only when K is known.
    objects = {n: s for n, s in specs.items() if n.startswith(_OBJECT_PREFIX)
               and (points or n not in _KEYPOINT_KEYS)}
    nested = None if "image/object" in specs else _object_tree(objects)
    features: dict[str, Any] = {}
    for name, spec in specs.items():
        if nested is not None and name in objects:
            continue
        features[name] = connector(name, spec, False)
        if features[name]["pythonClassName"].endswith("ClassLabel"):
            labels[f"{name.replace('/', '.')}.labels.txt"] = names
    if nested is not None:
        def build(tree: dict[str, Any], path: list[str]) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for key, sub in tree.items():
                if isinstance(sub, dict):
                    out[key] = _features_dict(build(sub, path + [key]))
                    continue
                out[key] = connector(_OBJECT_PREFIX + "/".join(path + [key]), sub, True)
                if out[key]["pythonClassName"].endswith("ClassLabel"):
                    # TFDS names nested label files parent parts joined by "-", the
                    # parent's own "/" as "." (features.convert_feature_name_to_filename).
                    parts = ["image.object"] + path + [key]
                    labels["-".join(parts) + ".labels.txt"] = names
            return out

        features["image/object"] = {
            "pythonClassName": _PY + "sequence_feature.Sequence",
            "sequence": {"feature": _features_dict(build(nested, [])), "length": "-1"}}
    return _features_dict(features), labels


def _object_tree(objects: dict[str, Any]) -> dict[str, Any] | None:
    """``image/object/*`` as a nested dict of specs, or None when they cannot form
    one Sequence (none, one fixed, or a key that is a prefix of another)."""
    if not objects or any(s.kind != "var" for s in objects.values()):
        return None
    tree: dict[str, Any] = {}
    for name, spec in objects.items():
        parts = name[len(_OBJECT_PREFIX):].split("/")
        node = tree
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                return None
            node = child
        if not parts[-1] or parts[-1] in node:
            return None
        node[parts[-1]] = spec
    return tree


def dataset_info(manifest: Manifest, name: str | None = None) -> dict[str, Any]:
    """The dataset_info.json content (DatasetInfo proto JSON) for `manifest`."""
    fmt = str(manifest.source.get("format", "dataset"))
    name = name or "tfpipe_" + (re.sub(r"[^a-z0-9_]+", "_", fmt.lower()).strip("_") or "dataset")
    splits = []
    for split, info in sorted(manifest.splits.items()):
        # TFDS reads an empty split as "unknown size" and fails on it; a split name
        # outside [\w-]+ cannot be passed to as_dataset(split=...).
        if not info.shards or not _TFDS_SPLIT_RE.match(split):
            continue
        count = len(info.shards)
        expected = [shard_name(split, i, count, None) for i in range(count)]
        if [s.path for s in info.shards] != expected:
            continue  # not in tfpipe's naming (a hand-edited manifest): TFDS could not find them
        splits.append({"filepathTemplate": FILEPATH_TEMPLATE, "name": split,
                       "numBytes": str(info.num_bytes),
                       "shardLengths": [str(s.num_records) for s in info.shards]})
    out: dict[str, Any] = {
        "description": (f"Converted by tfpipe {manifest.tool_version} from {fmt} data; "
                        "manifest.json beside this file is the source of truth "
                        "(checksums, skipped inputs)."),
        "fileFormat": "tfrecord", "name": name, "splits": splits, "version": VERSION}
    schema = manifest.schema
    if ("image/encoded" in schema and "image/class/label" in schema
            and _labels_survive(list(manifest.class_names))):
        out["supervisedKeys"] = {"tuple": {"items": [{"featureKey": "image/encoded"},
                                                     {"featureKey": "image/class/label"}]}}
    elif "image/encoded" in schema and MASK_KEY in schema:
        out["supervisedKeys"] = {"tuple": {"items": [{"featureKey": "image/encoded"},
                                                     {"featureKey": MASK_KEY}]}}
    return out


def _write_atomic(path: Path, text: str) -> None:
    # Same temp naming as the shards and manifest, so `tfpipe verify` reports a leftover.
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def write_tfds_metadata(out_dir: str | os.PathLike[str], manifest: Manifest | None = None,
                        *, name: str | None = None) -> list[str]:
    """Write dataset_info.json, features.json and the ``*.labels.txt`` files beside
    ``out_dir/manifest.json``, so `tfds.builder_from_directory(out_dir)` reads the
    dataset; return the file names written.

    `manifest` defaults to the one in `out_dir` (for a dataset converted before
    these files existed); `name` is the TFDS dataset name (default
    ``tfpipe_<source format>``). GZIP datasets get nothing (returns []): TFDS opens
    TFRecord shards without a compression type, so it cannot read them.
    The files are deterministic (sorted keys), like the manifest.
    """
    out = Path(out_dir)
    if manifest is None:
        manifest = Manifest.load(out)
    if manifest.compression is not None:
        return []
    features, labels = tfds_features(manifest)
    files = {DATASET_INFO: json.dumps(dataset_info(manifest, name), indent=2, sort_keys=True)
             + "\n",
             FEATURES: json.dumps(features, indent=4, sort_keys=True) + "\n"}
    files.update({fname: "\n".join(names) + "\n" for fname, names in sorted(labels.items())})
    keypoints = (manifest.source or {}).get("keypoints")
    if keypoints:
        files[METADATA] = json.dumps({"keypoints": keypoints}, indent=2, sort_keys=True) + "\n"
    # Labels and features before dataset_info.json: TFDS treats the directory as a
    # dataset once dataset_info.json exists.
    order = [f for f in files if f != DATASET_INFO] + [DATASET_INFO]
    for fname in order:
        _write_atomic(out / fname, files[fname])
    return sorted(files)
