"""COCO conversion: boxes against the JSON (NumPy oracle), labels, invalid-box policy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tfpipe.convert import convert
from tfpipe.errors import InputError

from .conftest import read_split


def _features():
    import tensorflow as tf

    s, i = tf.io.FixedLenFeature([], tf.string), tf.io.FixedLenFeature([], tf.int64)
    f = {"image/encoded": s, "image/format": s, "image/height": i, "image/width": i,
         "image/filename": s, "image/source_id": s}
    for k in ("xmin", "ymin", "xmax", "ymax"):
        f[f"image/object/bbox/{k}"] = tf.io.VarLenFeature(tf.float32)
    f["image/object/class/label"] = tf.io.VarLenFeature(tf.int64)
    f["image/object/class/text"] = tf.io.VarLenFeature(tf.string)
    return f


def test_coco_round_trip(coco_src: Path, tmp_path: Path) -> None:
    data = json.loads(coco_src.read_text())
    m = convert(coco_src, tmp_path / "out", split="train=0.5,val=0.5", workers=1)
    cats = sorted(data["categories"], key=lambda c: c["id"])
    assert m.class_names == [c["name"] for c in cats]
    index = {c["id"]: i for i, c in enumerate(cats)}
    records = [r for split in ("train", "val")
               for r in read_split(tmp_path / "out", split, _features())]
    assert len(records) == len(data["images"])
    images = {str(im["id"]): im for im in data["images"]}
    total = 0
    for rec in records:
        im = images[rec["image/source_id"].decode()]
        assert rec["image/filename"].decode() == im["file_name"]
        assert rec["image/encoded"] == (coco_src.parent / im["file_name"]).read_bytes()
        assert (rec["image/width"], rec["image/height"]) == (im["width"], im["height"])
        anns = [a for a in data["annotations"] if a["image_id"] == im["id"]]
        xywh = np.array([a["bbox"] for a in anns], np.float64).reshape(-1, 4)
        want = np.stack([xywh[:, 0] / im["width"], xywh[:, 1] / im["height"],
                         (xywh[:, 0] + xywh[:, 2]) / im["width"],
                         (xywh[:, 1] + xywh[:, 3]) / im["height"]], axis=1)
        got = np.stack([rec[f"image/object/bbox/{k}"] for k in ("xmin", "ymin", "xmax", "ymax")],
                       axis=1) if anns else np.zeros((0, 4))
        np.testing.assert_allclose(got, want, atol=1e-6)
        assert rec["image/object/class/label"].tolist() == [index[a["category_id"]] for a in anns]
        assert [t.decode() for t in rec["image/object/class/text"]] == [
            m.class_names[index[a["category_id"]]] for a in anns]
        total += len(anns)
    counts = m.settings["stats"]
    assert sum(v["boxes"] for v in counts.values()) == total
    from tfpipe.records import verify

    report = verify(tmp_path / "out", deep=True)  # decodes every image, checks boxes
    assert report.ok, report.to_dict()
    assert all(v["boxes_clipped"] == v["boxes_dropped"] == 0 for v in counts.values())


def test_pasted_boxes_are_exact(coco_src: Path) -> None:
    """The topmost pasted box of a lossless PNG is a pixel-exact cut of its category's photo."""
    import cv2

    from tfpipe.sample_data import source_photos

    photos = source_photos()
    data = json.loads(coco_src.read_text())
    names = {c["id"]: c["name"] for c in data["categories"]}
    checked = 0
    for im in data["images"]:
        anns = [a for a in data["annotations"] if a["image_id"] == im["id"]]
        if not im["file_name"].endswith(".png") or not anns:
            continue
        pixels = np.asarray(Image.open(coco_src.parent / im["file_name"]).convert("RGB"))
        x, y, w, h = anns[-1]["bbox"]  # pasted last: nothing covers it
        patch = np.ascontiguousarray(pixels[y:y + h, x:x + w])
        photo = photos[names[anns[-1]["category_id"]]]
        sqdiff = cv2.matchTemplate(photo.astype(np.float32), patch.astype(np.float32),
                                   cv2.TM_SQDIFF)
        assert sqdiff.min() < 1e-3 * patch.size
        checked += 1
    assert checked >= 1


