"""RandAugment / TrivialAugment: sampling tables, each op's kernel, batch composition.

(The shared contract -- graph mode, seeds, batch == per-sample, no stateful ops --
runs in test_pixel_contract.py.)
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image, ImageEnhance, ImageOps

from tfpipe.augment import policies as Q

OPS = {name: i for i, name in enumerate(Q.POLICY_OPS)}


def _ops(*rows):
    return tf.constant([[float(OPS[name]), level] for name, level in rows], tf.float32)


def test_randaugment_sampling_table():
    seeds = tf.constant([[i, 1] for i in range(200)], tf.int64)
    draws = Q.sample_policy(seeds, "randaugment", num_ops=2, magnitude=9).numpy()
    assert draws.shape == (200, 2, 2)
    table = Q.policy_levels("randaugment")
    ops = draws[..., 0].astype(int)
    assert set(ops.ravel()) == set(range(len(Q.POLICY_OPS)))  # every op gets picked
    np.testing.assert_allclose(np.abs(draws[..., 1]), table[ops, 9], atol=1e-6)
    rotate = draws[..., 1][ops == OPS["rotate"]]
    assert (rotate > 0).any() and (rotate < 0).any()  # signed ops take both signs
    np.testing.assert_allclose(np.abs(rotate), 9.0, atol=1e-5)  # 30 deg * 9/30
    assert table[OPS["posterize"], 30] == 4 and table[OPS["solarize"], 0] == 1.0


def test_trivialaugment_draws_magnitudes():
    seeds = tf.constant([[i, 2] for i in range(300)], tf.int64)
    draws = Q.sample_policy(seeds, "trivialaugment", num_ops=1, magnitude=None).numpy()[:, 0]
    rot = np.abs(draws[draws[:, 0] == OPS["rotate"], 1])
    assert len(np.unique(np.round(rot, 3))) > 3 and rot.max() <= 135.0
    post = draws[draws[:, 0] == OPS["posterize"], 1]
    assert post.min() >= 2 and post.max() <= 8


def test_color_ops_match_pil(photo_uint8):
    pil = Image.fromarray(photo_uint8)
    image = tf.constant(photo_uint8)
    cases = [
        (("brightness", 0.3), ImageEnhance.Brightness(pil).enhance(1.3), 1),
        (("color", -0.5), ImageEnhance.Color(pil).enhance(0.5), 1),
        (("contrast", 0.6), ImageEnhance.Contrast(pil).enhance(1.6), 1),
        (("sharpness", 0.9), ImageEnhance.Sharpness(pil).enhance(1.9), 1),
        (("posterize", 4.0), ImageOps.posterize(pil, 4), 0),
        (("solarize", 0.5), ImageOps.solarize(pil, 127.5), 0),
        (("autocontrast", 0.0), ImageOps.autocontrast(pil), 0),
        (("equalize", 0.0), ImageOps.equalize(pil), 0),
        (("identity", 0.0), pil, 0),
    ]
    for row, expect, tol in cases:
        got = Q.apply_policy(image, _ops(row)).numpy().astype(int)
        assert np.abs(got - np.asarray(expect).astype(int)).max() <= tol, row


def test_geometric_ops():
    img = np.zeros([20, 30, 3], np.uint8)
    img[5:10, 8:12] = 200
    image = tf.constant(img)
    shifted = Q.apply_policy(image, _ops(("translate_x", 0.1))).numpy()  # 0.1 * 30 = 3 px right
    expect = np.zeros_like(img)
    expect[5:10, 11:15] = 200
    np.testing.assert_array_equal(shifted, expect)
    down = Q.apply_policy(image, _ops(("translate_y", -0.1))).numpy()  # 2 px up
    expect = np.zeros_like(img)
    expect[3:8, 8:12] = 200
    np.testing.assert_array_equal(down, expect)
    square = np.zeros([21, 21, 1], np.uint8)
    square[10, 4:17] = 255  # horizontal bar through the centre
    turned = Q.apply_policy(tf.constant(square), _ops(("rotate", 90.0))).numpy()
    np.testing.assert_array_equal(turned[..., 0], square[..., 0].T)  # vertical bar
    sheared = Q.apply_policy(image, _ops(("shear_x", 0.0))).numpy()
    np.testing.assert_array_equal(sheared, img)


def test_batch_two_ops_equals_per_sample(photos_uint8):
    images = tf.constant(np.stack(photos_uint8 * 2))  # 6 samples
    seeds = tf.constant([[i, 11] for i in range(6)], tf.int64)
    out = Q.randaugment(images, seeds, num_ops=2, magnitude=20).numpy()
    changed = 0
    for i in range(6):
        one = Q.randaugment(images[i], seeds[i], num_ops=2, magnitude=20).numpy()
        np.testing.assert_array_equal(out[i], one)
        changed += not np.array_equal(one, images[i].numpy())
    assert changed >= 4
    # p=0: nothing happens
    np.testing.assert_array_equal(Q.trivialaugment(images, seeds, p=0.0), images)


def test_bad_arguments(photo_uint8):
    with pytest.raises(ValueError, match="magnitude"):
        Q.randaugment(photo_uint8, [1, 2], num_ops=2, magnitude=31)
    with pytest.raises(ValueError, match="num_ops"):
        Q.randaugment(photo_uint8, [1, 2], num_ops=0)
    with pytest.raises(ValueError, match="policy"):
        Q.policy_levels("autoaugment")


# every op of the config table (docs/architecture.md) with example params
CONFIG_PARAMS = {
    "brightness": {"max_delta": 0.3}, "contrast": {"lower": 0.6, "upper": 1.4},
    "saturation": {"lower": 0.6, "upper": 1.4}, "hue": {"max_delta": 0.1}, "grayscale": {},
    "gamma": {"lower": 0.7, "upper": 1.5}, "gaussian_noise": {"stddev": 0.05},
    "speckle_noise": {"stddev": 0.1}, "gaussian_blur": {"sigma": [0.5, 2.0], "kernel_size": 5},
    "sharpen": {"lower": 0.5, "upper": 2.0},
    "random_erasing": {"scale": [0.05, 0.2], "ratio": [0.5, 2.0], "value": "random"},
    "posterize": {"bits": 4}, "solarize": {"threshold": 0.6}, "equalize": {}, "autocontrast": {},
    "jpeg_quality": {"lower": 30, "upper": 90}, "channel_shuffle": {},
    "randaugment": {"num_ops": 2, "magnitude": 9}, "trivialaugment": {},
}


def test_config_table_draw_per_sample_apply_per_batch(photos_uint8):
    """The pipeline's pattern: draw per sample, batch, apply the kernel once (eager here;
    the tf.data version of batch == per-sample runs in test_pixel_contract.py)."""
    assert set(Q.PIXEL_OPS) == set(CONFIG_PARAMS)
    images = np.stack(photos_uint8)
    seeds = tf.constant([[i, 5] for i in range(3)], tf.int64)
    for name, params in CONFIG_PARAMS.items():
        op = Q.pixel_op(name)
        # per sample: draw with the sample's own seed; "batch": stack what was drawn
        drawn = [op.sample(seeds[i], images.shape[1:], **params) for i in range(3)]
        stacked = tf.nest.map_structure(lambda *d: tf.stack(d), *drawn)
        batched = op.kernel(tf.constant(images), stacked, **params).numpy()
        for i in range(3):
            np.testing.assert_array_equal(batched[i], op.random(images[i], seeds[i], **params), name)
    with pytest.raises(ValueError, match="allowed: brightness"):
        Q.pixel_op("blur")


def test_p_split_matches_random(photos_uint8):
    from tfpipe.augment import color as C

    images = np.stack(photos_uint8 * 3)  # 9 samples
    seeds = tf.constant([[i, 8] for i in range(9)], tf.int64)
    op = Q.pixel_op("contrast")
    params = {"lower": 0.3, "upper": 0.5}
    pseed, aseed = C.split_seed(seeds)
    manual = C.maybe_apply(C.sample_apply(aseed, 0.5), op.kernel(images, op.sample(pseed, None, **params)),
                           images)
    np.testing.assert_array_equal(manual, op.random(images, seeds, p=0.5, **params))
    applied = [not np.array_equal(m, x) for m, x in zip(manual.numpy(), images)]
    assert 1 <= sum(applied) <= 8


NOT_XLA = {"jpeg_quality", "randaugment", "trivialaugment"}  # EncodeJpeg / dynamic_partition


def test_batch_kernels_compile_under_xla(photos_uint8):
    """augment.xla is the recommended after-batch path: every other kernel compiles."""
    images = tf.constant(np.stack(photos_uint8)[:, :32, :48])
    seeds = tf.constant([[i, 4] for i in range(3)], tf.int64)
    for name, params in CONFIG_PARAMS.items():
        if name in NOT_XLA:
            continue
        op = Q.pixel_op(name)
        drawn = op.sample(seeds, images.shape[1:], **params)
        fused = Q.color.xla(lambda x, d: op.kernel(x, d, **params))(images, drawn)
        plain = op.kernel(images, drawn, **params)
        diff = np.abs(fused.numpy().astype(np.int32) - plain.numpy().astype(np.int32))
        assert diff.max() <= 1, name
