"""Geometry oracles: known matrices, OpenCV warpAffine, exact flips/rot90, crop windows."""

from __future__ import annotations

import functools
import io

import cv2
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tfpipe import augment as A
from tfpipe.sample_data import source_photos


@functools.lru_cache(maxsize=None)
def photo() -> np.ndarray:
    """A real photo (astronaut, 512x512) reduced to 160x192 (non-square on purpose)."""
    img = source_photos()["astronaut"]
    return np.ascontiguousarray(cv2.resize(img, (192, 160), interpolation=cv2.INTER_AREA))


def seed(i: int = 0) -> tf.Tensor:
    return tf.constant([7, i], tf.int64)


# ----------------------------------------------------------------------- matrix builders

def test_builders_match_hand_computed() -> None:
    np.testing.assert_allclose(A.translate_matrix(3.0, -2.0), [[1, 0, 3], [0, 1, -2], [0, 0, 1]])
    np.testing.assert_allclose(A.scale_matrix(2.0, 3.0), [[2, 0, 0], [0, 3, 0], [0, 0, 1]])
    # scale 2 about (10, 20): x' = 2x - 10, y' = 2y - 20
    np.testing.assert_allclose(A.scale_matrix(2.0, center=(10.0, 20.0)),
                               [[2, 0, -10], [0, 2, -20], [0, 0, 1]], atol=1e-6)
    r = np.sqrt(0.5)
    np.testing.assert_allclose(A.rotation_matrix(45.0), [[r, r, 0], [-r, r, 0], [0, 0, 1]],
                               atol=1e-6)
    np.testing.assert_allclose(A.rotation_matrix(90.0), [[0, 1, 0], [-1, 0, 0], [0, 0, 1]],
                               atol=1e-6)
    cv = cv2.getRotationMatrix2D((31.5, 12.0), 33.0, 1.0)
    np.testing.assert_allclose(A.rotation_matrix(33.0, (31.5, 12.0))[:2], cv, atol=1e-4)
    np.testing.assert_allclose(A.shear_matrix(45.0), [[1, 1, 0], [0, 1, 0], [0, 0, 1]], atol=1e-6)
    np.testing.assert_allclose(A.shear_matrix(0.0, 45.0), [[1, 0, 0], [1, 1, 0], [0, 0, 1]],
                               atol=1e-6)
    np.testing.assert_allclose(A.flip_matrix((10, 20), True, False),
                               [[-1, 0, 19], [0, 1, 0], [0, 0, 1]])
    np.testing.assert_allclose(A.flip_matrix((10, 20), False, True),
                               [[1, 0, 0], [0, -1, 9], [0, 0, 1]])
    # rot90 k=1 (counter-clockwise) of an h=10, w=20 image: x_o = y, y_o = 19 - x
    np.testing.assert_allclose(A.rot90_matrix((10, 20), 1), [[0, 1, 0], [-1, 0, 19], [0, 0, 1]])
    # crop (2, 4) size (10, 20) -> (5, 10): x_o = (x - 4 + .5) / 2 - .5
    np.testing.assert_allclose(A.crop_matrix((2, 4), (10, 20), (5, 10)),
                               [[0.5, 0, -2.25], [0, 0.5, -1.25], [0, 0, 1]])
    t, s = A.translate_matrix(1.0, 2.0), A.scale_matrix(3.0)
    np.testing.assert_allclose(A.compose(t, s), s.numpy() @ t.numpy())  # t first, then s


# ----------------------------------------------------------------------- affine vs OpenCV

AFFINE_CASES = {
    "rotate": lambda c: A.rotation_matrix(23.0, c),
    "scale": lambda c: A.scale_matrix(1.3, 0.8, c),
    "shear": lambda c: A.shear_matrix(15.0, -8.0, c),
    "translate": lambda c: A.translate_matrix(12.3, -7.4),
    "combo": lambda c: A.compose(A.scale_matrix(0.9, center=c), A.shear_matrix(10.0, center=c),
                                 A.rotation_matrix(-37.0, c), A.translate_matrix(5.0, 3.0)),
}
MODES = [("bilinear", cv2.INTER_LINEAR, "constant", cv2.BORDER_CONSTANT),
         ("nearest", cv2.INTER_NEAREST, "reflect", cv2.BORDER_REFLECT),
         ("bilinear", cv2.INTER_LINEAR, "nearest", cv2.BORDER_REPLICATE)]


