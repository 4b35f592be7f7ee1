"""`summarize`: what `tfpipe inspect` shows, as plain data a script can read."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from tfpipe.errors import RecordError, tf_error_text
from tfpipe.records.codec import decode_example
from tfpipe.records.framing import iter_frames
from tfpipe.records.schema import INSTANCE_MASK_KEY, KEYPOINT_VISIBILITY_KEY, MASK_KEY
from tfpipe.records.source import open_source
from tfpipe.records.splits import default_split
from tfpipe.records.suggest import features, suggest

LABEL_KEYS = ("image/class/label", "image/object/class/label")


def _short(values: list[Any], limit: int = 4) -> Any:
    def one(v: Any) -> Any:
        if isinstance(v, bytes):
            try:
                s = v.decode("utf-8")
            except UnicodeDecodeError:
                return f"<{len(v)} bytes>"
            return s if len(s) <= 40 else s[:37] + "..."
        return round(v, 6) if isinstance(v, float) else v

    if len(values) == 1:
        return one(values[0])
    head = [one(v) for v in values[:limit]]
    return head + ([f"... {len(values)} values"] if len(values) > limit else [])


def _mask_summary(data: bytes) -> str:
    """A segmentation mask in a cell: its size and the class values it holds."""
    import io

    import numpy as np
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            mask = np.asarray(img)
    except Exception as exc:  # noqa: BLE001 - shown, not raised: verify --deep reports it
        return f"undecodable ({type(exc).__name__})"
    return f"{mask.shape[0]}x{mask.shape[1]} classes {np.unique(mask).tolist()}"


def _mask_pixels(stats: dict[str, int], names: list[str]) -> list[dict[str, Any]]:
    """A segmentation split's pixels per class value, from the converter's counters."""
    counts = {int(k.split("/", 1)[1]): v for k, v in stats.items()
              if k.startswith("mask_pixels/")}
    total = sum(counts.values()) or 1
    return [{"value": k, "name": names[k] if k < len(names) else ("ignore" if k == 255 else None),
             "pixels": v, "share": v / total} for k, v in sorted(counts.items())]


def record_summary(ex: dict[str, list[Any]]) -> dict[str, Any]:
    """One record in a line: image format/size/bytes, label, box count, instance mask
    count, keypoints (labelled of all: visibility > 0), mask size and classes; other keys
    shortened."""
    out: dict[str, Any] = {}
    if "image/encoded" in ex:
        enc = ex["image/encoded"][0] if ex["image/encoded"] else b""
        out["image_bytes"] = len(enc)
        out["format"] = (ex.get("image/format") or [b""])[0].decode("utf-8", "replace")
        h, w = (ex.get("image/height") or [None])[0], (ex.get("image/width") or [None])[0]
        out["size"] = f"{h}x{w}" if h is not None and w is not None else None
        if ex.get("image/filename"):
            out["filename"] = ex["image/filename"][0].decode("utf-8", "replace")
    if ex.get("image/class/label"):
        out["label"] = ex["image/class/label"][0]
        if ex.get("image/class/text"):
            out["label_text"] = ex["image/class/text"][0].decode("utf-8", "replace")
    if "image/object/bbox/xmin" in ex:
        out["boxes"] = len(ex["image/object/bbox/xmin"])
    if INSTANCE_MASK_KEY in ex:
        out["instance_masks"] = len(ex[INSTANCE_MASK_KEY])
    if KEYPOINT_VISIBILITY_KEY in ex:
        vis = ex[KEYPOINT_VISIBILITY_KEY]
        out["keypoints"] = f"{sum(1 for v in vis if v > 0)} of {len(vis)}"
    if ex.get(MASK_KEY):
        out["mask"] = _mask_summary(ex[MASK_KEY][0])
    if "image/encoded" not in ex:  # tables: show the columns themselves
        for k, v in sorted(ex.items()):
            if k != "tfpipe/schema_version":
                out[k] = _short(v)
    return out


# records read for the key table and the suggested data.keys (a key that only
# some records hold shows as held by fewer)
KEY_SCAN_RECORDS = 64


def _first_records(files: list[str], compression: str | None, n: int) -> list[bytes]:
    out: list[bytes] = []
    for f in files:
        try:
            for _, _, data in iter_frames(f, compression):
                if len(out) >= n:
                    return out
                out.append(data)
        except RecordError:
            continue  # named by the records loop below
    return out


DAMAGED_HINT = "run `tfpipe verify PATH` to locate the damage and `--salvage OUT` to recover"


def class_histogram(files: list[str], compression: str | None, key: str,
                    warnings: list[str] | None = None) -> dict[int, int]:
    """Count labels with batched graph parsing (fast enough for millions of records).

    A shard whose framing is damaged is counted up to the damage and named in
    `warnings` (when given; otherwise the `RecordError` is raised)."""
    import tensorflow as tf

    spec = {key: tf.io.VarLenFeature(tf.int64)}
    counts: Counter[int] = Counter()
    for f in files:  # one file at a time, so a damaged one can be named
        ds = tf.data.TFRecordDataset(f, compression_type="GZIP" if compression == "gzip" else "")
        ds = ds.batch(256).map(lambda s: tf.io.parse_example(s, spec)[key].values)
        it = iter(ds.as_numpy_iterator())
        while True:
            try:
                values = next(it)
            except StopIteration:
                break
            except tf.errors.OpError as exc:
                msg = (f"{f}: damaged framing ({tf_error_text(exc)}); "
                       f"the class histogram counts only the records before it; {DAMAGED_HINT}")
                if warnings is None:
                    raise RecordError(msg, path=f) from None
                warnings.append(msg)
                break
            counts.update(values.tolist())
    return dict(sorted(counts.items()))


def summarize(path: str | os.PathLike[str], split: str | None = None,
              num_records: int = 5) -> dict[str, Any]:
    """Schema, counts per split, class histogram and the first records of a dataset."""
    p = os.fspath(path)
    if split is None:
        from tfpipe.records.manifest import MANIFEST_NAME
        from tfpipe.records.tfds_dir import is_tfds_dir, load_manifest

        if os.path.isfile(os.path.join(p, MANIFEST_NAME)) or is_tfds_dir(p) \
                or os.path.basename(p) == MANIFEST_NAME:
            m = load_manifest(p)
            split = "train" if "train" in m.splits else (sorted(m.splits) or ["train"])[0]
        else:  # a glob, a directory of shards or one shard: the split its names say
            split = default_split(p)
    src = open_source(p, split=split or "train")
    m = src.manifest
    warnings: list[str] = []
    out: dict[str, Any] = {
        "path": p, "split": src.split, "compression": src.compression,
        "schema_version": src.dataset_version,
        "schema": src.schema.to_json(),
        "files": len(src.files),
    }
    if m is not None:
        out["tool_version"] = m.tool_version
        out["class_names"] = list(m.class_names)
        out["splits"] = {name: {"records": info.num_records, "shards": len(info.shards),
                                "bytes": info.num_bytes, "skipped": len(info.skipped)}
                         for name, info in sorted(m.splits.items())}
        if (m.source or {}).get("keypoints"):
            out["keypoints"] = m.source["keypoints"]  # names, 0-based skeleton
        pixels = _mask_pixels(m.settings.get("stats", {}).get(src.split, {}), m.class_names)
        if pixels:
            out["mask_pixels"] = pixels
    else:
        out["class_names"] = []
        try:
            num = src.num_records
        except RecordError as exc:
            warnings.append(f"{exc}; the record count is unknown; {DAMAGED_HINT}")
            num = -1
        out["splits"] = {src.split: {"records": num, "shards": len(src.files),
                                     "bytes": sum(os.path.getsize(f) for f in src.files),
                                     "skipped": 0}}
    head = _first_records(src.files, src.compression, KEY_SCAN_RECORDS)
    feats = features(head)
    out["features"] = [{"key": f.key, "dtype": f.dtype, "shape": f.shape,
                        "records": f.records} for f in feats.values()]
    sug = suggest(feats, len(head))
    out["suggested_keys"] = {"keys": sug.keys, "notes": sug.notes, "own": sug.own,
                             "yaml": sug.yaml(), "records_read": len(head)}
    key = next((k for k in LABEL_KEYS if k in src.schema), None)
    if key is None and isinstance(sug.keys.get("label"), str):
        key = sug.keys["label"]  # foreign records: the label the suggestion found
    out["label_key"] = key
    if key is not None:
        hist = class_histogram(src.files, src.compression, key, warnings)
        names = out["class_names"]
        out["class_histogram"] = [
            {"label": k, "name": names[k] if 0 <= k < len(names) else None, "count": v}
            for k, v in hist.items()]
    records = []
    for f in src.files:
        if len(records) >= num_records:
            break
        try:
            for index, offset, data in iter_frames(f, src.compression):
                if len(records) >= num_records:
                    break
                rec = {"file": os.path.basename(f), "index": index}
                rec.update(record_summary(decode_example(data)))
                records.append(rec)
        except RecordError as exc:
            if not any(w.startswith(f"{f}:") for w in warnings):
                warnings.append(f"{exc}; {DAMAGED_HINT}")
    out["records"] = records
    out["warnings"] = warnings
    return out
