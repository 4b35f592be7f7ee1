"""COCO instance masks and keypoints through `convert` (issue #24): masks against
pycocotools (`frPyObjects` + `merge` + `decode`, as COCO.annToMask), keypoints against
the JSON's pixel coordinates, verify --deep findings, the CLI on the pose sample, TFDS."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from tfpipe.convert import conversion_summary, convert
from tfpipe.convert.samples import KEYPOINT_COLORS, POSE_KEYPOINTS, POSE_SKELETON
from tfpipe.errors import ConfigError, InputError
from tfpipe.records import (AREA_KEY, INSTANCE_MASK_KEY, IS_CROWD_KEY, KEYPOINT_VISIBILITY_KEY,
                            KEYPOINT_X_KEY, KEYPOINT_Y_KEY, verify)

from .conftest import read_split

mask_api = pytest.importorskip("pycocotools.mask")

NAMES = ["nose", "left_eye", "right_eye"]


def oracle(segm, h: int, w: int) -> np.ndarray:
    """pycocotools' COCO.annToRLE + decode (polygons under 3 points left out, as
    convert drops them: pycocotools would read 2 points as a box)."""
    if isinstance(segm, list):
        segm = [p for p in segm if len(p) >= 6]
        if not segm:
            return np.zeros((h, w), bool)
        rle = mask_api.merge(mask_api.frPyObjects(segm, h, w))
    elif isinstance(segm["counts"], list):
        rle = mask_api.frPyObjects(segm, h, w)
    else:
        rle = segm
    return mask_api.decode(rle).astype(bool)


def _runs(mask: np.ndarray) -> list[int]:
    flat = mask.T.ravel().astype(np.int8)
    edges = np.flatnonzero(np.diff(flat)) + 1
    counts = np.diff(np.r_[0, edges, flat.size]).tolist()
    return ([0] if flat[0] else []) + [int(c) for c in counts]


def _features(masks: bool = True) -> dict:
    import tensorflow as tf

    var = tf.io.VarLenFeature
    f = {"image/source_id": tf.io.FixedLenFeature([], tf.string),
         "image/encoded": tf.io.FixedLenFeature([], tf.string),
         "image/object/bbox/xmin": var(tf.float32),
         KEYPOINT_Y_KEY: var(tf.float32), KEYPOINT_X_KEY: var(tf.float32),
         KEYPOINT_VISIBILITY_KEY: var(tf.int64)}
    if masks:
        f.update({INSTANCE_MASK_KEY: var(tf.string), AREA_KEY: var(tf.float32),
                  IS_CROWD_KEY: var(tf.int64)})
    return f


def _kept(ann: dict, h: int, w: int) -> bool:
    """The default box policy (clip), independently: finite, positive size, something inside."""
    x, y, bw, bh = (float(v) for v in ann["bbox"])
    if not all(np.isfinite([x, y, bw, bh])) or bw <= 0 or bh <= 0:
        return False
    return min(x + bw, w) > max(x, 0) and min(y + bh, h) > max(y, 0)


def _expected_points(ann: dict, cats: dict, h: int, w: int) -> np.ndarray:
    """[K, 3] (y, x, v) of one object: normalized, absent / outside -> 0."""
    out = np.zeros((len(NAMES), 3))
    kps = ann.get("keypoints")
    if not kps or not cats[ann["category_id"]].get("keypoints"):
        return out
    for i in range(len(NAMES)):
        x, y, v = kps[3 * i:3 * i + 3]
        if v and 0 <= x <= w and 0 <= y <= h:
            out[i] = (y / h, x / w, v)
    return out


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Three tiny images: polygons (one under 3 points), both RLE forms, a crowd, boxes
    clipped / dropped, keypoints absent / occluded / outside / on the border, a category
    without keypoints, an image without objects."""
    root = tmp_path_factory.mktemp("instances")
    (root / "images").mkdir()
    rng = np.random.default_rng(7)
    sizes = {1: (40, 56), 2: (33, 47), 3: (20, 24)}
    images = []
    for i, (h, w) in sizes.items():
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(
            root / f"images/{i}.png")
        images.append({"id": i, "file_name": f"images/{i}.png", "height": h, "width": w})
    ball = np.zeros((40, 56), bool)
    ball[10:20, 30:40] = True
    ball[12:14, 33:35] = False
    crowd = np.zeros((40, 56), bool)
    crowd[30:38, 0:15] = True
    anns = [
        {"id": 1, "image_id": 1, "category_id": 5, "bbox": [5, 5, 20, 25], "area": 321.5,
         "segmentation": [[5, 5, 25, 6, 20, 30, 4, 28], [-3, 35, 10, 33, 4, 45]],
         "keypoints": [10.5, 8.5, 2, 70, 8, 2, 3, 4, 0], "iscrowd": 0},
        {"id": 2, "image_id": 1, "category_id": 2, "bbox": [30, 10, 10, 10],
         "segmentation": {"size": [40, 56],
                          "counts": mask_api.encode(np.asfortranarray(ball.astype(np.uint8)))
                          ["counts"].decode()}},
        {"id": 3, "image_id": 1, "category_id": 5, "bbox": [-5, 30, 20, 8], "area": 120,
         "segmentation": {"size": [40, 56], "counts": _runs(crowd)}, "iscrowd": 1,
         "keypoints": [0] * 9},
        {"id": 4, "image_id": 1, "category_id": 5, "bbox": [1, 1, 0, 5], "area": 3,
         "segmentation": [[1, 1, 2, 1, 2, 5]], "keypoints": [1, 1, 2] * 3},
        {"id": 5, "image_id": 1, "category_id": 5, "bbox": [40, 22, 14, 15], "area": 90,
         "segmentation": [[41.5, 22.25, 53, 25, 50.5, 36.75], [1, 2, 3, 4]],
         "keypoints": [45, 30, 1, 50, 25, 2, 48.2, 33.7, 2]},
        {"id": 6, "image_id": 2, "category_id": 5, "bbox": [60, 40, 5, 5], "area": 25,
         "segmentation": [[60, 40, 65, 40, 65, 45]], "keypoints": [61, 41, 2] * 3},
        {"id": 7, "image_id": 2, "category_id": 2, "bbox": [2, 2, 10, 10], "area": 50,
         "segmentation": [[2, 2, 12, 2, 7, 12]]},
        {"id": 8, "image_id": 2, "category_id": 5, "bbox": [20, 5, 27, 28], "area": 300,
         "segmentation": [[20, 5, 47, 5, 47, 33, 20, 33]],
         "keypoints": [47, 33, 2, 0, 0, 1, 46.9, -0.5, 2]},
    ]
    cats = [{"id": 5, "name": "person", "keypoints": NAMES, "skeleton": [[1, 2], [1, 3]]},
            {"id": 2, "name": "ball"}]
    data = {"images": images, "annotations": anns, "categories": cats}
    path = root / "instances.json"
    path.write_text(json.dumps(data))
    return path, data


