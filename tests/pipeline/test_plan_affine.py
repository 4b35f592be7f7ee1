"""The per-block plan draws each affine op's matrix and p-coin (vectorized), and
the per-sample L2 warps by it: the same matrices, coins and pixels as
`apply_geometry_op` (`random_affine` from the op seed) per sample."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment, seeds
from tfpipe.pipeline._classify import COIN_TAG, Classify, apply_geometry_op
from tfpipe.pipeline._decode import decode_full, resize_uint8
from tfpipe.pipeline._settings import settings

from .conftest import base_config

AFFINE = {"rotation": 20.0, "scale": [0.8, 1.2], "per_axis_scale": True, "shear": 6.0,
          "translate": [0.1, 0.05], "p": 0.6}


def _classify(path: str, geometry: dict, size=(32, 32)) -> Classify:
    # full-size whole-image decode, the L1 of the oracle below (`decode_full` +
    # `resize_uint8`); the DCT-scaled one is tests/pipeline/test_whole_image_dct.py's
    cfg = base_config(path, **{"augment.geometry": geometry, "data.image_size": list(size),
                               "data.dct_scaling": False})
    es = seeds.epoch_seed(seeds.global_seed(3), 1)
    return Classify(settings(cfg), es, 0, 1, lambda x: {}, train=True)


def test_planned_affine_equals_per_sample_affine(dataset, images):
    c = _classify(dataset, {"affine": AFFINE})
    assert c.planned_affine == [0] and not c.fast_crop
    local = tf.constant(list(range(8)), tf.int64)
    plan = c.plan(local)
    assert {"_affine0", "_affine0_on"} <= set(plan)
    op = c.geometry[0]
    kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in AFFINE.items() if k != "p"}
    coins = []
    for i in range(8):
        s0 = c.op_seeds(c._indices(local[i])[0])(0)
        want = augment.sample_affine_matrix(s0, (32, 32), **kw).numpy()
        assert np.array_equal(plan["_affine0"][i].numpy().view(np.uint32), want.view(np.uint32))
        coin = tf.random.stateless_uniform((), seeds.fold(s0, COIN_TAG), alg="philox") < 0.6
        assert bool(plan["_affine0_on"][i]) == bool(coin)
        coins.append(bool(coin))
        # the pixels: L1 then the per-sample reference op (random_affine from the op seed)
        encoded = tf.constant(images[i][0])
        row = {k: v[i] for k, v in plan.items()}
        ref = apply_geometry_op(op, resize_uint8(decode_full(encoded, 3), (32, 32)), s0, (32, 32))
        assert np.array_equal(c.decode_stage.train_image(encoded, row).numpy(), ref.numpy())
    assert any(coins) and not all(coins)  # both branches of the p-coin were compared


@pytest.mark.parametrize("size, planned", [((32, 32), [1]), ((32, 48), [])])
def test_affine_after_rot90_is_planned_only_when_the_size_is_fixed(dataset, size, planned):
    # rot90 of a non-square image swaps (h, w): the matrix depends on the drawn k
    c = _classify(dataset, {"rot90": {"p": 0.75}, "affine": {"rotation": 10.0}}, size)
    assert c.planned_affine == planned
