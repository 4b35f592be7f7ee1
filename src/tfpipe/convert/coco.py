"""COCO-style JSON -> detection records, or segmentation records (task="segmentation").

Boxes are stored normalized to [0, 1] as the four `image/object/bbox/*` lists;
`image/object/class/label` is the contiguous index of the category in sorted
category-id order, so class_names[label] is the category name.

Invalid boxes (`invalid_boxes`):
- `clip` (default): boxes partly outside the image are clipped to it; degenerate
  boxes (zero/negative width or height, NaN/inf, nothing left inside) are dropped.
- `drop`: every box not fully inside the image is dropped, as are degenerate ones.
- `raise`: any such box stops the conversion with InputError naming image and annotation.
Counts of kept, clipped and dropped boxes go into the manifest.

Segmentation (`task="segmentation"`): each image gets ONE class mask (see
`_rasterize`): background 0, the annotation of the k-th category in
sorted id order k + 1, `iscrowd` regions 255 (ignore); annotations are painted
in their order in the file, a later one over an earlier one. Polygons and RLE
(counts list or compressed string) are rasterized as pycocotools does
(`tfpipe.convert._rasterize`). class_names[0] is "background".

Instance masks (`masks=True`, task detection) and keypoints (whenever a category
names `keypoints`): see `tfpipe.convert._objects`; they follow the boxes' policy (a
dropped box drops its mask and points). Without `masks=True` the objects that carried
a `segmentation` are counted (`masks_not_kept`), never dropped silently.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from tfpipe.convert._mask import IGNORE, class_counts, encode_mask, histogram
from tfpipe.convert._objects import (carries_mask, instance_mask, keypoint_entry,
                                     keypoint_spec, keypoint_values, mask_values,
                                     segmentation_problem)
from tfpipe.convert._plan import Item
from tfpipe.convert._rasterize import BadSegmentation, annotation_mask
from tfpipe.convert._source import (MAX_INPUT_BYTES, BadInput, Enumeration, Source,
                                    file_size, image_values, read_image)
from tfpipe.records import (AREA_KEY, INSTANCE_MASK_KEY, IS_CROWD_KEY,
                            KEYPOINT_VISIBILITY_KEY, KEYPOINT_X_KEY, KEYPOINT_Y_KEY,
                            MASK_FORMAT_KEY, MASK_KEY, Schema, detection_schema,
                            segmentation_schema)
from tfpipe.errors import ConfigError, InputError

BOX_POLICIES = ("clip", "drop", "raise")
COCO_TASKS = ("detection", "segmentation")
BACKGROUND = "background"
DETECTION_KEYS = ("image/object/bbox/xmin", "image/object/bbox/ymin",
                  "image/object/bbox/xmax", "image/object/bbox/ymax",
                  "image/object/class/label", "image/object/class/text")


def looks_like_coco(path: Path) -> bool:
    """A .json whose top level has 'images' and 'annotations' (read only if small enough)."""
    size = file_size(path)
    if size is None or size > MAX_INPUT_BYTES:
        return False
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "images" in data and "annotations" in data


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError
    return float(value)


class CocoSource(Source):
    kind = "coco"

    def __init__(self, json_path: str | os.PathLike[str], *, images: str | None = None,
                 invalid_boxes: str = "clip", task: str = "detection",
                 instance_masks: bool = False) -> None:
        if task not in COCO_TASKS:
            raise ConfigError(f"task must be one of {', '.join(COCO_TASKS)} for a COCO file, "
                              f"got {task!r}")
        if instance_masks and task != "detection":
            raise ConfigError("masks=True (instance masks) goes with task 'detection'; task "
                              "'segmentation' rasterizes the annotations into one class mask")
        self.task = task
        self.instance_masks = bool(instance_masks)
        # the records' targets: one class mask per image, or boxes
        self.masks = task == "segmentation"
        if invalid_boxes not in BOX_POLICIES:
            raise ConfigError(f"invalid_boxes must be one of {', '.join(BOX_POLICIES)}, "
                              f"got {invalid_boxes!r}")
        self.invalid_boxes = invalid_boxes
        path = Path(json_path)
        self.display = path.name
        self.image_dir = str(Path(images).resolve() if images else path.resolve().parent)
        size = file_size(path)
        if size is None:
            raise InputError(f"{path}: file not found")
        if size > MAX_INPUT_BYTES:
            raise InputError(f"{path}: {size} bytes, over the {MAX_INPUT_BYTES}-byte limit")
        try:
            data = json.loads(path.read_bytes())
        except ValueError as exc:
            raise InputError(f"{path}: not valid JSON: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("images"), list):
            raise InputError(f"{path}: a COCO file needs a top-level 'images' list")
        for key in ("annotations", "categories"):
            if not isinstance(data.get(key, []), list):
                raise InputError(f"{path}: '{key}' must be a list")
        categories = data.get("categories", [])
        cat_ids: dict[int, str] = {}
        for i, cat in enumerate(categories):
            if not isinstance(cat, dict) or not isinstance(cat.get("id"), int):
                raise InputError(f"{path}: categories[{i}] needs an integer 'id'")
            if cat["id"] in cat_ids:
                raise InputError(f"{path}: category id {cat['id']} appears twice")
            cat_ids[cat["id"]] = str(cat.get("name", cat["id"]))
        self.category_ids = sorted(cat_ids)
        # Keypoints ride on detection records only (a class mask has no objects).
        self.keypoint_names: list[str] = []
        self.skeleton: list[list[int]] = []
        self._keypoint_cats: set[int] = set()
        if task == "detection":
            self.keypoint_names, self.skeleton, self._keypoint_cats = keypoint_spec(
                categories, str(path))
        self.class_names = [cat_ids[c] for c in self.category_ids]
        if task == "segmentation":  # mask value 0 is the background
            if len(self.category_ids) > IGNORE - 1:
                raise InputError(f"{path}: {len(self.category_ids)} categories; a class mask "
                                 f"holds 1..{IGNORE - 1} (0 = background, {IGNORE} = ignore)")
            self.class_names = [BACKGROUND] + self.class_names
        self._images: list[dict[str, Any]] = data["images"]
        self._annotations: list[Any] = data.get("annotations", [])
        self._path = str(path)

    def __getstate__(self) -> dict[str, Any]:
        # Workers receive each image's annotations in the shard plan.
        state = dict(self.__dict__)
        state["_images"], state["_annotations"] = [], []
        return state

    def enumerate(self) -> Enumeration:
        out = Enumeration()
        index_of = {cid: i for i, cid in enumerate(self.category_ids)}
        by_image: dict[Any, list[Any]] = {}
        for i, ann in enumerate(self._annotations):
            if not isinstance(ann, dict) or "image_id" not in ann:
                raise InputError(f"{self._path}: annotations[{i}] needs an 'image_id'")
            by_image.setdefault(ann["image_id"], []).append((i, ann))
        seen: set[Any] = set()
        entries = []
        for i, img in enumerate(self._images):
            if not isinstance(img, dict) or "id" not in img or not isinstance(
                    img.get("file_name"), str):
                raise InputError(f"{self._path}: images[{i}] needs 'id' and 'file_name'")
            if img["id"] in seen:
                raise InputError(f"{self._path}: image id {img['id']!r} appears twice")
            seen.add(img["id"])
            entries.append(img)
        orphans = sum(len(v) for k, v in by_image.items() if k not in seen)
        self.orphan_annotations = orphans
        # Enumerate in image-id order (ids may be ints or strings; order within type).
        entries.sort(key=lambda im: (str(type(im["id"]).__name__), im["id"]))
        for img in entries:
            image_id = img["id"]
            name = f"image id {image_id} ({img['file_name']})"
            key = f"id:{image_id}"
            anns, reason, unkept = [], None, 0
            for ann_index, ann in by_image.get(image_id, []):
                ann_id = ann.get("id", f"#{ann_index}")
                if self.masks:
                    entry, reason = _segmentation_entry(ann, str(ann_id), index_of)
                    if reason is not None:
                        break
                    anns.append(entry)
                    continue
                bbox = ann.get("bbox")
                if not isinstance(bbox, list) or len(bbox) != 4:
                    reason = f"annotation {ann_id}: bbox must be [x, y, width, height]"
                    break
                try:
                    x, y, w, h = (_number(v) for v in bbox)
                except ValueError:
                    reason = f"annotation {ann_id}: bbox values must be numbers, got {bbox}"
                    break
                if ann.get("category_id") not in index_of:
                    reason = (f"annotation {ann_id}: category_id {ann.get('category_id')!r} "
                              "is not in categories")
                    break
                # NaN/inf do not survive JSON hashing: keep them as text for the worker.
                box = [v if math.isfinite(v) else repr(v) for v in (x, y, w, h)]
                entry = [str(ann_id), *box, index_of[ann["category_id"]]]
                extra, reason = self._object_entry(ann, str(ann_id))
                if reason is not None:
                    break
                unkept += int(not self.instance_masks and carries_mask(ann))
                anns.append(entry + extra)
            if reason is not None:
                out.bad.append((Item(key, 0, None, name), reason))
                continue
            size = file_size(Path(self.image_dir) / img["file_name"])
            if size is None:
                out.bad.append((Item(key, 0, None, name),
                                f"image file not found: {img['file_name']}"))
                continue
            hw = [img.get("height"), img.get("width")]
            hw = [v if isinstance(v, int) and not isinstance(v, bool) else None for v in hw]
            payload = [str(image_id), img["file_name"], hw, anns]
            if unkept:  # only then: plans of sets without segmentations stay as they were
                payload.append(unkept)
            per_object = 40
            if self.instance_masks:  # a 0/1 PNG: ~400 bytes + its outline (640x480: ~0.5-2 KB)
                per_object += 400 + (hw[0] * hw[1] // 1000 if None not in hw else 300)
            out.items.append(Item(key, size + per_object * len(anns), payload, name))
        return out

    def _object_entry(self, ann: dict[str, Any], ann_id: str
                      ) -> tuple[list[Any], str | None]:
        """What an annotation adds to its box in the plan: [segmentation, area, crowd]
        with instance masks, [keypoints] with keypoints; or a reason it is bad."""
        extra: list[Any] = []
        if self.instance_masks:
            segm = ann.get("segmentation")
            reason = segmentation_problem(segm, ann_id, "masks=True (--masks)")
            if reason is not None:
                return [], reason
            area = ann.get("area")
            if area is not None and not (isinstance(area, (int, float))
                                         and not isinstance(area, bool)
                                         and math.isfinite(area)):
                return [], f"annotation {ann_id}: 'area' must be a finite number, got {area!r}"
            extra += [segm, area, 1 if ann.get("iscrowd") else 0]
        if self.keypoint_names:
            kps, reason = keypoint_entry(ann, ann_id, len(self.keypoint_names),
                                         ann.get("category_id") in self._keypoint_cats)
            if reason is not None:
                return [], reason
            extra.append(kps)
        return extra, None

    def schema(self) -> Schema:
        if self.masks:
            return segmentation_schema()
        return detection_schema(masks=self.instance_masks, keypoints=bool(self.keypoint_names))

    def settings(self) -> dict[str, Any]:
        if self.masks:
            return {"format": self.kind, "task": self.task, "category_ids": self.category_ids}
        out: dict[str, Any] = {"format": self.kind, "invalid_boxes": self.invalid_boxes,
                               "category_ids": self.category_ids}
        if self.instance_masks:
            out["instance_masks"] = True
        if self.keypoint_names:  # manifest.source["keypoints"]: K, names, 0-based skeleton
            out["keypoints"] = {"names": list(self.keypoint_names),
                                "skeleton": [list(b) for b in self.skeleton]}
        return out

    def encode_values(self, item: Item) -> tuple[dict[str, Any], dict[str, int]]:
        image_id, file_name, (json_h, json_w), anns, *unkept = item.payload
        data, info = read_image(Path(self.image_dir) / file_name)
        if (json_h is not None and json_h != info.height) or (
                json_w is not None and json_w != info.width):
            raise BadInput(f"size in the JSON ({json_w}x{json_h}) differs from the image "
                           f"header ({info.width}x{info.height}); boxes would be wrong")
        if self.masks:
            values = image_values(data, info, file_name, image_id)
            mask, stats = _rasterize(anns, info.height, info.width, item.label)
            values[MASK_KEY] = encode_mask(mask)
            values[MASK_FORMAT_KEY] = b"png"
            return values, stats
        height, width = float(info.height), float(info.width)
        stats = {"boxes": 0, "boxes_clipped": 0, "boxes_dropped": 0}
        if unkept:
            stats["masks_not_kept"] = int(unkept[0])
        keys = list(DETECTION_KEYS)
        if self.instance_masks:
            keys += [AREA_KEY, IS_CROWD_KEY]
            stats.update({"instance_masks": 0, "crowd": 0, "polygons_dropped": 0})
        k = len(self.keypoint_names)
        if k:
            keys += [KEYPOINT_Y_KEY, KEYPOINT_X_KEY, KEYPOINT_VISIBILITY_KEY]
            stats.update({"keypoints": 0, "keypoints_outside": 0})
        cols: dict[str, list[Any]] = {key: [] for key in keys}
        masks: list[Any] = []
        for entry in anns:  # [id, x, y, w, h, label, *what _object_entry added]
            ann_id, label, extra = entry[0], entry[5], entry[6:]
            x, y, w, h = (float(v) for v in entry[1:5])
            x0, y0, x1, y1 = x, y, x + w, y + h
            finite = all(math.isfinite(v) for v in (x0, y0, x1, y1))
            problem = None
            if not finite or w <= 0 or h <= 0:
                problem, fixable = "degenerate (zero/negative size or NaN)", False
            elif x0 < 0 or y0 < 0 or x1 > width or y1 > height:
                cx0, cy0 = max(x0, 0.0), max(y0, 0.0)
                cx1, cy1 = min(x1, width), min(y1, height)
                fixable = cx1 > cx0 and cy1 > cy0
                problem = ("partly outside the image" if fixable
                           else "entirely outside the image")
                x0, y0, x1, y1 = cx0, cy0, cx1, cy1
            if problem is not None:
                if self.invalid_boxes == "raise":
                    raise InputError(
                        f"{item.label}: annotation {ann_id}: box [x={x}, y={y}, w={w}, "
                        f"h={h}] is {problem} ({int(width)}x{int(height)} image); "
                        "use invalid_boxes='clip' or 'drop' to keep converting")
                if self.invalid_boxes == "drop" or not fixable:
                    stats["boxes_dropped"] += 1
                    continue
                stats["boxes_clipped"] += 1
            stats["boxes"] += 1
            cols["image/object/bbox/xmin"].append(x0 / width)
            cols["image/object/bbox/ymin"].append(y0 / height)
            cols["image/object/bbox/xmax"].append(x1 / width)
            cols["image/object/bbox/ymax"].append(y1 / height)
            cols["image/object/class/label"].append(int(label))
            cols["image/object/class/text"].append(self.class_names[label].encode())
            if self.instance_masks:
                segm, area, crowd = extra[:3]
                mask = instance_mask(segm, info.height, info.width, ann_id, stats)
                masks.append(mask)
                cols[AREA_KEY].append(float(mask.sum()) if area is None else float(area))
                cols[IS_CROWD_KEY].append(int(crowd))
                stats["instance_masks"] += 1
                stats["crowd"] += int(crowd)
            if k:
                ys, xs, vs = keypoint_values(
                    extra[-1], k, width, height, self.invalid_boxes,
                    f"{item.label}: annotation {ann_id}", stats)
                cols[KEYPOINT_Y_KEY] += ys
                cols[KEYPOINT_X_KEY] += xs
                cols[KEYPOINT_VISIBILITY_KEY] += vs
        values = image_values(data, info, file_name, image_id)
        values.update(cols)
        if self.instance_masks:
            values[INSTANCE_MASK_KEY] = mask_values(masks)
        return values, stats


def _segmentation_entry(ann: dict[str, Any], ann_id: str, index_of: dict[int, int]
                        ) -> tuple[list[Any], str | None]:
    """[annotation id, segmentation, mask value] of one annotation, or a reason it is bad."""
    if ann.get("category_id") not in index_of:
        return [], (f"annotation {ann_id}: category_id {ann.get('category_id')!r} "
                    "is not in categories")
    segm = ann.get("segmentation")
    reason = segmentation_problem(segm, ann_id, "task 'segmentation'")
    if reason is not None:
        return [], reason
    value = IGNORE if ann.get("iscrowd") else index_of[ann["category_id"]] + 1
    return [ann_id, segm, value], None


def _rasterize(anns: list[Any], height: int, width: int, label: str
               ) -> tuple[Any, dict[str, int]]:
    """The class mask of one image: annotations painted in file order over 0."""
    import numpy as np

    mask = np.zeros((height, width), dtype=np.uint8)
    stats = {"masks": 1, "annotations": 0, "polygons_dropped": 0}
    for ann_id, segm, value in anns:
        if isinstance(segm, list):
            # Fewer than 3 points has no area (pycocotools would even read 2 points as a box).
            kept = [p for p in segm if len(p) >= 6]
            stats["polygons_dropped"] += len(segm) - len(kept)
            segm = kept
        try:
            region = annotation_mask(segm, height, width)
        except BadSegmentation as exc:
            raise BadInput(f"annotation {ann_id}: {exc}") from None
        mask[region] = value
        stats["annotations"] += 1
    stats.update(class_counts(histogram(mask)))
    return mask, stats
