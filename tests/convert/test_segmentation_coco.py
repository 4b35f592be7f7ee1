"""COCO `segmentation` -> class masks, pixel-exact against pycocotools (the oracle:
`frPyObjects` + `merge` + `decode`, as COCO.annToMask does)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tfpipe.convert import convert
from tfpipe.convert._rasterize import BadSegmentation, annotation_mask, polygon_mask
from tfpipe.errors import InputError
from tfpipe.records import MASK_KEY

from .conftest import read_split

mask_api = pytest.importorskip("pycocotools.mask")


def oracle(segm, h: int, w: int) -> np.ndarray:
    """pycocotools' COCO.annToRLE + decode."""
    if isinstance(segm, list):
        rle = mask_api.merge(mask_api.frPyObjects(segm, h, w))
    elif isinstance(segm["counts"], list):
        rle = mask_api.frPyObjects(segm, h, w)
    else:
        rle = segm
    return mask_api.decode(rle).astype(bool)


def _runs(mask: np.ndarray) -> list[int]:
    """Uncompressed COCO RLE counts: runs over the column-major pixels, 0s first."""
    flat = mask.T.ravel().astype(np.int8)
    if not flat.size:
        return []
    edges = np.flatnonzero(np.diff(flat)) + 1
    counts = np.diff(np.r_[0, edges, flat.size]).tolist()
    return ([0] if flat[0] else []) + [int(c) for c in counts]


def _polygons(rng: np.random.Generator, n: int) -> list[tuple[list[float], int, int]]:
    out = []
    for i in range(n):
        h, w = int(rng.integers(1, 48)), int(rng.integers(1, 48))
        k = int(rng.integers(3, 30))
        kind = i % 5
        if kind == 0:  # anywhere, partly outside the image
            xy = rng.uniform(-8, max(h, w) + 8, 2 * k)
        elif kind == 1:  # integer vertices (ties in the rounding)
            xy = rng.integers(-2, max(h, w) + 2, 2 * k).astype(float)
        elif kind == 2:  # half-pixel vertices
            xy = np.round(rng.uniform(0, max(h, w), 2 * k) * 2) / 2
        elif kind == 3:  # tiny: under a pixel
            cx, cy = rng.uniform(0, w), rng.uniform(0, h)
            xy = np.stack([cx + rng.uniform(-0.6, 0.6, k),
                           cy + rng.uniform(-0.6, 0.6, k)], 1).ravel()
        else:  # repeated vertices (zero-length edges)
            xy = np.repeat(rng.uniform(0, max(h, w), (k, 2)), 2, axis=0).ravel()
        out.append(([float(v) for v in xy], h, w))
    return out


def test_polygons_match_pycocotools() -> None:
    rng = np.random.default_rng(0)
    for xy, h, w in _polygons(rng, 600):
        assert np.array_equal(polygon_mask(xy, h, w), oracle([xy], h, w)), (xy, h, w)


def test_awkward_polygons_match_pycocotools() -> None:
    rng = np.random.default_rng(1)
    t = np.linspace(0, 2 * np.pi, 2000, endpoint=False)
    star = 30 + (10 + 8 * np.sin(7 * t))[:, None] * np.stack([np.cos(t), np.sin(t)], 1)
    cases = [
        ([star.ravel().tolist()], 60, 64),  # many vertices
        ([[-50.0, -50.0, 500.0, -40.0, 300.0, 700.0]], 40, 30),  # covers the whole image
        ([[100.0, 100.0, 120.0, 100.0, 110.0, 130.0]], 40, 30),  # entirely outside
        ([[0.0, 0.0, 10.0, 0.0, 10.0, 10.0, 0.0, 10.0],  # two parts that overlap
          [5.0, 5.0, 15.0, 5.0, 15.0, 15.0]], 20, 20),
        ([[2.0, 2.0, 18.0, 18.0, 2.0, 18.0, 18.0, 2.0]], 20, 20),  # self-intersecting
        ([[0.2, 0.2, 0.4, 0.2, 0.3, 0.45]], 3, 3),  # tiny
        ([[0.0, 0.0, 0.0, 10.0, 0.0, 5.0]], 12, 12),  # collinear
        ([rng.uniform(0, 40, 200).tolist(), rng.uniform(-5, 45, 60).tolist()], 40, 40),
    ]
    for segm, h, w in cases:
        assert np.array_equal(annotation_mask(segm, h, w), oracle(segm, h, w)), segm