@pytest.fixture()
def broken_coco(coco_src: Path, tmp_path: Path) -> Path:
    work = tmp_path / "coco"
    shutil.copytree(coco_src.parent, work)
    data = json.loads((work / "annotations.json").read_text())
    im = data["images"][0]
    w, h = im["width"], im["height"]
    cat = data["categories"][0]["id"]
    bad = [[-10, -10, 30, 30],          # partly outside: clip
           [w - 5, 2, 20, 10],          # partly outside: clip
           [5, 5, 0, 10],               # zero width: degenerate
           [5, 5, 10, -3],              # negative height: degenerate
           [float("nan"), 1, 2, 3],     # NaN: degenerate
           [w + 5, h + 5, 10, 10]]      # entirely outside
    for k, bbox in enumerate(bad):
        data["annotations"].append({"id": 9000 + k, "image_id": im["id"], "category_id": cat,
                                    "bbox": bbox, "iscrowd": 0})
    (work / "annotations.json").write_text(json.dumps(data))
    return work / "annotations.json"


def test_invalid_boxes_policy(broken_coco: Path, tmp_path: Path) -> None:
    data = json.loads(broken_coco.read_text())
    valid = len(data["annotations"]) - 6
    m = convert(broken_coco, tmp_path / "clip", workers=1)
    # the sample's annotations carry their rectangle as a polygon, the 6 added ones none:
    # without masks=True those are counted, not kept (masks_not_kept)
    assert m.settings["stats"]["train"] == {"boxes": valid + 2, "boxes_clipped": 2,
                                           "boxes_dropped": 4, "masks_not_kept": valid}
    im = data["images"][0]
    rec = next(r for r in read_split(tmp_path / "clip", "train", _features())
               if r["image/source_id"].decode() == str(im["id"]))
    for k in ("xmin", "ymin", "xmax", "ymax"):
        v = rec[f"image/object/bbox/{k}"]
        assert ((0 <= v) & (v <= 1)).all()
    assert rec["image/object/bbox/xmin"][-2] == 0.0  # the first clipped box
    assert rec["image/object/bbox/xmax"][-2] == pytest.approx(20 / im["width"])
    m = convert(broken_coco, tmp_path / "drop", workers=1, invalid_boxes="drop")
    assert m.settings["stats"]["train"] == {"boxes": valid, "boxes_clipped": 0,
                                           "boxes_dropped": 6, "masks_not_kept": valid}
    with pytest.raises(InputError, match=rf"image id {im['id']} .*annotation 900\d"):
        convert(broken_coco, tmp_path / "raise", workers=1, invalid_boxes="raise")


def test_coco_bad_images_and_annotations(coco_src: Path, tmp_path: Path) -> None:
    work = tmp_path / "coco"
    shutil.copytree(coco_src.parent, work)
    data = json.loads((work / "annotations.json").read_text())
    data["images"][1]["file_name"] = "images/missing.jpg"
    data["images"][2]["width"] += 1  # JSON size disagrees with the file
    data["annotations"].append({"id": 777, "image_id": data["images"][3]["id"],
                                "category_id": 99999, "bbox": [1, 1, 2, 2]})
    (work / "annotations.json").write_text(json.dumps(data))
    other = tmp_path / "imgs"
    shutil.copytree(work / "images", other / "images")
    shutil.rmtree(work / "images")
    m = convert(work / "annotations.json", tmp_path / "out", images=other, workers=1)
    reasons = {s.input: s.reason for s in m.splits["train"].skipped}
    ids = [im["id"] for im in data["images"]]
    assert reasons[f"image id {ids[1]} (images/missing.jpg)"] == \
        "image file not found: images/missing.jpg"
    assert "differs from the image header" in next(
        r for k, r in reasons.items() if k.startswith(f"image id {ids[2]} "))
    assert "category_id 99999 is not in categories" in next(
        r for k, r in reasons.items() if k.startswith(f"image id {ids[3]} "))
    assert m.num_records["train"] == len(ids) - 3
    with pytest.raises(InputError, match=f"image id {ids[1]}"):
        convert(work / "annotations.json", tmp_path / "r", images=other, on_error="raise")
