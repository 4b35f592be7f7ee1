"""The pipeline's composed stages (plan, decode, pixel, batch): each usable alone,
detection built from them rather than from `Classify`, and one definition of
"L3 -> L4 -> normalize, gated per row" for the host batch stage and the device stage.

Oracles: the public per-sample `tfpipe.augment` ops on the same seeds, TF's own
image ops, NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment, sample_data, seeds
from tfpipe.augment import color, on_device
from tfpipe.pipeline import _batch_stage, _classify, _detect
from tfpipe.pipeline._decode_stage import DecodeStage
from tfpipe.pipeline._detect_geometry import BoxGeometry
from tfpipe.pipeline._pixel_stage import PixelStage
from tfpipe.pipeline._plan import PIXEL_BASE, PlanStage, SampleSeeds
from tfpipe.pipeline._settings import settings
from tfpipe.pipeline._tasks import Builder

from .conftest import base_config

# what `_build._assemble` reads on a builder, for every task: the declared interface
# (`_tasks.Builder`); the block path's extras (fast_crop, fused_l1, ...) are
# classification's own, asked only when its task entry says `block_path`
FACADE = ("plan", "process", "sentinel", "batch", "compose", "pixel_stage", "decode_only",
          "eval_image", "augmenting", "s", "geometry", "pixel", "batch_ops")
ES = seeds.epoch_seed(seeds.global_seed(5), 1)


def _settings(**over):
    return settings(base_config("unused-*.tfrecord", **over))


def _images(n: int, size: int = 8, seed: int = 0) -> tf.Tensor:
    rng = np.random.default_rng(seed)
    return tf.constant(rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8))


def test_detection_is_composed_not_a_classify_subclass():
    assert not issubclass(_detect.Detect, _classify.Classify)
    det = _detect.Detect(_settings(**{"data.task": "detection", "data.max_boxes": 4}),
                         ES, 0, 1, lambda x: {}, True)
    cls = _classify.Classify(_settings(), ES, 0, 1, lambda x: {}, True)
    for name in FACADE:
        assert hasattr(det, name) and hasattr(cls, name), name
    assert isinstance(det, Builder) and isinstance(cls, Builder)
    # detection draws per sample and never plans a crop window before decoding; it
    # carries none of classification's window-planning switches
    assert det.plan is None and cls.fast_crop and callable(cls.plan)
    assert not any(hasattr(det, k) for k in ("fast_crop", "fast_flip", "fused_l1", "device"))
    assert isinstance(det.l3_stage, PixelStage) and isinstance(det.seeds, SampleSeeds)


MIXED = {"augment.batch": {"mixup": {"alpha": 0.4}}, "augment.enable_rate": 0.5,
         "data.label_format": "one_hot", "pipeline.batch_size": 4,
         "augment.pixel": {"brightness": {"max_delta": 0.3, "p": 0.5}, "grayscale": {"p": 0.5}}}


def test_host_batch_stage_and_device_stage_run_one_definition(monkeypatch):
    """Both paths call `augment.on_device.augment_batch` (patched here: both see the
    patch) and give the same bytes for the same batch, rows of mixed decisions."""
    calls = []
    real = on_device.augment_batch

    def spy(*args, **kw):
        calls.append(kw["l3"] is not None)
        return real(*args, **kw)

    monkeypatch.setattr(on_device, "augment_batch", spy)
    batch = {"image": _images(4), "label": tf.constant([0, 1, 2, 3], tf.int64),
             "_local": tf.constant([8, 9, 10, 11], tf.int64),
             "_enabled": tf.constant([True, False, True, True])}
    s = _settings(**MIXED)
    got = _classify.Classify(s, ES, 0, 1, lambda x: {}, True).compose(
        batch, tf.constant(2, tf.int64), 4, False)
    dev_cfg = base_config("unused-*.tfrecord", **MIXED, **{"augment.pixel_stage": "device"})
    feats = _classify.Classify(settings(dev_cfg), ES, 0, 1, lambda x: {}, True).compose(
        batch, tf.constant(2, tf.int64), 4, False)
    assert feats["image"].dtype == tf.uint8 and calls == [True]  # the host half: no pixel work
    x, y = _classify.device_stage(dev_cfg)({k: v for k, v in feats.items() if k != "label"},
                                            feats["label"])
    assert calls == [True, True]
    assert np.array_equal(got["image"].numpy().view(np.uint32), x.numpy().view(np.uint32))
    assert np.array_equal(got["label"].numpy(), y.numpy())
    # the plain row is its plain rendering: normalize(image), its own label
    plain = color.normalize(batch["image"][1:2], s.mean, s.std).numpy()
    assert np.allclose(got["image"].numpy()[1:2], plain, atol=1e-6)
    assert np.array_equal(got["label"].numpy()[1], np.eye(4, dtype=np.float32)[1])


def test_plan_stage_alone_equals_per_sample_draws():
    geo = _settings().active("geometry")
    sample_seeds = SampleSeeds(ES, 1, 3, 8)
    plan = PlanStage(sample_seeds, geo, 1.0, _settings().image_size).plan(tf.constant([0, 5, 40], tf.int64))
    assert set(plan) == {"_base", "_crop", "_flip"}
    for i, local in enumerate((0, 5, 40)):
        sample = seeds.sample_seed(ES, seeds.global_index(tf.constant(local, tf.int64), 1, 3))
        want = augment.crop_window_draws(seeds.op_seed(sample, 0), (0.08, 1.0), (0.75, 1.3333))
        assert np.array_equal(plan["_crop"][i].numpy(), want.numpy())


def test_decode_stage_alone_eval_and_planned_window():
    s = _settings(**{"data.image_size": [16, 16]})
    img = sample_data.random_crop(list(sample_data.source_photos().values())[0],
                                  np.random.default_rng(0), (60, 80))
    enc = tf.constant(sample_data.encode(img, "png"))  # PNG: no DCT scaling, exact decode
    stage = DecodeStage(s, [], fused_l1=False)
    assert stage.image(enc, None, augmenting=False).shape == (16, 16, 3)
    # a planned row with the crop coin off: the whole image, resized (+ planned flip)
    geo = s.active("geometry")
    planned = PlanStage(SampleSeeds(ES, 0, 1, 8), geo, 1.0, s.image_size).plan(tf.constant([3], tf.int64))
    row = {k: v[0] for k, v in planned.items()}
    row["_crop_on"], row["_flip"] = tf.constant(False), tf.constant(True)
    got = DecodeStage(s, geo, fused_l1=False).train_image(enc, row).numpy()
    want = DecodeStage(s, [], fused_l1=False).train_image(enc, {"_base": row["_base"]})
    assert np.array_equal(got, want.numpy()[:, ::-1])


def test_pixel_stage_alone_equals_per_sample_ops():
    s = _settings(**{"augment.pixel": {"brightness": {"max_delta": 0.3, "p": 0.6},
                                       "contrast": {"lower": 0.5, "upper": 1.5}},
                     "data.output_dtype": "uint8"})
    stage = PixelStage(s.active("pixel"), s.mean, s.std, "uint8")
    images = _images(3)
    base = tf.constant([[1, 2], [-3, 4], [5, 2**40]], tf.int64)
    x, normalized = stage.apply(images, stage.inputs(base), normalize=True)
    assert not normalized and x.dtype == tf.uint8  # uint8 output: never normalized
    for i in range(3):
        ref = images[i]
        ref = color.random_brightness(ref, seeds.fold(base[i], PIXEL_BASE), 0.3, p=0.6)
        ref = color.random_contrast(ref, seeds.fold(base[i], PIXEL_BASE + 1), 0.5, 1.5)
        assert np.array_equal(x[i].numpy(), ref.numpy()), i


def test_batch_stage_alone_is_mixup_then_normalize():
    s = _settings(**{"augment.pixel": {}, "augment.batch": {"mixup": {"alpha": 0.4}},
                     "data.label_format": "one_hot"})
    stage = _batch_stage.BatchStage(s, SampleSeeds(ES, 0, 1, 4), PixelStage([], s.mean, s.std,
                                                                           "float32"),
                                    s.active("batch"), device=False)
    batch = {"image": _images(4), "label": tf.constant([3, 2, 1, 0], tf.int64),
             "_local": tf.range(4, dtype=tf.int64)}
    got = stage.compose(batch, tf.constant(7, tf.int64), 4, keep_index=True)
    x, y = augment.mixup(tf.cast(batch["image"], tf.float32) / 255.0,
                         augment.to_one_hot(batch["label"], 4),
                         seeds.op_seed(seeds.batch_seed(ES, 7), 0), 0.4)
    assert np.allclose(got["image"].numpy(), color.normalize(x, s.mean, s.std).numpy(),
                       atol=1e-5)
    assert np.allclose(got["label"].numpy(), y.numpy())
    assert got["index"].numpy().tolist() == [0, 1, 2, 3]


def test_box_geometry_alone_flip_moves_boxes_exactly():
    s = _settings(**{"data.task": "detection", "data.image_size": [8, 8], "data.max_boxes": 3,
                     "augment.geometry": {"flip": {"horizontal": True, "p": 1.0}}})
    geo = BoxGeometry(s, s.active("geometry"))
    image = _images(1, size=8)[0]
    out, m, hw = geo.image(image, lambda k: tf.constant([k, 1], tf.int64))
    np.testing.assert_array_equal(out.numpy(), image.numpy()[:, ::-1])
    feats = {"image/object/bbox/ymin": [0.1], "image/object/bbox/xmin": [0.25],
             "image/object/bbox/ymax": [0.5], "image/object/bbox/xmax": [0.5],
             "image/object/class/label": [2]}
    boxes, classes, n = geo.boxes(feats, m, hw)
    assert int(n) == 1 and classes.numpy().tolist() == [2, -1, -1]
    np.testing.assert_allclose(boxes.numpy()[0], [0.1, 0.5, 0.5, 0.75], atol=1e-6)


def test_detection_carries_the_l3_inputs_classification_draws_per_row():
    """The pixel stage report prefix of both tasks: detection's per-sample fields,
    carried through the batch, give the bytes classification's batch-time draws give."""
    pixel = {"augment.pixel": {"brightness": {"max_delta": 0.3, "p": 0.5},
                               "saturation": {"lower": 0.5, "upper": 1.5}}}
    cls = _classify.Classify(_settings(**pixel), ES, 0, 1, lambda x: {}, True)
    det = _detect.Detect(_settings(**pixel, **{"data.task": "detection", "data.max_boxes": 2}),
                         ES, 0, 1, lambda x: {}, True)
    local = tf.constant([4, 30], tf.int64)
    batch = {"image": _images(2), "_local": local}
    rows = [det.l3_stage.fields(det.seeds.op_seeds(g)) for g in tf.unstack(local)]
    carried = {"image": batch["image"], **{k: tf.stack([r[k] for r in rows]) for k in rows[0]}}
    want = cls.pixel_stage(batch)["image"].numpy()
    got = det.pixel_stage(carried)["image"].numpy()
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # and it is L3: the plain [0, 1] pixels changed
    assert not np.array_equal(got, batch["image"].numpy() / np.float32(255))
