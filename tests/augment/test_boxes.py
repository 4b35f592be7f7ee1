"""Boxes: converters round trip; transform_boxes vs a rendered mask warped by OpenCV."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A
from tfpipe.augment import boxes as B

H, W = 120, 160


def render(box: np.ndarray, h: int, w: int) -> np.ndarray:
    """Mask of the pixels whose centres lie inside a normalized yxyx box."""
    ys = (np.arange(h) + 0.5) / h
    xs = (np.arange(w) + 0.5) / w
    inside_y = (ys > box[0]) & (ys < box[2])
    inside_x = (xs > box[1]) & (xs < box[3])
    return (inside_y[:, None] & inside_x[None]).astype(np.uint8) * 255


def mask_box(mask: np.ndarray) -> np.ndarray | None:
    """Normalized yxyx box around the nonzero pixels (pixel edges)."""
    ys, xs = np.nonzero(mask > 127)
    if len(ys) == 0:
        return None
    h, w = mask.shape
    return np.array([ys.min() / h, xs.min() / w, (ys.max() + 1) / h, (xs.max() + 1) / w])


C = ((W - 1) / 2, (H - 1) / 2)
CASES = {
    "identity": (lambda: A.identity_matrix(), (H, W)),
    "rotate": (lambda: A.rotation_matrix(30.0, C), (H, W)),
    "scale_shear": (lambda: A.compose(A.shear_matrix(12.0, center=C),
                                      A.scale_matrix(1.4, 0.7, C)), (H, W)),
    "flip": (lambda: A.flip_matrix((H, W), True, True), (H, W)),
    "rot90": (lambda: A.rot90_matrix((H, W), 1), (W, H)),
    "crop": (lambda: A.crop_matrix((10, 30), (80, 90), (64, 64)), (64, 64)),
    "combo": (lambda: A.compose(A.crop_matrix((5, 5), (100, 150), (96, 128)),
                                A.rotation_matrix(-20.0, (63.5, 47.5)),
                                A.translate_matrix(7.0, -3.0)), (96, 128)),
}
BOXES = np.array([[0.10, 0.10, 0.40, 0.30], [0.25, 0.50, 0.80, 0.95],
                  [0.55, 0.05, 0.95, 0.45], [0.40, 0.40, 0.60, 0.60]], np.float32)


@pytest.mark.parametrize("case", sorted(CASES))
def test_transform_boxes_matches_warped_mask(case) -> None:
    make, out_size = CASES[case]
    m = make().numpy()
    got, keep = A.transform_boxes(BOXES, m, (H, W), out_size)
    oh, ow = out_size
    rotated = case in ("rotate", "combo", "scale_shear")
    for box, g, k in zip(BOXES, got.numpy(), keep.numpy()):
        warped = cv2.warpAffine(render(box, H, W), m[:2], (ow, oh), flags=cv2.INTER_LINEAR)
        ref = mask_box(warped)
        if ref is None:
            assert not k
            continue
        assert k
        # within ~1 output pixel (rendered masks are quantized to pixel centres; rotated
        # corners of a pixel mask reach slightly less far than the continuous box)
        tol = np.array([1.6 / oh, 1.6 / ow, 1.6 / oh, 1.6 / ow]) * (1.5 if rotated else 1.0)
        assert (np.abs(g - ref) <= tol).all(), (case, g, ref)


def test_batched_boxes_and_per_sample_matrices() -> None:
    ms = tf.stack([A.flip_matrix((H, W), True), A.rotation_matrix(15.0, C)])
    boxes = np.stack([BOXES, BOXES[::-1]])
    got, keep = A.transform_boxes(boxes, ms, (H, W))
    for i in range(2):
        ref, rkeep = A.transform_boxes(boxes[i], ms[i], (H, W))
        np.testing.assert_allclose(got[i], ref, atol=1e-6)
        np.testing.assert_array_equal(keep[i], rkeep)
    # a flipped box is mirrored exactly
    np.testing.assert_allclose(got[0, 0], [0.10, 0.70, 0.40, 0.90], atol=1e-6)


def test_clip_visibility_and_area_filters() -> None:
    shift = A.translate_matrix(-0.2 * W, 0.0)  # move everything left by 20% of the width
    boxes = np.array([[0.1, 0.05, 0.3, 0.15],   # fully outside after the shift
                      [0.1, 0.1, 0.3, 0.5],     # 3/4 visible (0.1..0.5 -> -0.1..0.3)
                      [0.1, 0.6, 0.3, 0.9],     # fully inside
                      [0.0, 0.0, 0.0, 0.0]], np.float32)  # padding box
    got, keep = A.transform_boxes(boxes, shift, (H, W))
    np.testing.assert_array_equal(keep, [False, True, True, False])
    np.testing.assert_allclose(got[1], [0.1, 0.0, 0.3, 0.3], atol=1e-6)
    _, keep = A.transform_boxes(boxes, shift, (H, W), min_visibility=0.8)
    np.testing.assert_array_equal(keep, [False, False, True, False])
    # box 2 covers 0.2*120 x 0.3*160 = 24 x 48 = 1152 px
    _, keep = A.transform_boxes(boxes, shift, (H, W), min_area=1153)
    assert not keep[2]
    b, c = A.filter_boxes(got, tf.constant([1, 2, 3, -1]), keep)
    assert b.shape == (0, 4) and c.shape == (0,)


FORMAT_CASES = ["yxyx", "xyxy", "xywh", "yxyx_abs", "xyxy_abs", "xywh_abs", "coco", "pascal_voc"]


@pytest.mark.parametrize("fmt", FORMAT_CASES)
def test_convert_round_trip(fmt) -> None:
    size = (H, W)
    there = B.convert(BOXES, "yxyx", fmt, size)
    np.testing.assert_allclose(B.convert(there, fmt, "yxyx", size), BOXES, atol=1e-6)


def test_convert_known_values() -> None:
    box = np.array([[0.25, 0.1, 0.75, 0.5]], np.float32)  # yxyx normalized
    np.testing.assert_allclose(B.convert(box, "yxyx", "coco", (100, 200)), [[20, 25, 80, 50]])
    np.testing.assert_allclose(B.convert(box, "yxyx", "pascal_voc", (100, 200)),
                               [[20, 25, 100, 75]])
    np.testing.assert_allclose(B.convert(box, "yxyx", "xywh"), [[0.1, 0.25, 0.4, 0.5]])
    with pytest.raises(ValueError, match="image_size"):
        B.convert(box, "yxyx", "coco")
    with pytest.raises(ValueError, match="to_fmt"):
        B.convert(box, "yxyx", "cxcywh")
