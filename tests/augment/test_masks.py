"""augment/masks.py against NumPy / OpenCV oracles: letterbox, mosaic and cutmix masks."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A


@pytest.mark.parametrize("size, out, window", [
    ((30, 50), (40, 40), (8, 0, 24, 40)),     # wide: fits the width, bars top / bottom
    ((50, 30), (40, 40), (0, 8, 40, 24)),     # tall
    ((37, 61), (40, 48), (5, 0, 29, 48)),     # 37 * 48/61 = 29.1 -> 29 rows, 11 to split
    ((10, 10), (40, 48), (0, 4, 40, 40)),     # upscaled
])
def test_letterbox_window_and_matrix(size, out, window):
    win = A.letterbox_window(size, out).numpy()
    assert tuple(win) == window
    top, left, nh, nw = window
    h, w = size
    # edges to edges: source x = -0.5 lands on left - 0.5, x = w - 0.5 on left + nw - 0.5
    m = A.letterbox_matrix(size, out).numpy()
    corners = m @ np.array([[-0.5, w - 0.5], [-0.5, h - 0.5], [1.0, 1.0]])
    np.testing.assert_allclose(corners[:2].T, [[left - 0.5, top - 0.5],
                                               [left + nw - 0.5, top + nh - 0.5]], atol=1e-4)


def test_letterbox_image_is_a_resize_and_a_pad():
    import cv2

    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (37, 61, 3), dtype=np.uint8)
    got = A.letterbox_image(img, (40, 48), fill_value=7).numpy()
    top, left, nh, nw = A.letterbox_window((37, 61), (40, 48)).numpy()
    ref = cv2.resize(img, (int(nw), int(nh)), interpolation=cv2.INTER_LINEAR)
    inner = got[top:top + nh, left:left + nw].astype(int)
    assert np.abs(inner - ref).max() <= 1
    outer = np.ones((40, 48), bool)
    outer[top:top + nh, left:left + nw] = False
    assert (got[outer] == 7).all()


def test_warp_mask_is_nearest_with_ignore_fill():
    mask = np.arange(12, dtype=np.uint8).reshape(3, 4, 1)
    m = A.translate_matrix(1.0, 0.0)  # one pixel right: column 0 is outside the source
    got = A.warp_mask(mask, m, ignore_label=200).numpy()[..., 0]
    np.testing.assert_array_equal(got[:, 1:], mask[:, :3, 0])
    assert (got[:, 0] == 200).all()
    # scaled by 3 (no half-pixel ties): each source pixel becomes a 3x3 block, no new value
    big = A.warp_mask(mask, A.resize_matrix((3, 4), (9, 12)), (9, 12)).numpy()[..., 0]
    np.testing.assert_array_equal(big, np.kron(mask[..., 0], np.ones((3, 3), np.uint8)))


def _mosaic_oracle(masks: np.ndarray, seed, p: float, scale: float, center_range, ignore: int
                   ) -> np.ndarray:
    """NumPy: tile by the output pixel's side of the centre, the source coordinate of
    its centre u = (i + 0.5 - c) / scale + n - 0.5 (first tile) or (i + 0.5 - c) /
    scale - 0.5 (second), the nearest pixel (half up) or ignore outside. The draws are
    `mosaic_draws` (the image mosaic's own). Scales without near-ties only (0.5: every
    u is exactly x.5 in the kernel's fixed point too; 0.6: none is near x.5)."""
    b, h, w = masks.shape[:3]
    partners, cx, cy, apply = A.mosaic_draws(tf.constant(seed, tf.int64), b, h, w, p,
                                             center_range)
    partners = np.stack([q.numpy() for q in partners])
    cx, cy, apply = cx.numpy().astype(int), cy.numpy().astype(int), apply.numpy()

    def coords(c: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        i = np.arange(n)
        u = (i + 0.5 - c) / scale + np.where(i < c, n - 0.5, -0.5)
        return u, i < c

    out = masks.copy()
    for s in range(b):
        if not apply[s]:
            continue
        ux, left = coords(cx[s], w)
        uy, top = coords(cy[s], h)
        ix, iy = np.floor(ux + 0.5).astype(int), np.floor(uy + 0.5).astype(int)
        tile = np.where(top, 0, 2)[:, None] + np.where(left, 0, 1)[None, :]
        src = partners[tile, s]
        inside = ((iy >= 0) & (iy < h))[:, None] & ((ix >= 0) & (ix < w))[None, :]
        yy = np.broadcast_to(np.clip(iy, 0, h - 1)[:, None], (h, w))
        xx = np.broadcast_to(np.clip(ix, 0, w - 1)[None, :], (h, w))
        out[s] = np.where(inside[..., None], masks[src, yy, xx], ignore)
    return out


@pytest.mark.parametrize("scale", [0.5, 0.6])
def test_mosaic_masks_match_the_numpy_oracle(scale):
    rng = np.random.default_rng(1)
    masks = rng.integers(0, 6, (6, 20, 28, 1), dtype=np.uint8)
    seed, p, cr = [3, 9], 0.8, (0.25, 0.75)
    got = A.mosaic_masks(tf.constant(masks), tf.constant(seed, tf.int64), p, scale, cr,
                         ignore_label=250).numpy()
    np.testing.assert_array_equal(got, _mosaic_oracle(masks, seed, p, scale, cr, 250))
    assert (got == 250).any() and (got != masks).any()


def test_mosaic_masks_follow_the_image_mosaic():
    """The image mosaic of images that encode their masks (constant 8x8 blocks): where
    the mosaicked image has a block's exact level all around, the mask has its class."""
    rng = np.random.default_rng(2)
    blocks = rng.integers(0, 5, (4, 3, 4), dtype=np.uint8)
    masks = np.kron(blocks, np.ones((1, 8, 8), np.uint8))[..., None]
    images = np.repeat(30 + 40 * masks, 3, axis=-1).astype(np.uint8)
    seed = tf.constant([5, 1], tf.int64)
    img, _, _, _ = A.mosaic(images, tf.zeros([4, 1, 4]), -tf.ones([4, 1], tf.int64),
                            tf.zeros([4], tf.int32), seed, p=1.0, scale=0.5, fill_value=0.0)
    got = A.mosaic_masks(masks, seed, p=1.0, scale=0.5, ignore_label=255).numpy()[..., 0]
    v = img.numpy()[..., 0].astype(int)
    pad = np.pad(v, [(0, 0), (1, 1), (1, 1)], mode="edge")
    same = np.ones(v.shape, bool)
    for dy in range(3):
        for dx in range(3):
            same &= pad[:, dy:dy + 24, dx:dx + 32] == v
    level = same & (((v - 30) % 40 == 0) & (v >= 30) | (v == 0))
    want = np.where(v == 0, 255, (v - 30) // 40)
    assert level.mean() > 0.2
    np.testing.assert_array_equal(got[level], want[level])


def test_cutmix_with_masks_pastes_the_same_box():
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (5, 16, 20, 3), dtype=np.uint8)
    masks = rng.integers(0, 4, (5, 16, 20, 1), dtype=np.uint8)
    seed = tf.constant([7, 2], tf.int64)
    x, y = A.cutmix_with_masks(images, masks, seed, alpha=1.0, p=1.0)
    # the image is exactly classification's cutmix with the same seed
    ref_x, _ = A.cutmix(images, tf.one_hot(tf.zeros([5], tf.int32), 2), seed, 1.0, 1.0)
    np.testing.assert_array_equal(x.numpy(), ref_x.numpy())
    perm, boxes, _ = A.sample_cutmix(seed, 5, 16, 20, 1.0, 1.0)
    want = masks.copy()
    for i, (y0, x0, y1, x1) in enumerate(boxes.numpy()):
        want[i, y0:y1, x0:x1] = masks[perm.numpy()[i], y0:y1, x0:x1]
    np.testing.assert_array_equal(y.numpy(), want)
    assert (y.numpy() != masks).any()