@pytest.mark.parametrize("case", sorted(AFFINE_CASES))
@pytest.mark.parametrize("interp,cv_interp,fill,cv_border", MODES)
def test_affine_matches_cv2_warp_affine(case, interp, cv_interp, fill, cv_border) -> None:
    img = photo()
    h, w = img.shape[:2]
    m = AFFINE_CASES[case](((w - 1) / 2.0, (h - 1) / 2.0)).numpy()
    ref = cv2.warpAffine(img, m[:2], (w, h), flags=cv_interp, borderMode=cv_border)
    for dtype in (np.uint8, np.float32):
        x = img if dtype == np.uint8 else img.astype(np.float32) / 255.0
        out = A.affine(x, m, interpolation=interp, fill_mode=fill).numpy()
        assert out.dtype == dtype and out.shape == img.shape
        if dtype == np.float32:
            out = out * 255.0
        err = np.abs(out.astype(np.float64) - ref)[4:-4, 4:-4]
        if interp == "bilinear":
            # documented in docs/augment.md: uint8 output equals cv2 (interior mean abs
            # error <= 0.001 of 255); float32 differs only by cv2's rounding (~0.23)
            assert err.mean() < (0.02 if dtype == np.uint8 else 0.3), (case, err.mean())
        else:
            # nearest: sample points exactly halfway between pixels may round to the
            # other neighbour; everything else is identical
            same = (err.max(axis=-1) < 1e-3).mean()
            assert same > 0.93, (case, same)


def test_affine_bicubic_close_to_cv2() -> None:
    img = photo()
    h, w = img.shape[:2]
    m = A.compose(A.rotation_matrix(17.0, ((w - 1) / 2, (h - 1) / 2)),
                  A.translate_matrix(3.3, 1.7)).numpy()
    ref = cv2.warpAffine(img, m[:2], (w, h), flags=cv2.INTER_CUBIC)
    out = A.affine(img, m, interpolation="bicubic").numpy()
    # OpenCV's cubic uses a=-0.75, ours a=-0.5: small systematic difference
    assert np.abs(out.astype(float) - ref)[6:-6, 6:-6].mean() < 2.0


def test_affine_batched_per_sample_matrices() -> None:
    img = photo()
    h, w = img.shape[:2]
    c = ((w - 1) / 2, (h - 1) / 2)
    ms = tf.stack([A.rotation_matrix(10.0, c), A.scale_matrix(1.2, center=c)])
    batch = A.affine(np.stack([img, img]), ms, output_size=(100, 120)).numpy()
    assert batch.shape == (2, 100, 120, 3)
    for i in range(2):
        np.testing.assert_array_equal(batch[i], A.affine(img, ms[i], output_size=(100, 120)))


def test_crop_matrix_agrees_with_tf_image_resize() -> None:
    img = photo().astype(np.float32)
    m = A.crop_matrix((10, 20), (90, 120), (64, 80))
    warped = A.affine(img, m, (64, 80)).numpy()
    ref = tf.image.resize(img[10:100, 20:140], (64, 80)).numpy()
    assert np.abs(warped - ref)[2:-2, 2:-2].max() < 1e-2


# ----------------------------------------------------------------------- exactness

def test_double_flip_and_rot90_x4_are_identity_exact() -> None:
    img = photo()
    h, w = img.shape[:2]
    f = A.flip_matrix((h, w), True, True)
    once = A.affine(img, f, interpolation="nearest")
    np.testing.assert_array_equal(once.numpy(), img[::-1, ::-1])
    np.testing.assert_array_equal(A.affine(once, f, interpolation="nearest").numpy(), img)
    np.testing.assert_array_equal(A.compose(f, f).numpy(), np.eye(3))
    out, size = img, (h, w)
    mats = []
    for _ in range(4):
        m = A.rot90_matrix(size, 1)
        size = (size[1], size[0])
        out = A.affine(out, m, size, interpolation="nearest").numpy()
        mats.append(m)
    np.testing.assert_array_equal(out, img)
    np.testing.assert_array_equal(A.compose(*mats).numpy(), np.eye(3))
    # bilinear at integer positions is exact too
    np.testing.assert_array_equal(A.affine(img, A.rot90_matrix((h, w), 2)).numpy(),
                                  img[::-1, ::-1])


