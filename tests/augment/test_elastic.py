"""Elastic: field statistics vs theory, warp vs cv2.remap, boxes vs a warped mask."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A


def seed(i: int = 0) -> tf.Tensor:
    return tf.constant([11, i], tf.int64)


@pytest.mark.parametrize("sigma", [4.0, 12.0, 30.0])
def test_field_std_matches_blurred_uniform_noise(sigma) -> None:
    # U(-1,1) noise (var 1/3) blurred by a 2-D Gaussian: var = (1/3) / (4 pi sigma^2)
    alpha = 50.0
    expected = alpha * math.sqrt(1 / 3) / (2 * math.sqrt(math.pi) * sigma)
    for coarse in (True, False):
        stds = [A.sample_elastic_field(seed(i), (128, 128), alpha, sigma, coarse).numpy().std()
                for i in range(4)]
        assert abs(np.mean(stds) / expected - 1) < 0.25, (sigma, coarse, stds, expected)


def test_field_is_smooth_and_shaped() -> None:
    f = A.sample_elastic_field(seed(), (90, 70), 30.0, 8.0).numpy()
    assert f.shape == (90, 70, 2) and f.dtype == np.float32
    # neighbouring displacements differ far less than the field's spread
    assert np.abs(np.diff(f, axis=0)).mean() < 0.2 * f.std()


def test_elastic_warp_matches_cv2_remap_with_the_same_field() -> None:
    img = (np.random.default_rng(0).random((64, 80, 3)) * 255).astype(np.uint8)
    img = cv2.GaussianBlur(img, (0, 0), 2)
    out, field = A.elastic(img, seed(1), 40.0, 6.0, fill_mode="reflect")
    f = field.numpy()
    ys, xs = np.mgrid[0:64, 0:80].astype(np.float32)
    ref = cv2.remap(img, xs + f[..., 0], ys + f[..., 1], cv2.INTER_LINEAR,
                    borderMode=cv2.BORDER_REFLECT)
    assert out.dtype == tf.uint8 and out.shape == img.shape
    assert np.abs(out.numpy().astype(float) - ref).mean() < 0.6


def test_alpha_zero_is_identity_and_matrix_fuses() -> None:
    img = (np.random.default_rng(1).random((40, 50, 3))).astype(np.float32)
    out, _ = A.elastic(img, seed(), 0.0, 5.0)
    np.testing.assert_allclose(out.numpy(), img, atol=1e-6)
    m = A.rotation_matrix(20.0, (24.5, 19.5))
    fused, _ = A.elastic(img, seed(), 0.0, 5.0, matrix=m)
    np.testing.assert_allclose(fused.numpy(), A.affine(img, m, fill_mode="reflect").numpy(),
                               atol=1e-4)


def test_elastic_boxes_cover_the_warped_mask() -> None:
    h, w = 96, 128
    boxes = np.array([[0.2, 0.2, 0.5, 0.6], [0.55, 0.1, 0.9, 0.4]], np.float32)
    _, field = A.elastic(np.zeros((h, w, 1), np.float32), seed(2), 60.0, 10.0)
    got, keep = A.elastic_boxes(boxes, field)
    f = field.numpy()
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    for box, g, k in zip(boxes, got.numpy(), keep.numpy()):
        mask = np.zeros((h, w), np.uint8)
        mask[round(box[0] * h):round(box[2] * h), round(box[1] * w):round(box[3] * w)] = 255
        warped = cv2.remap(mask, xs + f[..., 0], ys + f[..., 1], cv2.INTER_LINEAR)
        yy, xx = np.nonzero(warped > 127)
        ref = np.array([yy.min() / h, xx.min() / w, (yy.max() + 1) / h, (xx.max() + 1) / w])
        assert k
        assert (np.abs(g - ref) <= 2.0 / np.array([h, w, h, w])).all(), (g, ref)
    # padding boxes stay padding
    got, keep = A.elastic_boxes(np.zeros((1, 4), np.float32), field)
    assert not keep.numpy()[0] and (got.numpy() == 0).all()


def test_invalid_sigma() -> None:
    with pytest.raises(ValueError, match="sigma"):
        A.sample_elastic_field(seed(), (10, 10), 1.0, 0.0)


def test_xla_and_plain_samplers_agree() -> None:
    img = (np.random.default_rng(3).random((40, 56, 3)) * 255).astype(np.uint8)
    a, fa = A.elastic(img, seed(4), 30.0, 5.0, xla=True)
    b, fb = A.elastic(img, seed(4), 30.0, 5.0, xla=False)
    np.testing.assert_array_equal(fa, fb)
    diff = np.abs(a.numpy().astype(int) - b.numpy())
    assert diff.max() <= 1 and (diff > 0).mean() < 0.01
