"""L4 mixup / cutmix: label maths, pixels actually mixed, seeds, graph mode.

Oracle trick: sample i of the batch is a constant image of value 10*i + 5 and
its label is class i (num_classes = B). Every output pixel then says which
sample it came from, so cutmix's label weights can be checked against the
pasted area measured on the pixels, and mixup's against the pixel values.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.augment import batch as B

N, H, W = 8, 24, 40


def _tagged(dtype):
    values = np.arange(N, dtype=np.float32) * 10 + 5
    images = np.broadcast_to(values[:, None, None, None], (N, H, W, 3)).copy()
    if dtype == "float32":
        images = images / 255.0
        return tf.constant(images, tf.float32), values / 255.0
    return tf.constant(images.astype(np.uint8)), values


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("seed", [[0, 1], [5, 9], [123, 4]])
def test_cutmix_weights_equal_pasted_area(dtype, seed):
    images, values = _tagged(dtype)
    labels = B.to_one_hot(tf.range(N), N)
    out, mixed = B.cutmix(images, labels, tf.constant(seed, tf.int64), alpha=1.0)
    out, mixed = out.numpy(), mixed.numpy()
    assert out.dtype == images.dtype.as_numpy_dtype and out.shape == images.shape
    np.testing.assert_allclose(mixed.sum(axis=1), 1.0, atol=1e-6)
    pasted_any = False
    for i in range(N):
        src = np.argmin(np.abs(out[i, ..., 0][..., None] - values), axis=-1)  # [H,W] source index
        counts = np.bincount(src.ravel(), minlength=N) / (H * W)
        assert np.count_nonzero(counts) <= 2
        np.testing.assert_allclose(mixed[i], counts, atol=1e-6)  # weight == pasted fraction
        # the pasted region is one axis-aligned rectangle
        other = src != i
        if other.any():
            pasted_any = True
            ys, xs = np.nonzero(other)
            assert other[ys.min():ys.max() + 1, xs.min():xs.max() + 1].all()
    assert pasted_any


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_mixup_pixels_follow_labels(dtype):
    images, values = _tagged(dtype)
    labels = B.to_one_hot(tf.range(N), N)
    out, mixed = B.mixup(images, labels, tf.constant([3, 3], tf.int64), alpha=0.4)
    out, mixed = out.numpy().astype(np.float64), mixed.numpy()
    np.testing.assert_allclose(mixed.sum(axis=1), 1.0, atol=1e-6)
    assert (mixed.max(axis=1) < 0.999).sum() >= N // 2  # most samples really mixed
    tol = 0.5 if dtype == "uint8" else 1e-5  # uint8 output is rounded
    for i in range(N):
        expect = float(mixed[i] @ values)  # the label weights ARE the pixel weights
        assert np.all(np.abs(out[i] - expect) <= tol)


def test_mixup_on_real_images_stays_in_range(photos_uint8):
    images = tf.constant(np.stack(photos_uint8))
    labels = B.to_one_hot([0, 1, 2], 3)
    out, _ = B.mixup(tf.cast(images, tf.float32) / 255.0, labels, [1, 1], alpha=1.0)
    assert float(tf.reduce_min(out)) >= 0.0 and float(tf.reduce_max(out)) <= 1.0


def test_p_and_seeds():
    images, _ = _tagged("uint8")
    labels = B.to_one_hot(tf.range(N), N)
    seed = tf.constant([7, 7], tf.int64)
    for op in (B.mixup, B.cutmix):
        out, lab = op(images, labels, seed, 1.0, p=0.0)
        np.testing.assert_array_equal(out, images)
        np.testing.assert_array_equal(lab, labels)
        a = op(images, labels, seed, 1.0)
        b = op(images, labels, seed, 1.0)
        c = op(images, labels, tf.constant([8, 7], tf.int64), 1.0)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        assert not np.array_equal(a[1], c[1])


def test_switch_in_tf_data_graph_only_stateless():
    images, _ = _tagged("uint8")
    labels = tf.range(N)
    ds = tf.data.Dataset.from_tensor_slices((images, labels)).batch(4).enumerate()

    def mix(i, batch):
        seed = tf.stack([tf.constant(42, tf.int64), i])
        return B.mixup_or_cutmix(batch[0], B.to_one_hot(batch[1], N), seed,
                                 mixup_alpha=0.2, cutmix_alpha=1.0, switch_prob=0.5)

    outs = list(ds.map(mix))
    assert len(outs) == 2
    for img, lab in outs:
        assert img.dtype == tf.uint8 and img.shape == (4, H, W, 3)
        np.testing.assert_allclose(tf.reduce_sum(lab, axis=1), 1.0, atol=1e-6)
    fn = tf.function(mix)
    graph = fn.get_concrete_function(tf.TensorSpec([], tf.int64),
                                     (tf.TensorSpec([4, H, W, 3], tf.uint8),
                                      tf.TensorSpec([4], tf.int32))).graph.as_graph_def()
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    assert not ops & {"RandomUniform", "RandomStandardNormal", "RandomGamma", "RandomShuffle"}
    assert "StatelessRandomGammaV3" in ops or any("Gamma" in o for o in ops)


def test_beta_moments():
    for alpha in (0.2, 1.0):
        lam = B.sample_beta(tf.constant([1, 2], tf.int64), alpha, [20000]).numpy()
        assert lam.min() >= 0.0 and lam.max() <= 1.0
        var = 1.0 / (4.0 * (2.0 * alpha + 1.0))  # Beta(a, a)
        assert abs(lam.mean() - 0.5) < 0.01 and abs(lam.var() - var) < 0.01


def test_partners_are_a_permutation():
    perm = B.sample_partners(tf.constant([3, 1], tf.int64), 64).numpy()
    assert sorted(perm) == list(range(64)) and not np.array_equal(perm, np.arange(64))


def test_to_one_hot_and_errors():
    np.testing.assert_array_equal(B.to_one_hot([[2], [0]], 3), [[0, 0, 1], [1, 0, 0]])
    images, _ = _tagged("uint8")
    with pytest.raises(ValueError, match="one-hot"):
        B.mixup(images, tf.range(N), [1, 2])
    with pytest.raises(ValueError, match="alpha"):
        B.cutmix(images, B.to_one_hot(tf.range(N), N), [1, 2], alpha=0.0)
    with pytest.raises(ValueError, match="batch seed"):
        B.cutmix(images, B.to_one_hot(tf.range(N), N), tf.zeros([N, 2], tf.int64))
    with pytest.raises(TypeError, match="integer"):
        B.to_one_hot([0.5], 2)


def test_switch_probabilities():
    images, _ = _tagged("float32")
    labels = B.to_one_hot(tf.range(N), N)
    cut = mix = 0
    for k in range(40):
        out, _ = B.mixup_or_cutmix(images, labels, tf.constant([k, 1], tf.int64), switch_prob=0.5,
                                   mixup_p=1.0, cutmix_p=1.0)
        values = np.unique(np.round(out.numpy() * 255, 3))
        on_grid = np.all(np.abs(values - np.round((values - 5) / 10) * 10 - 5) < 1e-2)
        cut += bool(on_grid)  # cutmix only moves pixels: every value is still a tag
        mix += not on_grid
    assert 8 <= cut <= 32 and 8 <= mix <= 32
    out, lab = B.mixup_or_cutmix(images, labels, tf.constant([1, 1], tf.int64), mixup_p=0.0, cutmix_p=0.0)
    np.testing.assert_array_equal(out, images)
    np.testing.assert_array_equal(lab, labels)