@pytest.fixture(scope="module")
def converted(instances, tmp_path_factory: pytest.TempPathFactory):
    path, data = instances
    out = tmp_path_factory.mktemp("inst_out") / "out"
    return out, convert(path, out, masks=True, workers=1)


def test_masks_and_keypoints_match_pycocotools(instances, converted) -> None:
    _, data = instances
    out, manifest = converted
    cats = {c["id"]: c for c in data["categories"]}
    records = read_split(out, "train", _features())
    assert len(records) == 3
    for rec in records:
        image_id = int(rec["image/source_id"])
        img = next(im for im in data["images"] if im["id"] == image_id)
        h, w = img["height"], img["width"]
        kept = [a for a in data["annotations"] if a["image_id"] == image_id and _kept(a, h, w)]
        n = len(rec["image/object/bbox/xmin"])
        assert n == len(kept) == len(rec[INSTANCE_MASK_KEY]) == len(rec[AREA_KEY])
        for j, ann in enumerate(kept):
            with Image.open(io.BytesIO(rec[INSTANCE_MASK_KEY][j])) as m:
                assert m.mode == "L" and m.size == (w, h)
                got = np.asarray(m)
            want = oracle(ann["segmentation"], h, w)
            assert set(np.unique(got)) <= {0, 1}
            assert np.array_equal(got.astype(bool), want), (image_id, ann["id"])
            assert rec[AREA_KEY][j] == np.float32(ann.get("area", want.sum()))
            assert rec[IS_CROWD_KEY][j] == ann.get("iscrowd", 0)
        points = np.stack([rec[KEYPOINT_Y_KEY], rec[KEYPOINT_X_KEY],
                           rec[KEYPOINT_VISIBILITY_KEY]], 1).reshape(n, len(NAMES), 3)
        want = np.array([_expected_points(a, cats, h, w) for a in kept]).reshape(n, 3, 3)
        np.testing.assert_allclose(points, want, rtol=1e-6, atol=1e-7)
    stats = manifest.settings["stats"]["train"]
    assert stats == {"boxes": 6, "boxes_clipped": 1, "boxes_dropped": 2, "instance_masks": 6,
                     "crowd": 1, "polygons_dropped": 1, "keypoints": 6,
                     "keypoints_outside": 2}
    assert manifest.source["keypoints"] == {"names": NAMES, "skeleton": [[0, 1], [0, 2]]}
    assert manifest.source["instance_masks"] is True
    objects = conversion_summary(manifest)["splits"]["train"]["objects"]
    assert objects["instance_masks"] == 6 and objects["keypoints_outside"] == 2
    assert verify(out, deep=True).ok


