"""COCO with boxes, instance masks and keypoints together, as users make it:
`make_pose_coco` (polygons, RLE, crowd, person keypoints) -> `tfpipe.convert`
with masks -> the detection train pipeline with both per-object targets and
mosaic (the batch op that moves, cuts and drops objects; mixup only concatenates
rows and is covered per target in test_instance_masks / test_keypoints).

The targets are independent paths through the same draws, so the oracle is
each one alone: with masks and keypoints both on, the images and boxes are those of
each single-target pipeline, the instance masks the masks-only pipeline's and the keypoints the
keypoints-only pipeline's, bit for bit (one target must not shift the other's
rows or seeds). And every visible point lies inside its own object's box.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tfpipe.config import load_config
from tfpipe.convert import convert
from tfpipe.convert.samples import make_pose_coco
from tfpipe.pipeline import build_pipeline

pytestmark = pytest.mark.xdist_group("coco_objects")

SIZE = (64, 64)
MASK = (12, 12)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = Path(tmp_path_factory.mktemp("coco_objects"))
    ann = make_pose_coco(root / "src", num_images=8, seed=3, size_range=(96, 128))
    convert(ann, root / "data", masks=True)
    return str(root / "data")


def _config(path: str, masks: bool, keypoints: bool) -> dict:
    data = {"path": path, "image_size": list(SIZE), "max_boxes": 6, "output_dtype": "uint8"}
    data["instance_masks"] = {"size": list(MASK)} if masks else None
    data["keypoints"] = {} if keypoints else None
    return {"base": "pose", "data": data,
            "pipeline": {"batch_size": 4, "shuffle_buffer": 8, "drop_remainder": False},
            # enable_rate 1 (gating per sample traces the batch ops twice: tested elsewhere)
            "augment": {"batch": {"mosaic": {"p": 0.5}}}}


def _batches(path: str, masks: bool, keypoints: bool) -> list[dict[str, np.ndarray]]:
    cfg = load_config(_config(path, masks, keypoints))
    return [{k: v.numpy() for k, v in b.items()} for b in build_pipeline(cfg, split="train")]


def test_masks_and_keypoints_together_equal_each_alone(data: str) -> None:
    both = _batches(data, True, True)
    masks_only = _batches(data, True, False)
    points_only = _batches(data, False, True)
    assert sum(len(b["boxes"]) for b in both) == 8
    seen_points = seen_masks = 0
    for b, m, p in zip(both, masks_only, points_only, strict=True):
        for key in ("image", "boxes", "classes", "num_boxes"):
            np.testing.assert_array_equal(b[key], m[key], err_msg=key)
            np.testing.assert_array_equal(b[key], p[key], err_msg=key)
        np.testing.assert_array_equal(b["instance_masks"], m["instance_masks"])
        np.testing.assert_array_equal(b["keypoints"], p["keypoints"])
        assert b["instance_masks"].shape[2:] == MASK and b["keypoints"].shape[2:] == (7, 3)
        for i, n in enumerate(b["num_boxes"]):
            # padding rows: no mask, no points
            assert not b["instance_masks"][i, n:].any() and not b["keypoints"][i, n:].any()
            seen_masks += int(b["instance_masks"][i, :n].any(axis=(1, 2)).sum())
            for box, pts in zip(b["boxes"][i, :n], b["keypoints"][i, :n]):
                vis = pts[:, 2] > 0
                seen_points += int(vis.sum())
                y, x = pts[vis, 0], pts[vis, 1]
                tol = 1e-4
                assert np.all((y >= box[0] - tol) & (y <= box[2] + tol)
                              & (x >= box[1] - tol) & (x <= box[3] + tol)), (box, pts)
    assert seen_masks > 10 and seen_points > 20  # the property was exercised
