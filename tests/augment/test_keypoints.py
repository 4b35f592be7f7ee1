"""Keypoints through geometry (augment.keypoints) against NumPy / OpenCV oracles.

Each public geometric op returns (image, matrix); the image of a coordinate ramp
tells, by a least-squares fit, the matrix the pixels really moved by; the points
must equal OpenCV's `cv2.transform` of that matrix (visibility 0 outside the
output, left/right swapped iff it mirrors). Mosaic: a NumPy re-implementation from
the public draws; mixup: the boxes' classes name each row's source."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A

H, W = 48, 64
NAMES = ["nose", "left_eye", "right_eye", "left_ear", "right_ear", "tail"]
PERM = [0, 2, 1, 4, 3, 5]


def _ramp(h: int = H, w: int = W) -> np.ndarray:
    img = np.zeros((h, w, 3), np.uint8)
    img[..., 0] = np.arange(1, w + 1)[None, :]
    img[..., 1] = np.arange(1, h + 1)[:, None]
    img[..., 2] = 255
    return img


def _fit(img: np.ndarray) -> np.ndarray:
    # the source's and the output's outer 2 rows and columns left out: a resize
    # clamps at a crop's border, and a clamped border is no longer a ramp
    inside = (img[..., 2] == 255) & (img[..., 0] > 2) & (img[..., 1] > 2) \
        & (img[..., 0] < W - 1) & (img[..., 1] < H - 1)
    inside[:2], inside[-2:], inside[:, :2], inside[:, -2:] = False, False, False, False
    yo, xo = np.nonzero(inside)
    a = np.stack([xo, yo, np.ones_like(xo)], 1).astype(np.float64)
    src = np.stack([img[yo, xo, 0] - 1.0, img[yo, xo, 1] - 1.0], 1)
    sol, *_ = np.linalg.lstsq(a, src, rcond=None)
    inv = np.eye(3)
    inv[:2] = sol.T
    return np.linalg.inv(inv)


def _points(rng: np.random.Generator, n: int = 5) -> np.ndarray:
    pts = np.stack([rng.uniform(0, 1, (n, len(NAMES))), rng.uniform(0, 1, (n, len(NAMES))),
                    rng.choice([0, 1, 2], (n, len(NAMES)))], -1).astype(np.float32)
    pts[pts[..., 2] == 0] = 0
    return pts


def _oracle(pts: np.ndarray, m: np.ndarray, out: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """cv2.transform of the points (pixel centres), normalized; (points, near-border)."""
    xy = np.stack([pts[..., 1] * W - 0.5, pts[..., 0] * H - 0.5], -1).reshape(-1, 1, 2)
    t = cv2.transform(xy.astype(np.float64), m[:2]).reshape(pts.shape[:-1] + (2,))
    nx, ny = (t[..., 0] + 0.5) / out[1], (t[..., 1] + 0.5) / out[0]
    v = pts[..., 2]
    inside = (v > 0) & (nx >= 0) & (nx <= 1) & (ny >= 0) & (ny <= 1)
    want = np.where(inside[..., None], np.stack([ny, nx, v], -1), 0.0)
    margin = np.minimum.reduce([nx, 1 - nx, ny, 1 - ny])
    edge = np.abs(margin) < 0.02
    if np.linalg.det(m[:2, :2]) < 0:
        want, edge = want[:, PERM], edge[:, PERM]
    return want, edge


def _compare(got: np.ndarray, want: np.ndarray, edge: np.ndarray, out: tuple[int, int]) -> None:
    ok = ~edge
    np.testing.assert_array_equal(got[..., 2][ok], want[..., 2][ok])
    vis = ok & (want[..., 2] > 0)
    np.testing.assert_allclose(got[..., :2][vis], want[..., :2][vis], atol=0.5 / min(out))
    assert not got[got[..., 2] == 0].any()  # absent / outside: (0, 0, 0)


OPS = {
    "flip": (lambda x, s: A.random_flip(x, s, True, True, 0.5), (H, W)),
    "rot90": (lambda x, s: A.random_rot90(x, s, 1.0), (W, H)),
    "random_resized_crop": (lambda x, s: A.random_resized_crop(x, s, (40, 40), (0.3, 1.0)),
                            (40, 40)),
    "center_crop": (lambda x, s: A.center_crop(x, (36, 30), 0.7), (36, 30)),
    "affine": (lambda x, s: A.random_affine(x, s, rotation=40.0, scale=(0.6, 1.4), shear=15.0,
                                            translate=(0.2, 0.2), interpolation="nearest"),
               (H, W)),
    "pad_and_crop": (lambda x, s: A.pad_and_crop(x, s, 10), (H, W)),
}


@pytest.mark.parametrize("name", list(OPS))
def test_points_follow_each_public_op(name):
    op, out = OPS[name]
    rng = np.random.default_rng(3)
    ramp = tf.constant(_ramp())
    mirrored = 0
    for k in range(6):
        seed = tf.constant([k, 7 * k + 1], tf.int64)
        image, m = op(ramp, seed)
        if name == "rot90" and int(image.shape[0]) == H:
            out = (H, W)  # k = 2
        elif name == "rot90":
            out = (W, H)
        fitted = _fit(image.numpy())
        pts = _points(rng)
        got = A.transform_keypoints(pts, m, (H, W), out, PERM).numpy()
        want, edge = _oracle(pts, fitted, out)
        _compare(got, want, edge, out)
        mirrored += np.linalg.det(fitted[:2, :2]) < 0
    if name == "flip":
        assert 0 < mirrored < 6


def test_points_follow_a_random_composition():
    rng = np.random.default_rng(4)
    ramp = tf.constant(_ramp())
    for k in range(4):
        s = [tf.constant([k, i], tf.int64) for i in range(4)]
        x, m1 = A.random_flip(ramp, s[0], True, True, 0.5)
        x, m2 = A.random_rot90(x, s[1], 1.0)
        x, m3 = A.random_affine(x, s[2], rotation=20.0, scale=(0.8, 1.2), translate=(0.1, 0.1),
                                interpolation="nearest")
        x, m4 = A.pad_and_crop(x, s[3], 6)
        m = A.compose(m1, m2, m3, m4)
        out = tuple(int(v) for v in x.shape[:2])
        fitted = _fit(x.numpy())
        pts = _points(rng)
        got = A.transform_keypoints(pts, m, (H, W), out, PERM).numpy()
        _compare(got, *_oracle(pts, fitted, out), out)


def test_batched_matrices_and_absent_points():
    pts = np.array([[[0.5, 0.25, 2], [0.5, 0.75, 1], [0, 0, 0]]], np.float32)
    flips = tf.stack([A.flip_matrix((H, W), True, False), A.identity_matrix()])
    got = A.transform_keypoints(np.stack([pts, pts]), flips, (H, W), (H, W), [0, 2, 1]).numpy()
    # mirrored: x -> 1 - x, then slots 1 and 2 swap (slot 1 was absent: now slot 2 is)
    np.testing.assert_allclose(got[0, 0], [[0.5, 0.75, 2], [0, 0, 0], [0.5, 0.25, 1]], atol=1e-6)
    np.testing.assert_allclose(got[1, 0], pts[0], atol=1e-6)


def test_flip_permutation_by_name_and_pairs():
    coco = ["nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
            "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist",
            "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle"]
    # the OD API's COCO person keypoint_flip_permutation
    assert A.keypoint_flip_permutation(coco) == [0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11,
                                                 14, 13, 16, 15]
    assert A.keypoint_flip_permutation(["left_a", "b", "right_c"]) == [0, 1, 2]  # no partner
    assert A.keypoint_flip_permutation(NAMES, [[1, 2], [3, 4]]) == PERM
    with pytest.raises(ValueError, match="out of range; allowed: 0..5"):
        A.keypoint_flip_permutation(NAMES, [[1, 6]])
    with pytest.raises(ValueError, match="one pair only"):
        A.keypoint_flip_permutation(NAMES, [[1, 2], [2, 3]])


# ------------------------------------------------------------------ batch ops
B, N = 4, 3


def _batch(rng: np.random.Generator):
    boxes = np.zeros((B, N, 4), np.float32)
    classes = np.full((B, N), -1, np.int64)
    kp = np.zeros((B, N, len(NAMES), 3), np.float32)
    num = np.array([3, 2, 3, 1], np.int32)
    for b in range(B):
        for j in range(num[b]):
            y0, x0 = rng.uniform(0, 0.6, 2)
            y1, x1 = y0 + rng.uniform(0.1, 0.4), x0 + rng.uniform(0.1, 0.4)
            boxes[b, j] = [y0, x0, y1, x1]
            classes[b, j] = 10 * b + j
            kp[b, j, :, 0] = rng.uniform(y0, y1, len(NAMES))
            kp[b, j, :, 1] = rng.uniform(x0, x1, len(NAMES))
            kp[b, j, :, 2] = rng.choice([1, 2], len(NAMES))
    return boxes, classes, kp, num


def test_mosaic_keypoints_match_numpy():
    """A NumPy mosaic from the public draws: each tile X = scale * X_src + t (edge
    coordinates), boxes clipped to the canvas and filtered (min_visibility, min_area),
    points outside the canvas / their cell absent, kept objects in tile order."""
    rng = np.random.default_rng(5)
    boxes, classes, kp, num = _batch(rng)
    images = tf.zeros([B, H, W, 3], tf.uint8)
    scale = 0.5
    for k in range(3):
        seed = tf.constant([k, 99], tf.int64)
        _, ob, oc, on = A.mosaic(images, boxes, classes, num, seed, p=0.75)
        got = A.mosaic_keypoints(kp, boxes, num, seed, (H, W), p=0.75).numpy()
        partners, cx, cy, apply = (v if isinstance(v, list) else v.numpy() for v in
                                   A.mosaic_draws(seed, B, H, W, 0.75, (0.25, 0.75)))
        partners = [p.numpy() for p in partners]
        for b in range(B):
            if not apply[b]:
                np.testing.assert_array_equal(got[b], kp[b])
                continue
            rows_b, rows_k = [], []
            offs = [(cx[b] - scale * W, cy[b] - scale * H), (cx[b], cy[b] - scale * H),
                    (cx[b] - scale * W, cy[b]), (cx[b], cy[b])]
            cells = [(0, cx[b], 0, cy[b]), (cx[b], W, 0, cy[b]), (0, cx[b], cy[b], H),
                     (cx[b], W, cy[b], H)]
            for q in range(4):
                s, (tx, ty), (x0, x1, y0, y1) = partners[q][b], offs[q], cells[q]
                for j in range(num[s]):
                    by0, bx0, by1, bx1 = boxes[s, j]
                    full = np.array([(scale * by0 * H + ty) / H, (scale * bx0 * W + tx) / W,
                                     (scale * by1 * H + ty) / H, (scale * bx1 * W + tx) / W])
                    clip = np.clip(full, 0, 1)
                    area = lambda z: max(z[2] - z[0], 0) * max(z[3] - z[1], 0)  # noqa: E731
                    keep = area(clip) > 0 and area(clip) / area(full) >= 0.1 \
                        and area(clip) * H * W >= 4.0
                    if not keep:
                        continue
                    px = (scale * kp[s, j, :, 1] * W + tx)
                    py = (scale * kp[s, j, :, 0] * H + ty)
                    ins = (px >= x0) & (px <= x1) & (py >= y0) & (py <= y1) & (kp[s, j, :, 2] > 0)
                    rows_b.append(clip)
                    rows_k.append(np.where(ins[:, None], np.stack(
                        [py / H, px / W, kp[s, j, :, 2]], -1), 0))
            n = min(len(rows_b), N)
            assert int(on[b]) == n
            np.testing.assert_allclose(ob.numpy()[b, :n], np.array(rows_b[:n]), atol=1e-5)
            np.testing.assert_allclose(got[b, :n], np.array(rows_k[:n]), atol=1e-5)
            assert not got[b, n:].any()


def test_mixup_keypoints_follow_the_boxes():
    """detection_mixup's classes name each output row's (sample, object): its points
    are that object's points, unchanged; padding rows are 0."""
    rng = np.random.default_rng(6)
    boxes, classes, kp, num = _batch(rng)
    images = tf.zeros([B, H, W, 3], tf.uint8)
    partnered = 0
    for k in range(3):
        seed = tf.constant([k, 5], tf.int64)
        _, _, oc, on, _ = A.detection_mixup(images, boxes, classes, num, seed, p=0.7)
        got = A.mixup_keypoints(kp, num, seed, p=0.7).numpy()
        oc, on = oc.numpy(), on.numpy()
        for b in range(B):
            for j in range(on[b]):
                s, o = divmod(int(oc[b, j]), 10)
                np.testing.assert_array_equal(got[b, j], kp[s, o])
                partnered += s != b
            assert not got[b, on[b]:].any()
    assert partnered > 0