def test_without_masks_the_dropped_masks_are_counted(instances, converted,
                                                     tmp_path: Path) -> None:
    path, data = instances
    manifest = convert(path, tmp_path / "plain", workers=1)
    assert INSTANCE_MASK_KEY not in manifest.schema and KEYPOINT_Y_KEY in manifest.schema
    # every annotation of a converted image that carried a segmentation, kept box or not
    stats = manifest.settings["stats"]["train"]
    assert stats["masks_not_kept"] == 8 and "instance_masks" not in stats
    assert conversion_summary(manifest)["splits"]["train"]["objects"]["masks_not_kept"] == 8
    # the count is in the manifest only: the records are those of a set without masks
    stripped = json.loads(json.dumps(data))
    for ann in stripped["annotations"]:
        del ann["segmentation"]
    (path.parent / "stripped.json").write_text(json.dumps(stripped))
    other = convert(path.parent / "stripped.json", tmp_path / "stripped", workers=1)
    assert "masks_not_kept" not in other.settings["stats"]["train"]
    shard = manifest.splits["train"].shards[0].path
    assert (tmp_path / "plain" / shard).read_bytes() == (tmp_path / "stripped" / shard).read_bytes()


def test_keypoint_errors(instances, tmp_path: Path) -> None:
    path, data = instances
    bad = json.loads(json.dumps(data))
    bad["categories"][1]["keypoints"] = ["a", "b"]
    (tmp_path / "mixed.json").write_text(json.dumps(bad))
    with pytest.raises(InputError, match=r"'ball' \(id 2\) names keypoints \['a', 'b'\], "
                                         r"category 'person' \(id 5\) names"):
        convert(tmp_path / "mixed.json", tmp_path / "o1", images=path.parent)
    bad["categories"][1].update(keypoints=NAMES, skeleton=[[1, 2]])
    (tmp_path / "mixed.json").write_text(json.dumps(bad))
    with pytest.raises(InputError, match="different skeletons"):
        convert(tmp_path / "mixed.json", tmp_path / "o2", images=path.parent)
    bad = json.loads(json.dumps(data))
    bad["annotations"][7]["keypoints"] = [1, 1, 3] * 3  # image 2: visibility 3
    bad["annotations"][0]["keypoints"] = [1, 1, 2]  # image 1: 3 values, not 9
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    m = convert(tmp_path / "bad.json", tmp_path / "o3", images=path.parent, workers=1)
    reasons = {s.input: s.reason for s in m.splits["train"].skipped}
    assert reasons == {
        "image id 1 (images/1.png)": "annotation 1: 'keypoints' must be 9 numbers [x1, y1, "
                                     "v1, ...] (3 named points), got 3 values",
        "image id 2 (images/2.png)": "annotation 8: keypoint visibility must be 0 (absent), "
                                     "1 (occluded) or 2 (visible), got [3]"}
    # invalid_boxes="raise" stops on a keypoint outside the image too
    one = json.loads(json.dumps(data))
    one["annotations"] = [one["annotations"][0]]
    (tmp_path / "one.json").write_text(json.dumps(one))
    with pytest.raises(InputError, match=r"annotation 1: keypoint 1 \(x=70.0, y=8.0\) is "
                                         "outside the 56x40 image"):
        convert(tmp_path / "one.json", tmp_path / "o4", images=path.parent,
                invalid_boxes="raise", workers=1)


def test_masks_option_is_checked(instances, tmp_path: Path) -> None:
    path, data = instances
    (tmp_path / "folder" / "cat").mkdir(parents=True)
    with pytest.raises(ConfigError, match="masks=True .instance masks. goes with a COCO file"):
        convert(tmp_path / "folder", tmp_path / "a", masks=True)
    with pytest.raises(ConfigError, match="goes with task 'detection'"):
        convert(path, tmp_path / "b", masks=True, task="segmentation")
    with pytest.raises(ConfigError, match="instance masks with masks=True"):
        convert(path, tmp_path / "c", masks=str(tmp_path))
    bad = json.loads(json.dumps(data))
    del bad["annotations"][6]["segmentation"]
    (tmp_path / "nosegm.json").write_text(json.dumps(bad))
    m = convert(tmp_path / "nosegm.json", tmp_path / "d", images=path.parent, masks=True,
                workers=1)
    assert [s.reason for s in m.splits["train"].skipped] == [
        "annotation 7: needs a 'segmentation' (polygons or RLE) for masks=True (--masks)"]


