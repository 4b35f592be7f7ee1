"""The per-block plan and the batched L3 inputs draw exactly what the per-sample
ops draw from the same seeds (docs/seeds.md: the values do not depend on where
they are computed)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment, seeds
from tfpipe.augment import color
from tfpipe.pipeline._classify import COIN_TAG, PIXEL_BASE, Classify, batch_enabled
from tfpipe.pipeline._settings import settings

from .conftest import base_config

SCALE, RATIO = (0.2, 0.9), (0.7, 1.5)


def _classify(path: str, worker: tuple[int, int], **over) -> Classify:
    cfg = base_config(path, **{
        "augment.geometry": {"random_resized_crop": {"scale": list(SCALE), "ratio": list(RATIO),
                                                     "p": 0.7},
                             "flip": {"horizontal": True, "p": 0.4}},
        "augment.pixel": {"brightness": {"max_delta": 0.3, "p": 0.6},
                          "contrast": {"lower": 0.5, "upper": 1.5}},
        "augment.enable_rate": 0.5, **over})
    es = seeds.epoch_seed(seeds.global_seed(3), 2)
    return Classify(settings(cfg), es, worker[0], worker[1], lambda x: {}, train=True)


@pytest.mark.parametrize("worker", [(0, 1), (2, 3)])
def test_plan_rows_equal_per_sample_draws(dataset, worker):
    c = _classify(dataset, worker)
    assert c.fast_crop and c.fast_flip
    local = tf.constant([0, 1, 7, 8, 63, 64, 1000, 123457], tf.int64)
    plan = {k: v.numpy() for k, v in c.plan(local).items()}
    assert set(plan) == {"_base", "_enabled", "_crop", "_crop_on", "_flip"}
    for i, loc in enumerate(local.numpy()):
        gidx, gbatch = c._indices(tf.constant(loc, tf.int64))
        op_seed = c.op_seeds(gidx)
        s0 = op_seed(0)
        want_draws = augment.crop_window_draws(s0, SCALE, RATIO).numpy()
        assert np.array_equal(plan["_crop"][i].view(np.uint32), want_draws.view(np.uint32))
        coin = tf.random.stateless_uniform((), seeds.fold(s0, COIN_TAG), alg="philox") < 0.7
        assert plan["_crop_on"][i] == bool(coin)
        # the coin sample_flip draws: TF's own split and uniform (philox)
        half = tf.random.experimental.stateless_split(op_seed(1), 2, alg="philox")[0]
        assert plan["_flip"][i] == bool(tf.random.stateless_uniform((), half, alg="philox") < 0.4)
        assert plan["_enabled"][i] == bool(batch_enabled(c.es, gbatch, 0.5))
        # the base folds into every op seed, as op_seed(sample_seed, k) does
        sample = seeds.sample_seed(c.es, gidx)
        for k in (0, 5, PIXEL_BASE):
            assert np.array_equal(seeds.fold(plan["_base"][i], k).numpy(),
                                  seeds.op_seed(sample, k).numpy())


def test_window_from_planned_draws_equals_sample_crop_window():
    s = tf.constant([11, -5], tf.int64)
    draws = augment.crop_window_draws(tf.stack([s, s + 1]), SCALE, RATIO)
    for row, seed in ((0, s), (1, s + 1)):
        for h, w in ((375, 500), (40, 900), (1000, 30)):
            got = augment.crop_window_from_draws(draws[row], h, w, RATIO)
            want = augment.sample_crop_window(seed, h, w, SCALE, RATIO)
            assert [int(v) for v in got] == [int(v) for v in want]


@pytest.mark.parametrize("fused", [True, False])
def test_pixel_inputs_equal_per_sample_fields(dataset, fused):
    over = {} if fused else {"augment.pixel.grayscale": {"p": 0.3}}
    c = _classify(dataset, (1, 2), **over)
    assert (c.fused is not None) == fused
    local = tf.constant([3, 4, 90, 5000], tf.int64)
    got = {k: v.numpy() for k, v in c.pixel_inputs({"_local": local}).items()}
    for i, loc in enumerate(local.numpy()):
        gidx, _ = c._indices(tf.constant(loc, tf.int64))
        want = {k: v.numpy() for k, v in c.pixel_fields(c.op_seeds(gidx)).items()}
        assert set(got) == set(want)
        for k in want:
            assert np.array_equal(got[k][i], want[k]), (k, i)


def test_color_row_draws_equal_per_seed_draws():
    rows = tf.constant([[1, 2], [-7, 2**40], [0, 0]], tf.int64)
    got = color.sample_contrast(rows, 0.5, 1.5).numpy()
    want = [float(color.sample_contrast(rows[i], 0.5, 1.5)) for i in range(3)]
    assert np.array_equal(got, np.array(want, np.float32))
    p, a = color.split_seed(rows)
    for i in range(3):
        pi, ai = color.split_seed(rows[i])
        assert np.array_equal(p[i].numpy(), pi.numpy()) and np.array_equal(a[i].numpy(), ai.numpy())