def test_random_flip_and_rot90_matrices_describe_the_pixels() -> None:
    img = photo()
    for i in range(6):
        for op in (lambda x, s: A.random_flip(x, s, True, True),
                   lambda x, s: A.random_rot90(x, s)):
            out, m = op(img, seed(i))
            ref = A.affine(img, m, out.shape[:2], interpolation="nearest")
            np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_apply_geometry_is_one_resample_of_the_composed_matrix() -> None:
    img = photo()
    h, w = img.shape[:2]
    mats = [A.crop_matrix((5, 7), (120, 150), (96, 96)), A.flip_matrix((96, 96), True),
            A.rotation_matrix(12.0, (47.5, 47.5))]
    out, m = A.apply_geometry(img, mats, (96, 96))
    np.testing.assert_allclose(m, mats[2].numpy() @ mats[1].numpy() @ mats[0].numpy(),
                               atol=1e-5)
    ref = cv2.warpAffine(img, m.numpy()[:2], (96, 96), flags=cv2.INTER_LINEAR)
    assert np.abs(out.numpy().astype(float) - ref)[3:-3, 3:-3].mean() < 0.6


# ----------------------------------------------------------------------- crop windows

@pytest.mark.parametrize("hw", [(160, 192), (480, 120), (64, 640), (33, 35)])
def test_crop_window_inside_and_in_range(hw) -> None:
    h, w = hw
    scale, ratio = (0.08, 1.0), (3 / 4, 4 / 3)
    fn = tf.function(lambda s: tf.stack(A.sample_crop_window(s, h, w, scale, ratio)))
    windows = np.stack([fn(seed(i)).numpy() for i in range(40)])
    oy, ox, ch, cw = windows.T
    assert (oy >= 0).all() and (ox >= 0).all() and (ch >= 1).all() and (cw >= 1).all()
    assert (oy + ch <= h).all() and (ox + cw <= w).all()
    in_ratio = w / h
    fallback = (in_ratio < ratio[0]) or (in_ratio > ratio[1])
    for y, x, a, b in windows:
        frac, aspect = a * b / (h * w), b / a
        # rounding to whole pixels moves area and aspect a little
        tol = 2.5 / min(a, b)
        is_center = (y == (h - a) // 2) and (x == (w - b) // 2)
        if not (fallback and is_center):
            assert scale[0] * (1 - tol) <= frac <= scale[1] * (1 + tol) + 1e-6
            assert ratio[0] * (1 - tol) <= aspect <= ratio[1] * (1 + tol)
    # seeds differ -> windows differ (a 1:10 strip mostly falls back to the centre crop)
    assert len({tuple(v) for v in windows}) > (5 if fallback else 20)


def test_crop_window_fallback_is_clamped_center_crop() -> None:
    # a 10x1000 strip: no 3/4..4/3 window with area >= 0.5 fits -> fallback
    oy, ox, ch, cw = (int(v) for v in A.sample_crop_window(seed(), 10, 1000, (0.5, 1.0)))
    assert (ch, cw) == (10, 13) and oy == 0 and ox == (1000 - 13) // 2


def _jpeg(img: np.ndarray, subsampling: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=90, subsampling=subsampling)
    return buf.getvalue()


@pytest.mark.parametrize("subsampling", [0, 2])  # 4:4:4 and 4:2:0
def test_fused_decode_and_crop_equals_decode_then_crop(subsampling) -> None:
    img = photo()
    jpeg = _jpeg(img, subsampling)
    for i in range(5):
        shape = tf.io.extract_jpeg_shape(jpeg)
        window = A.sample_crop_window(seed(i), shape[0], shape[1], (0.08, 1.0), (0.75, 4 / 3))
        fused = tf.io.decode_and_crop_jpeg(jpeg, tf.stack(window), channels=3)
        full = tf.io.decode_jpeg(jpeg, channels=3)
        oy, ox, ch, cw = (int(v) for v in window)
        sliced = full.numpy()[oy:oy + ch, ox:ox + cw]
        if subsampling == 0:
            np.testing.assert_array_equal(fused.numpy(), sliced)
            # random_resized_crop on the decoded image picks the same window
            out, m = A.random_resized_crop(full, seed(i), (64, 64))
            ref = tf.cast(tf.round(tf.image.resize(fused, (64, 64))), tf.uint8)
            np.testing.assert_array_equal(out.numpy(), ref.numpy())
        else:
            # 4:2:0 chroma is upsampled with the crop edge as border: only the outermost
            # rows/columns of the window may differ (documented in docs/augment.md)
            np.testing.assert_array_equal(fused.numpy()[1:-1, 1:-1], sliced[1:-1, 1:-1])
            out, m = A.random_resized_crop(full, seed(i), (64, 64))
        np.testing.assert_allclose(m, A.crop_matrix((oy, ox), (ch, cw), (64, 64)), atol=1e-6)


def test_center_crop_window_and_pad_and_crop() -> None:
    img = photo()
    oy, ox, ch, cw = (int(v) for v in A.center_crop_window(160, 192, (64, 64), 0.875))
    assert (ch, cw) == (140, 140) and (oy, ox) == (10, 26)
    out, m = A.center_crop(img, (64, 64))
    assert out.shape == (64, 64, 3) and out.dtype == tf.uint8
    for fill in ("constant", "reflect", "nearest", "wrap"):
        out, m = A.pad_and_crop(img, seed(3), 9, fill_mode=fill)
        ref = cv2.warpAffine(img, m.numpy()[:2], (192, 160), flags=cv2.INTER_NEAREST,
                             borderMode={"constant": cv2.BORDER_CONSTANT,
                                         "reflect": cv2.BORDER_REFLECT,
                                         "nearest": cv2.BORDER_REPLICATE,
                                         "wrap": cv2.BORDER_WRAP}[fill])
        np.testing.assert_array_equal(out.numpy(), ref, err_msg=fill)


def test_invalid_arguments_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="interpolation"):
        A.affine(photo(), np.eye(3, dtype=np.float32), interpolation="lanczos")
    with pytest.raises(ValueError, match="fill_mode"):
        A.affine(photo(), np.eye(3, dtype=np.float32), fill_mode="mirror")
    with pytest.raises(ValueError, match="scale"):
        A.sample_crop_window(seed(), 10, 10, (0.5, 0.2))
    with pytest.raises(ValueError, match="ratio"):
        A.sample_crop_window(seed(), 10, 10, (0.2, 0.5), (0.0, 1.0))


def test_sampled_affine_parameters_stay_in_range() -> None:
    h, w = 160, 192
    c = np.array([(w - 1) / 2, (h - 1) / 2, 1.0])
    fn = tf.function(lambda s: A.sample_affine_matrix(s, (h, w), rotation=30.0,
                                                      scale=(0.8, 1.2)))
    angles, scales = [], []
    for i in range(60):
        m = fn(seed(i)).numpy()
        np.testing.assert_allclose(m @ c, c, atol=1e-3)   # rotates/scales about the centre
        angles.append(np.degrees(np.arctan2(m[0, 1], m[0, 0])))
        scales.append(np.sqrt(np.linalg.det(m[:2, :2])))
    assert -30 <= min(angles) < -15 and 15 < max(angles) <= 30
    assert 0.8 - 1e-5 <= min(scales) < 0.9 and 1.1 < max(scales) <= 1.2 + 1e-5
    m = A.sample_affine_matrix(seed(), (h, w), translate=(0.1, 0.2)).numpy()
    assert abs(m[0, 2]) <= 0.1 * w + 1e-3 and abs(m[1, 2]) <= 0.2 * h + 1e-3
    np.testing.assert_allclose(m[:2, :2], np.eye(2), atol=1e-6)