def test_verify_deep_names_bad_instance_masks_and_keypoints(converted, tmp_path: Path) -> None:
    import tensorflow as tf

    from tfpipe.cli.main import cli

    out, manifest = converted
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shard = manifest.splits["train"].shards[0].path
    records = list(tf.data.TFRecordDataset(str(copy / shard)).as_numpy_iterator())
    damaged, names = [], []
    for data in records:
        ex = tf.train.Example.FromString(data)
        feats = ex.features.feature
        masks = feats[INSTANCE_MASK_KEY].bytes_list.value
        if len(masks) >= 2 and not names:
            buf = io.BytesIO()
            Image.fromarray(np.zeros((5, 7), np.uint8)).save(buf, format="PNG")
            masks[0] = buf.getvalue()  # wrong size
            masks[1] = masks[1][:30]  # truncated
            feats[KEYPOINT_VISIBILITY_KEY].int64_list.value[0] = 7
            names.append(feats["image/filename"].bytes_list.value[0].decode())
        elif len(masks) >= 1:
            del masks[-1]  # one mask fewer than boxes
            names.append(feats["image/filename"].bytes_list.value[0].decode())
        damaged.append(ex.SerializeToString())
    with tf.io.TFRecordWriter(str(copy / shard)) as w:
        for data in damaged:
            w.write(data)
    obj = json.loads((copy / "manifest.json").read_text())
    entry = obj["splits"]["train"]["shards"][0]
    entry["sha256"] = hashlib.sha256((copy / shard).read_bytes()).hexdigest()
    entry["num_bytes"] = (copy / shard).stat().st_size
    (copy / "manifest.json").write_text(json.dumps(obj))
    report = verify(copy, deep=True)
    masks = [f.message for f in report.findings if f.kind == "bad-instance-mask"]
    points = [f.message for f in report.findings if f.kind == "bad-keypoint"]
    assert {f.kind for f in report.findings} == {"bad-instance-mask", "bad-keypoint"}
    assert len(masks) == 3 and len(points) == 1, report.findings
    assert names[0] in masks[0] and "instance mask 0 is 5x7" in masks[0]
    assert names[0] in masks[1] and "instance mask 1 does not decode" in masks[1]
    assert names[1] in masks[2] and "instance masks ('image/object/mask') for" in masks[2]
    assert "visibility values [7]" in points[0]
    result = CliRunner().invoke(cli, ["verify", str(copy), "--deep"])
    assert result.exit_code != 0 and "bad-instance-mask" in result.output


