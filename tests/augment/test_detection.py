"""Detection composition: padding, mosaic boxes land on pasted objects, mixup weights."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A

B, H, W, N = 6, 96, 128, 4
COLORS = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0], [255, 0, 255],
                   [0, 255, 255]], np.uint8)


def batch() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Gray images, each with one distinct coloured rectangle and its box (+ one padded row)."""
    rng = np.random.default_rng(0)
    images = np.full((B, H, W, 3), 128, np.uint8)
    boxes = np.zeros((B, N, 4), np.float32)
    classes = np.full((B, N), -1, np.int64)
    num = np.ones(B, np.int32)
    for i in range(B):
        y0, x0 = int(rng.integers(4, H // 2)), int(rng.integers(4, W // 2))
        y1, x1 = y0 + int(rng.integers(20, H // 2 - 2)), x0 + int(rng.integers(24, W // 2 - 2))
        images[i, y0:y1, x0:x1] = COLORS[i]
        boxes[i, 0] = [y0 / H, x0 / W, y1 / H, x1 / W]
        classes[i, 0] = i
    return images, boxes, classes, num


def test_pad_boxes() -> None:
    b, c, n = A.pad_boxes([[0.1, 0.2, 0.3, 0.4]], tf.constant([5], tf.int64), 3)
    np.testing.assert_allclose(b, [[0.1, 0.2, 0.3, 0.4], [0, 0, 0, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(c, [5, -1, -1])
    assert int(n) == 1
    b, c, n = A.pad_boxes(np.ones((5, 4), np.float32), tf.range(5), 3)  # truncates
    assert b.shape == (3, 4) and int(n) == 3 and list(c.numpy()) == [0, 1, 2]
    b, c, n = A.pad_boxes(np.zeros((0, 4), np.float32), tf.zeros([0], tf.int32), 2)
    assert int(n) == 0 and list(c.numpy()) == [-1, -1]
    with pytest.raises(ValueError, match="max_boxes"):
        A.pad_boxes(np.zeros((0, 4), np.float32), tf.zeros([0], tf.int32), 0)


def test_mosaic_boxes_cover_the_pasted_objects() -> None:
    images, boxes, classes, num = batch()
    seeds_seen = set()
    for s in range(3):
        out, ob, oc, on = (t.numpy() for t in A.mosaic(images, boxes, classes, num,
                                                         tf.constant([3, s]), p=1.0,
                                                         min_visibility=0.0, min_area=0.0))
        assert out.shape == images.shape and out.dtype == np.uint8
        assert ob.shape == boxes.shape and oc.shape == classes.shape
        for i in range(B):
            n = on[i]
            assert 1 <= n <= N
            assert (oc[i, n:] == -1).all() and (ob[i, n:] == 0).all()
            covered = np.zeros((B, H, W), bool)
            for box, cls in zip(ob[i, :n], oc[i, :n]):
                # pixels of that class's colour near the box (an image can fill two tiles)
                hit = np.all(np.abs(out[i].astype(int) - COLORS[cls]) < 40, axis=-1)
                y0, x0 = max(0, int(box[0] * H) - 2), max(0, int(box[1] * W) - 2)
                y1, x1 = int(np.ceil(box[2] * H)) + 2, int(np.ceil(box[3] * W)) + 2
                ys, xs = np.nonzero(hit[y0:y1, x0:x1])
                assert len(ys), (i, cls)
                seeds_seen.add((s, i, int(cls)))
                ref = [(ys.min() + y0) / H, (xs.min() + x0) / W,
                       (ys.max() + 1 + y0) / H, (xs.max() + 1 + x0) / W]
                # within 1.5 px: the tile is resized by 0.5 with bilinear blending at edges
                assert np.abs(box - ref).max() <= 1.5 / min(H, W), (box, ref)
                covered[cls, y0:y1, x0:x1] = True
            # every coloured object visible in the canvas lies inside a box of its class
            for cls in range(B):
                hit = np.all(np.abs(out[i].astype(int) - COLORS[cls]) < 40, axis=-1)
                assert (hit & ~covered[cls]).sum() <= 4, (i, cls)
    assert len(seeds_seen) > B  # partners differ between seeds


def test_mosaic_p_zero_is_identity_and_seeded() -> None:
    images, boxes, classes, num = batch()
    out = A.mosaic(images, boxes, classes, num, tf.constant([1, 1]), p=0.0)
    for a, b in zip(out, (images, boxes, classes, num)):
        np.testing.assert_array_equal(a, b)
    a = A.mosaic(images, boxes, classes, num, tf.constant([1, 2]))
    b = A.mosaic(images, boxes, classes, num, tf.constant([1, 2]))
    c = A.mosaic(images, boxes, classes, num, tf.constant([1, 3]))
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])


def test_detection_mixup_weights_and_blend() -> None:
    images, boxes, classes, num = batch()
    num = num.copy()
    boxes[2, 1] = [0.5, 0.5, 0.6, 0.6]
    classes[2, 1] = 9
    num[2] = 2
    images_f = images.astype(np.float32) / 255.0
    out, ob, oc, on, w = (t.numpy() for t in A.detection_mixup(
        images_f, boxes, classes, num, tf.constant([5, 5]), alpha=1.0, p=1.0))
    for i in range(B):
        own = num[i]
        n = on[i]
        lam = w[i, 0]
        assert 0.0 <= lam <= 1.0
        np.testing.assert_allclose(w[i, :own], lam, atol=1e-6)
        np.testing.assert_allclose(w[i, own:n], 1 - lam, atol=1e-6)
        assert (w[i, n:] == 0).all() and (oc[i, n:] == -1).all()
        np.testing.assert_array_equal(ob[i, :own], boxes[i, :own])  # own boxes first
        partner_cls = oc[i, own:n]
        # partner = the sample whose boxes were appended; the image is the same blend
        j = [k for k in range(B) if np.array_equal(classes[k, :num[k]][:len(partner_cls)],
                                                   partner_cls)][0]
        np.testing.assert_allclose(out[i], lam * images_f[i] + (1 - lam) * images_f[j],
                                   atol=1e-5)
        # each image's weights: own boxes lam + partner boxes (1 - lam)
        assert n == min(N, own + num[j])
    # p = 0: unchanged, weights 1 on real boxes
    out, ob, oc, on, w = A.detection_mixup(images, boxes, classes, num, tf.constant([5, 5]),
                                           p=0.0)
    np.testing.assert_array_equal(out, images)
    np.testing.assert_array_equal(on, num)
    np.testing.assert_array_equal(w.numpy() > 0, np.arange(N)[None] < num[:, None])
    with pytest.raises(ValueError, match="alpha"):
        A.detection_mixup(images, boxes, classes, num, tf.constant([5, 5]), alpha=0.0)
