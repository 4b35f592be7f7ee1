"""Detection end to end: boxes follow the geometry (image oracle), flips exact, padding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import sample_data
from tfpipe.pipeline import build_pipeline

from .conftest import _example, base_config, write_shards

H, W = 48, 64


@pytest.fixture(scope="module")
def det_dataset(tmp_path_factory) -> str:
    """24 PNGs: one white rectangle on black, its box (normalized yxyx) and class 1..3."""
    rng = np.random.default_rng(1)
    recs = []
    for i in range(24):
        y0, x0 = int(rng.integers(2, H // 2)), int(rng.integers(2, W // 2))
        y1, x1 = y0 + int(rng.integers(8, H // 2 - 2)), x0 + int(rng.integers(8, W // 2 - 2))
        img = np.zeros((H, W, 3), np.uint8)
        img[y0:y1, x0:x1] = 255
        box = [y0 / H, x0 / W, y1 / H, x1 / W]
        recs.append(_example(sample_data.encode(img, "png"), "png", 0, [box], [1 + i % 3]))
    out = Path(tmp_path_factory.mktemp("det"))
    write_shards(out, "train", recs, 2)
    return str(out / "train-*.tfrecord")


def _cfg(path, **over):
    cfg = base_config(path, **{"data.task": "detection", "data.max_boxes": 5,
                               "data.output_dtype": "uint8", "augment.pixel": {},
                               "pipeline.drop_remainder": False, **over})
    return cfg


def _mask_box(img: np.ndarray) -> np.ndarray:
    """Normalized yxyx box of the bright pixels (edges: first/last bright pixel +- 0.5)."""
    ys, xs = np.nonzero(img[..., 0] >= 128)
    h, w = img.shape[:2]
    return np.array([ys.min() / h, xs.min() / w, (ys.max() + 1) / h, (xs.max() + 1) / w])


def test_boxes_follow_random_crop_and_flip(det_dataset):
    cfg = _cfg(det_dataset, **{"augment.geometry": {
        "random_resized_crop": {"scale": [0.6, 1.0], "ratio": [0.75, 1.3333]},
        "flip": {"horizontal": True, "p": 0.5}}})
    checked = 0
    for b in build_pipeline(cfg):
        assert b["image"].shape[1:] == (32, 32, 3)
        assert b["boxes"].shape[1:] == (5, 4) and b["classes"].shape[1:] == (5,)
        for img, boxes, classes, n in zip(b["image"].numpy(), b["boxes"].numpy(),
                                          b["classes"].numpy(), b["num_boxes"].numpy()):
            assert np.all(classes[n:] == -1) and np.all(boxes[n:] == 0)
            if n == 0:
                assert (img[..., 0] >= 128).sum() < 8  # box cropped away: (almost) nothing left
                continue
            assert n == 1 and classes[0] in (1, 2, 3)
            # oracle: the box of the bright pixels in the OUTPUT image (bilinear blur: 1 px)
            np.testing.assert_allclose(boxes[0], _mask_box(img), atol=1.01 / 32)
            checked += 1
    assert checked >= 12


def test_flip_moves_boxes_exactly(det_dataset):
    flip = _cfg(det_dataset, **{"augment.geometry": {"flip": {"horizontal": True, "p": 1.0}},
                                "pipeline.shuffle_buffer": 0})
    plain = next(iter(build_pipeline(flip, split="validation", keep_index=True)))
    flipped = next(iter(build_pipeline(flip, keep_index=True)))
    np.testing.assert_array_equal(plain["index"], flipped["index"])
    p, f = plain["boxes"].numpy()[:, 0], flipped["boxes"].numpy()[:, 0]
    np.testing.assert_allclose(f[:, 0], p[:, 0], atol=1e-6)
    np.testing.assert_allclose(f[:, 2], p[:, 2], atol=1e-6)
    np.testing.assert_allclose(f[:, 1], 1.0 - p[:, 3], atol=1e-6)
    np.testing.assert_allclose(f[:, 3], 1.0 - p[:, 1], atol=1e-6)
    diff = np.abs(flipped["image"].numpy().astype(int) - plain["image"].numpy()[:, :, ::-1].astype(int))
    assert diff.max() <= 1  # one affine resample vs resize-then-reverse: rounding only


def test_detection_float_output_mosaic_and_supervised(det_dataset):
    cfg = _cfg(det_dataset, **{"data.output_dtype": "float32",
                               "augment.pixel": {"brightness": {"max_delta": 0.2}},
                               "augment.batch": {"mosaic": {"p": 1.0}}})
    x, target = next(iter(build_pipeline(cfg, as_supervised=True)))
    assert x.dtype == tf.float32 and x.shape == (8, 32, 32, 3)
    assert set(target) == {"boxes", "classes", "num_boxes"}
    n = target["num_boxes"].numpy()
    assert n.max() >= 2  # mosaic combines the boxes of 4 images
    valid = target["boxes"].numpy()[np.arange(5)[None, :] < n[:, None]]
    assert np.all((valid >= 0) & (valid <= 1)) and np.all(valid[:, 2] > valid[:, 0])


def test_detection_mixup_keeps_both_box_sets(det_dataset):
    cfg = _cfg(det_dataset, **{"augment.geometry": {}, "augment.batch": {"mixup": {"p": 1.0}}})
    b = next(iter(build_pipeline(cfg)))
    n, w = b["num_boxes"].numpy(), b["box_weights"].numpy()
    assert (n == 2).all()  # own box + partner's box
    np.testing.assert_allclose(w[:, 0] + w[:, 1], 1.0, atol=1e-6)  # lambda + (1 - lambda)
    assert np.all(w[:, 2:] == 0)
