"""`rot90_flip` (rot90 then the flips in <= 2 passes; what the pipeline runs for a
rot90 followed by a flip on a square image) == `tf.image.rot90` then `tf.reverse`
per flip, for every k and flip combination; and the pipeline's L2 with it ==
`random_rot90` then `random_flip` from the same op seeds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment, seeds
from tfpipe.pipeline._classify import Classify, apply_geometry_op
from tfpipe.pipeline._settings import settings


@pytest.mark.parametrize("dtype", [tf.uint8, tf.float32])
def test_every_k_and_flip_equals_rot90_then_reverse(dtype):
    x = tf.cast(tf.constant(np.random.default_rng(0).integers(0, 256, (5, 5, 3))), dtype)
    fn = tf.function(augment.rot90_flip, autograph=False)
    for k, fx, fy in itertools.product(range(-1, 5), (False, True), (False, True)):
        want = tf.image.rot90(x, k)
        if fx:
            want = tf.reverse(want, [-2])
        if fy:
            want = tf.reverse(want, [-3])
        got = fn(x, tf.constant(k), tf.constant(fx), tf.constant(fy))
        assert np.array_equal(got.numpy(), want.numpy()), (k, fx, fy)


def test_non_square_is_refused():
    with pytest.raises(ValueError, match="square"):
        augment.rot90_flip(tf.zeros([4, 6, 3], tf.uint8), 1, True, False)


def test_pipeline_rot90_then_flip_equals_the_two_ops(tmp_path):
    cfg = {"seed": 1, "data": {"path": str(tmp_path / "x-*"), "image_size": [12, 12],
                               "num_classes": 2},
           "augment": {"geometry": {"rot90": {"p": 0.75},
                                    "flip": {"horizontal": True, "vertical": True, "p": 0.5}}}}
    c = Classify(settings(cfg), seeds.epoch_seed(seeds.global_seed(1), 0), 0, 1,
                 lambda x: {}, train=True)
    image = tf.constant(np.random.default_rng(1).integers(0, 256, (12, 12, 3), np.uint8))
    encoded = tf.io.encode_png(image)
    plan = c.plan(tf.range(24, dtype=tf.int64))
    seen = set()
    for i in range(24):
        row = {k: v[i] for k, v in plan.items()}
        want = image
        for j, op in enumerate(c.geometry):
            want = apply_geometry_op(op, want, seeds.fold(row["_base"], j), (12, 12))
        got = c.decode_stage.train_image(encoded, row)
        assert np.array_equal(got.numpy(), want.numpy()), i
        seen.add(want.numpy().tobytes())
    assert len(seen) >= 6  # several of the 8 orientations were compared