# ----------------------------------------------------------------------------- pose sample
@pytest.fixture(scope="module")
def pose(tmp_path_factory: pytest.TempPathFactory):
    """`tfpipe sample-data pose` -> `tfpipe convert ... --masks --json` through the CLI."""
    from tfpipe.cli.main import cli

    root = tmp_path_factory.mktemp("pose")
    runner = CliRunner()
    result = runner.invoke(cli, ["sample-data", "pose", str(root / "src"), "--images", "4",
                                 "--seed", "1"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["convert", str(root / "src" / "annotations.json"),
                                 str(root / "out"), "--masks", "--json"])
    assert result.exit_code == 0, result.output
    return root, json.loads(result.output)


def test_cli_pose_sample_end_to_end(pose) -> None:
    from tfpipe.cli.main import cli

    root, summary = pose
    data = json.loads((root / "src" / "annotations.json").read_text())
    assert summary["keypoints"] == {"names": list(POSE_KEYPOINTS),
                                    "skeleton": [[i - 1, j - 1] for i, j in POSE_SKELETON]}
    objects = summary["splits"]["train"]["objects"]
    assert objects["instance_masks"] == len(data["annotations"]) and objects["crowd"] == 1
    segms = [a["segmentation"] for a in data["annotations"]]
    assert any(isinstance(s, dict) and isinstance(s["counts"], str) for s in segms)
    assert any(isinstance(s, dict) and isinstance(s["counts"], list) for s in segms)
    k, painted = len(POSE_KEYPOINTS), 0
    for rec in read_split(root / "out", "train", _features()):
        image = np.asarray(Image.open(io.BytesIO(rec["image/encoded"])).convert("RGB"))
        h, w = image.shape[:2]
        kept = [a for a in data["annotations"]
                if a["image_id"] == int(rec["image/source_id"])]
        for j, ann in enumerate(kept):  # masks: pycocotools on polygons and both RLEs
            got = np.asarray(Image.open(io.BytesIO(rec[INSTANCE_MASK_KEY][j]))).astype(bool)
            assert np.array_equal(got, oracle(ann["segmentation"], h, w))
        ys = rec[KEYPOINT_Y_KEY].reshape(-1, k)
        xs = rec[KEYPOINT_X_KEY].reshape(-1, k)
        vs = rec[KEYPOINT_VISIBILITY_KEY].reshape(-1, k)
        for j in range(len(kept)):
            for i, name in enumerate(POSE_KEYPOINTS):
                if vs[j, i] == 0:
                    assert ys[j, i] == xs[j, i] == 0
                    continue
                # the point lies on its own mark's colour, in the normalized frame
                py, px = int(ys[j, i] * h), int(xs[j, i] * w)
                assert tuple(image[py, px]) == KEYPOINT_COLORS[name], (name, py, px)
                painted += 1
            left, right = POSE_KEYPOINTS.index("left_eye"), POSE_KEYPOINTS.index("right_eye")
            if vs[j, left] and vs[j, right]:  # facing the camera: the subject's left is
                assert xs[j, left] > xs[j, right]  # the image's right
    assert painted == objects["keypoints"] > 0
    runner = CliRunner()
    result = runner.invoke(cli, ["verify", str(root / "out"), "--deep"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["inspect", str(root / "out"), "--json"])
    assert result.exit_code == 0, result.output
    s = json.loads(result.output)
    assert s["keypoints"]["names"] == list(POSE_KEYPOINTS)
    assert all(r["instance_masks"] == r["boxes"] for r in s["records"])
    assert all(r["keypoints"].endswith(f"of {k * r['boxes']}") for r in s["records"])


def test_tfds_reads_instance_masks_and_keypoints(pose) -> None:
    tfds = pytest.importorskip("tensorflow_datasets")
    root, summary = pose
    builder = tfds.builder_from_directory(root / "out")
    assert builder.info.metadata["keypoints"] == summary["keypoints"]
    k = len(POSE_KEYPOINTS)
    records = {r["image/source_id"]: r for r in read_split(root / "out", "train", _features())}
    for ex in tfds.as_numpy(builder.as_dataset(split="train")):
        rec = records[ex["image/source_id"]]
        obj = ex["image/object"]
        n = len(rec[INSTANCE_MASK_KEY])
        assert obj["mask"].shape[0] == n and obj["keypoint"]["y"].shape == (n, k)
        for j in range(n):
            want = np.asarray(Image.open(io.BytesIO(rec[INSTANCE_MASK_KEY][j])))
            assert np.array_equal(obj["mask"][j, :, :, 0], want)
        np.testing.assert_array_equal(obj["keypoint"]["visibility"].ravel(),
                                      rec[KEYPOINT_VISIBILITY_KEY])
        np.testing.assert_array_equal(obj["area"], rec[AREA_KEY])


def test_beam_direct_matches_local(pose, tmp_path: Path) -> None:
    pytest.importorskip("apache_beam")
    root, _ = pose
    manifest = convert(root / "src" / "annotations.json", tmp_path / "beam", masks=True,
                       runner="direct")
    local = json.loads((root / "out" / "manifest.json").read_text())
    assert [s.sha256 for s in manifest.splits["train"].shards] == \
        [s["sha256"] for s in local["splits"]["train"]["shards"]]
    assert manifest.settings["stats"] == local["settings"]["stats"]
    assert manifest.source["keypoints"] == local["source"]["keypoints"]


def test_sample_coco_shards_unchanged(coco_src: Path, tmp_path: Path) -> None:
    """Without masks and keypoints the records are what they were before instance masks
    (sha256 of main's output at 9d073cf); only the manifest counts masks_not_kept."""
    m = convert(coco_src, tmp_path / "o", workers=1, split="train=0.5,val=0.5",
                shard_size="40KB")
    got = {s.path: s.sha256[:16] for info in m.splits.values() for s in info.shards}
    assert got == {"train-00000-of-00002.tfrecord": "7e5e2e32fe10eed3",
                   "train-00001-of-00002.tfrecord": "200e0e2f9e21e941",
                   "val-00000-of-00001.tfrecord": "d6e590caf340e10f"}
