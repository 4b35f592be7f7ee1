"""augment.instance_masks against NumPy: box crops through every public geometric op's
returned matrix (pixel-exact nearest, exact half-pixel ties), mosaic and detection
mixup (same seed as the box ops: same partners, keep and order)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A

TIE = 1e-6
OUT = (36, 44)
S = (14, 12)


def _nearest(v: np.ndarray) -> np.ndarray:
    return np.floor(v + 0.5 + TIE).astype(np.int64)


def _crop(box: np.ndarray, hw: tuple[int, int], size: tuple[int, int]) -> np.ndarray:
    y0, x0, y1, x1 = (float(v) for v in box)
    sy, sx = size[0] / ((y1 - y0) * hw[0]), size[1] / ((x1 - x0) * hw[1])
    return np.array([[sx, 0.0, (0.5 - x0 * hw[1]) * sx - 0.5],
                     [0.0, sy, (0.5 - y0 * hw[0]) * sy - 0.5], [0.0, 0.0, 1.0]])


def _warp(src: np.ndarray, m: np.ndarray, size: tuple[int, int]) -> tuple[np.ndarray, int]:
    """NumPy nearest warp (0 outside) and how many samples sat on a half-pixel tie."""
    inv = np.linalg.inv(m.astype(np.float64))
    ys, xs = np.mgrid[0:size[0], 0:size[1]].astype(np.float64)
    den = inv[2, 0] * xs + inv[2, 1] * ys + inv[2, 2]
    fx = (inv[0, 0] * xs + inv[0, 1] * ys + inv[0, 2]) / den
    fy = (inv[1, 0] * xs + inv[1, 1] * ys + inv[1, 2]) / den
    ties = int(np.count_nonzero(np.abs(fx - np.floor(fx) - 0.5) < 1e-9)
               + np.count_nonzero(np.abs(fy - np.floor(fy) - 0.5) < 1e-9))
    ix, iy = _nearest(fx), _nearest(fy)
    h, w = src.shape
    inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
    return np.where(inside, src[np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)], 0), ties


def _objects(rng: np.random.Generator, h: int, w: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n random-noise masks (values 0/1 inside a random box, so any misplaced pixel
    shows) and their boxes (normalized yxyx, on pixel edges)."""
    masks = np.zeros((n, h, w), np.uint8)
    boxes = []
    for k in range(n):
        y0, x0 = int(rng.integers(0, h - 4)), int(rng.integers(0, w - 4))
        y1, x1 = int(rng.integers(y0 + 2, h + 1)), int(rng.integers(x0 + 2, w + 1))
        masks[k, y0:y1, x0:x1] = rng.random((y1 - y0, x1 - x0)) < 0.6
        boxes.append([y0 / h, x0 / w, y1 / h, x1 / w])
    return masks, np.array(boxes, np.float32)


def _check_crops(masks: np.ndarray, boxes: np.ndarray, m: tf.Tensor,
                 out_hw: tuple[int, int] = OUT) -> tuple[int, int]:
    """Boxes through m (transform_boxes), the kept ones' crops vs NumPy: (objects, ties)."""
    out, keep = A.transform_boxes(boxes, m, masks.shape[1:], out_hw)
    kept = np.nonzero(keep.numpy())[0]
    ob = out.numpy()[kept]
    got = A.crop_instance_masks(masks[kept], m, ob, out_hw, S).numpy()
    ties = 0
    for r, k in enumerate(kept):
        ref, t = _warp(masks[k], _crop(ob[r], out_hw, S) @ m.numpy().astype(np.float64), S)
        ties += t
        bad = np.count_nonzero(got[r] != ref)
        assert bad == 0, f"object {k}: {bad} of {ref.size} pixels off"
    return len(kept), ties


