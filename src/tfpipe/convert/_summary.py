"""What a conversion produced, as plain data (`tfpipe convert --json` prints it)."""

from __future__ import annotations

import os
from typing import Any

from tfpipe.records import Manifest


def conversion_summary(manifest: Manifest, out: str | os.PathLike[str] | None = None
                       ) -> dict[str, Any]:
    """Per split: records, shards, bytes, inputs skipped (and box counts and the
    objects' mask / keypoint counts for detection sets, mask counts and the share of
    pixels per class value for segmentation sets); the class names; the keypoint
    names and skeleton ("keypoints"); every skipped input with its reason; for a
    table, what storing its values changed ("table": nulls dropped from lists,
    float64 / time columns narrowed, with their largest error)."""
    stats = manifest.settings.get("stats", {})
    summary: dict[str, Any] = {} if out is None else {"out": os.fspath(out)}
    summary.update({
        "splits": {name: {"records": info.num_records, "shards": len(info.shards),
                          "bytes": info.num_bytes, "skipped": len(info.skipped),
                          **_counters(stats.get(name))}
                   for name, info in manifest.splits.items()},
        "class_names": list(manifest.class_names),
        "skipped": {name: [s.to_json() for s in info.skipped]
                    for name, info in manifest.splits.items() if info.skipped},
    })
    # tables: what storing the values changed, per column (docs/convert.md "Tables")
    keypoints = (manifest.source or {}).get("keypoints")
    if keypoints:
        summary["keypoints"] = keypoints
    normalized = (manifest.source or {}).get("normalized")
    if normalized:
        summary["table"] = normalized
    return summary


# Detection counters about the objects' masks and keypoints, apart from the boxes'.
OBJECT_COUNTERS = ("instance_masks", "crowd", "polygons_dropped", "masks_not_kept",
                   "keypoints", "keypoints_outside")


def _counters(stats: dict[str, int] | None) -> dict[str, Any]:
    """A split's converter counters: {"boxes": ..., "objects": ...} (detection; objects:
    instance masks written, crowd objects, objects whose segmentation was not kept,
    keypoints labelled / outside the image) or {"masks": ...} (segmentation)."""
    if not stats:
        return {}
    if "masks" not in stats:
        objects = {k: v for k, v in stats.items() if k in OBJECT_COUNTERS}
        boxes = {k: v for k, v in stats.items() if k not in OBJECT_COUNTERS}
        return {"boxes": boxes, **({"objects": objects} if objects else {})}
    pixels = {k.split("/", 1)[1].lstrip("0") or "0": v for k, v in stats.items()
              if k.startswith("mask_pixels/")}
    total = sum(pixels.values()) or 1
    masks = {k: v for k, v in stats.items() if not k.startswith("mask_pixels/")}
    masks["class_pixels"] = pixels
    masks["class_share"] = {k: v / total for k, v in pixels.items()}
    return {"masks": masks}