def test_rle_both_forms_match_pycocotools() -> None:
    rng = np.random.default_rng(2)
    for i in range(60):
        h, w = int(rng.integers(1, 70)), int(rng.integers(1, 70))
        m = rng.random((h, w)) < rng.uniform(0, 1)
        if i % 3 == 0:  # long runs: multi-character counts
            m = np.zeros((h, w), bool)
            m[: h // 2] = True
        rle = mask_api.encode(np.asfortranarray(m.astype(np.uint8)))
        compressed = {"size": [h, w], "counts": rle["counts"].decode()}
        uncompressed = {"size": [h, w], "counts": _runs(m)}
        assert np.array_equal(oracle(uncompressed, h, w), m)  # the test's own encoding
        assert np.array_equal(annotation_mask(uncompressed, h, w), m)
        assert np.array_equal(annotation_mask(compressed, h, w), oracle(compressed, h, w))


def test_bad_rle_is_refused() -> None:
    with pytest.raises(BadSegmentation, match="sum to 5 pixels"):
        annotation_mask({"size": [2, 3], "counts": [2, 3]}, 2, 3)
    with pytest.raises(BadSegmentation, match="differs from the image"):
        annotation_mask({"size": [3, 2], "counts": [6]}, 2, 3)
    with pytest.raises(BadSegmentation, match="outside '0'..'o'"):
        annotation_mask({"size": [2, 3], "counts": "~~"}, 2, 3)


def _coco(tmp: Path, rng: np.random.Generator) -> tuple[Path, dict]:
    """Three images with polygons, both RLE forms, a crowd region and overlaps."""
    (tmp / "images").mkdir()
    images, anns = [], []
    cats = [{"id": 40, "name": "dog"}, {"id": 7, "name": "cat"}, {"id": 19, "name": "bird"}]
    for i, (h, w) in enumerate([(40, 56), (33, 47), (50, 50)]):
        name = f"images/{i}.png"
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(tmp / name)
        images.append({"id": 10 + i, "file_name": name, "height": h, "width": w})
        for j in range(5):
            kind = (i + j) % 4
            if kind == 0:
                segm = [rng.uniform(-3, max(h, w) + 3, 2 * int(rng.integers(3, 12))).tolist()
                        for _ in range(int(rng.integers(1, 3)))]
            else:
                m = np.zeros((h, w), np.uint8)
                y, x = int(rng.integers(0, h - 5)), int(rng.integers(0, w - 5))
                m[y:y + int(rng.integers(3, h // 2)), x:x + int(rng.integers(3, w // 2))] = 1
                rle = mask_api.encode(np.asfortranarray(m))
                if kind == 1:
                    segm = {"size": [h, w], "counts": rle["counts"].decode()}
                else:
                    segm = {"size": [h, w], "counts": _runs(m)}
            anns.append({"id": len(anns) + 1, "image_id": 10 + i,
                         "category_id": cats[int(rng.integers(3))]["id"],
                         "segmentation": segm, "bbox": [0, 0, 1, 1],
                         "iscrowd": int(kind == 3)})
    anns.append({"id": 99, "image_id": 11, "category_id": 7, "segmentation": [[1.0, 2.0, 3.0, 4.0]],
                 "iscrowd": 0})  # 2 points: no area, dropped and counted
    data = {"images": images, "annotations": anns, "categories": cats}
    path = tmp / "instances.json"
    path.write_text(json.dumps(data))
    return path, data


def test_coco_segmentation_convert_matches_pycocotools(tmp_path: Path) -> None:
    import tensorflow as tf

    path, data = _coco(tmp_path, np.random.default_rng(3))
    out = tmp_path / "out"
    manifest = convert(path, out, task="segmentation", workers=1)
    assert manifest.class_names == ["background", "cat", "bird", "dog"]  # sorted ids 7, 19, 40
    value = {7: 1, 19: 2, 40: 3}
    features = {"image/source_id": tf.io.FixedLenFeature([], tf.string),
                MASK_KEY: tf.io.FixedLenFeature([], tf.string)}
    records = read_split(out, "train", features)
    assert len(records) == 3
    for rec in records:
        image_id = int(rec["image/source_id"])
        img = next(im for im in data["images"] if im["id"] == image_id)
        h, w = img["height"], img["width"]
        expected = np.zeros((h, w), np.uint8)
        for ann in data["annotations"]:  # file order: later over earlier
            segm = ann["segmentation"]
            if ann["image_id"] != image_id or (isinstance(segm, list) and len(segm[0]) < 6):
                continue
            expected[oracle(segm, h, w)] = 255 if ann["iscrowd"] else value[ann["category_id"]]
        with Image.open(io.BytesIO(rec[MASK_KEY])) as got:
            assert got.mode == "L"
            assert np.array_equal(np.asarray(got), expected), image_id
        assert (expected == 255).any() or image_id != 10
    stats = manifest.settings["stats"]["train"]
    assert stats["polygons_dropped"] == 1 and stats["masks"] == 3
    assert stats["annotations"] == 16  # the 2-point one included: it paints nothing


def test_coco_segmentation_bad_annotation_is_listed(tmp_path: Path) -> None:
    path, data = _coco(tmp_path, np.random.default_rng(4))
    data["annotations"][0]["segmentation"] = [[1.0, 2.0, 3.0]]  # image 10
    data["annotations"][5]["segmentation"] = {"size": [1, 1], "counts": [1]}  # image 11
    path.write_text(json.dumps(data))
    manifest = convert(path, tmp_path / "out", task="segmentation", workers=1)
    assert manifest.splits["train"].num_records == 1
    skipped = {s.input: s.reason for s in manifest.splits["train"].skipped}
    assert skipped == {
        "image id 10 (images/0.png)": "annotation 1: a polygon has an odd number (3) of "
                                      "coordinates",
        "image id 11 (images/1.png)": "annotation 6: RLE size [1, 1] differs from the "
                                      "image's [height, width] [33, 47]"}
    del data["annotations"][12]["segmentation"]
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="annotation 13: needs a 'segmentation'"):
        convert(path, tmp_path / "out2", task="segmentation", on_error="raise", workers=1)


def test_sample_coco_converts_as_segmentation(coco_src: Path, tmp_path: Path) -> None:
    """The sample COCO set's rectangles, painted in file order, are its class masks."""
    import tensorflow as tf

    data = json.loads(coco_src.read_text())
    manifest = convert(coco_src, tmp_path / "out", task="segmentation", workers=1)
    assert manifest.splits["train"].num_records == len(data["images"])
    assert not manifest.splits["train"].skipped
    value = {cid: i + 1 for i, cid in enumerate(sorted(c["id"] for c in data["categories"]))}
    features = {"image/source_id": tf.io.FixedLenFeature([], tf.string),
                MASK_KEY: tf.io.FixedLenFeature([], tf.string)}
    for rec in read_split(tmp_path / "out", "train", features):
        image_id = int(rec["image/source_id"])
        img = next(im for im in data["images"] if im["id"] == image_id)
        expected = np.zeros((img["height"], img["width"]), np.uint8)
        for ann in data["annotations"]:
            if ann["image_id"] == image_id:
                x, y, w, h = ann["bbox"]
                expected[y:y + h, x:x + w] = value[ann["category_id"]]
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(rec[MASK_KEY]))), expected)