def _ops(h: int, w: int):
    """(name, fn(image, seed) -> (image, matrix)): every public geometric op."""
    return [
        ("random_resized_crop", lambda x, s: A.random_resized_crop(x, s, OUT, (0.2, 1.0))),
        ("center_crop", lambda x, s: A.center_crop(x, OUT, 0.7)),
        ("random_flip", lambda x, s: A.random_flip(x, s, True, True, 0.7)),
        ("random_rot90", lambda x, s: A.random_rot90(x, s)),
        ("random_affine", lambda x, s: A.random_affine(x, s, rotation=30.0, scale=(0.6, 1.3),
                                                       shear=10.0, translate=(0.2, 0.2))),
        ("pad_and_crop", lambda x, s: A.pad_and_crop(x, s, 6)),
    ]


@pytest.mark.parametrize("name", [n for n, _ in _ops(1, 1)])
def test_crops_follow_every_op_pixel_exact(name):
    """The op's returned matrix then the resize to OUT (what the pipeline composes)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # hash(str) varies per process
    fn = dict(_ops(1, 1))[name]
    objects = 0
    for t in range(3):
        h, w = int(rng.integers(30, 64)), int(rng.integers(30, 64))
        masks, boxes = _objects(rng, h, w, 4)
        out, m = fn(tf.zeros([h, w, 1], tf.uint8), tf.constant([t, 7], tf.int64))
        m = A.compose(m, A.resize_matrix(tf.shape(out)[:2], OUT))
        objects += _check_crops(masks, boxes, m)[0]
    assert objects >= 6


def test_random_composition_and_exact_ties():
    """Random chains of the ops; and a box twice its crop size, where every sample is
    an exact half-pixel tie (float32 arithmetic would round them either way)."""
    rng = np.random.default_rng(5)
    ops = _ops(1, 1)
    for t in range(4):
        h, w = int(rng.integers(30, 64)), int(rng.integers(30, 64))
        masks, boxes = _objects(rng, h, w, 4)
        x, mats = tf.zeros([h, w, 1], tf.uint8), []
        for k in rng.permutation(len(ops))[:4]:
            x, mk = ops[k][1](x, tf.constant([t, int(k)], tf.int64))
            mats.append(mk)
        m = A.compose(*mats, A.resize_matrix(tf.shape(x)[:2], OUT))
        _check_crops(masks, boxes, m)
    # a 28 x 24 box of a 32 x 64 image (identity matrix; edges exact in float32),
    # cropped to 14 x 12: scale 1/2
    hw = (32, 64)
    masks = (rng.random((1, *hw)) < 0.5).astype(np.uint8)
    box = np.array([[4 / hw[0], 8 / hw[1], 32 / hw[0], 32 / hw[1]]], np.float32)
    n, ties = _check_crops(masks, box, A.identity_matrix(), hw)
    assert n == 1 and ties == 2 * S[0] * S[1]
    # the tie rule: the higher index (pixel 2i + 1 of the box, never 2i)
    got = A.crop_instance_masks(masks, A.identity_matrix(), box, hw, S).numpy()[0]
    np.testing.assert_array_equal(got, masks[0, 5:32:2, 9:32:2])


def _batch(rng: np.random.Generator, b: int, n: int, hw: tuple[int, int]):
    boxes = np.zeros((b, n, 4), np.float32)
    num = rng.integers(0, n + 1, b).astype(np.int32)
    for i in range(b):
        for k in range(num[i]):
            y0, x0 = rng.uniform(0, 0.7, 2)
            boxes[i, k] = [y0, x0, y0 + rng.uniform(0.1, 0.3), x0 + rng.uniform(0.1, 0.3)]
    masks = (rng.random((b, n, *S)) < 0.5).astype(np.uint8)
    masks[np.arange(n)[None, :] >= num[:, None]] = 0
    return boxes, num, masks


def test_mosaic_masks_are_the_subwindow_of_their_old_crop():
    """Each kept object of `mosaic` (matched by its box) has the nearest resample of
    the sub-window of its old crop that its new clipped box covers (NumPy, the tile's
    scale + offset from `mosaic_draws`); padding rows 0; p < 1 leaves samples as they were."""
    rng = np.random.default_rng(2)
    b, n, hw, scale = 6, 5, (40, 48), 0.5
    boxes, num, masks = _batch(rng, b, n, hw)
    seed = tf.constant([3, 4], tf.int64)
    imgs = tf.zeros([b, *hw, 3], tf.uint8)
    _, nb, _, nn = A.mosaic(imgs, boxes, np.tile(np.arange(n), (b, 1)), num, seed, p=0.8,
                            scale=scale)
    got = A.mosaic_instance_masks(masks, boxes, num, hw, seed, p=0.8, scale=scale).numpy()
    nb, nn = nb.numpy(), nn.numpy()
    partners, cx, cy, apply = A.mosaic_draws(seed, b, hw[0], hw[1], 0.8, (0.25, 0.75))
    partners, cx, cy = [p.numpy() for p in partners], cx.numpy(), cy.numpy()
    checked = 0
    for i in range(b):
        assert not got[i, nn[i]:].any()
        if not apply[i]:
            np.testing.assert_array_equal(got[i], masks[i])
            continue
        sw, sh = np.float32(scale) * np.float32(hw[1]), np.float32(scale) * np.float32(hw[0])
        offs = [(cx[i] - sw, cy[i] - sh), (cx[i], cy[i] - sh), (cx[i] - sw, cy[i]), (cx[i], cy[i])]
        cands = []  # (tile offset, source object) in mosaic's order: tiles, then rows
        for q in range(4):
            src = partners[q][i]
            for k in range(num[src]):
                cands.append((offs[q], src, k))
        r = 0
        for (tx, ty), src, k in cands:
            if r >= nn[i]:
                break
            ob = boxes[src, k].astype(np.float64)
            # edges: X_canvas = scale * X_old + t (pixels)
            full = np.array([(ob[a] * hw[a % 2] * scale + (ty, tx)[a % 2]) / hw[a % 2]
                             for a in range(4)])
            if not np.allclose(np.clip(full, 0, 1), nb[i, r], atol=1e-5):
                continue  # cut away (its box is not the next one kept)
            new = nb[i, r].astype(np.float64)
            axes = []
            for a, (t, size) in enumerate(((ty, hw[0]), (tx, hw[1]))):
                f = (np.arange(S[a]) + 0.5) / S[a]
                canvas = (new[a] + f * (new[a + 2] - new[a])) * size
                old = (canvas - np.float64(t)) / (np.float64(np.float32(scale)) * size)
                u = (old - ob[a]) / (ob[a + 2] - ob[a]) * S[a] - 0.5
                axes.append(np.clip(_nearest(u), 0, S[a] - 1))
            want = masks[src, k][np.ix_(axes[0], axes[1])]
            np.testing.assert_array_equal(got[i, r], want, err_msg=f"sample {i} row {r}")
            r += 1
            checked += 1
        assert r == nn[i], (i, r, nn[i])
    assert checked >= 10


def test_mixup_masks_follow_both_box_sets():
    rng = np.random.default_rng(4)
    b, n = 6, 4
    boxes, num, masks = _batch(rng, b, n, (32, 32))
    seed = tf.constant([9, 1], tf.int64)
    imgs = tf.zeros([b, 32, 32, 3], tf.uint8)
    _, ob, _, on, _ = A.detection_mixup(imgs, boxes, np.tile(np.arange(n), (b, 1)), num, seed,
                                        p=0.7)
    got = A.mixup_instance_masks(masks, num, seed, p=0.7).numpy()
    ob, on = ob.numpy(), on.numpy()
    for i in range(b):
        own = int(num[i])
        np.testing.assert_array_equal(got[i, :own], masks[i, :own])
        extra = int(on[i]) - own
        if extra:  # the partner: the sample whose first boxes are the ones appended
            partner = [j for j in range(b) if num[j] >= extra and
                       np.array_equal(boxes[j, :extra], ob[i, own:own + extra])]
            assert partner, i
            np.testing.assert_array_equal(got[i, own:on[i]], masks[partner[0], :extra])
        assert not got[i, on[i]:].any()
