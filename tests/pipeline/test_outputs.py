"""Fused fast path == unfused reference ops; eval oracle; dtypes; labels; enable_rate."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tfpipe import augment, seeds
from tfpipe.augment import color
from tfpipe.pipeline import build_pipeline, build_stages
from tfpipe.pipeline._classify import batch_enabled

from .bad_data import BAD, write_bad_dataset
from .conftest import CLASSES, NUM, base_config
from .helpers import by_index

# one xdist worker builds the module fixtures (records, geometry_only, eval_u8, bad_val_u8,
# f32_supervised) once
pytestmark = pytest.mark.xdist_group("pipeline-outputs")

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
# The references below decode at full size; the DCT-scaled decode (on by default)
# has its own oracles in test_dct_scaling.py.
FULL = {"data.dct_scaling": False}


@pytest.fixture(scope="module")
def records(dataset):
    """Serialized records in pipeline order when the shuffle is off."""
    cfg = base_config(dataset, **{"pipeline.shuffle_buffer": 0})
    read = dict(build_stages(cfg))["read"]
    return [r.numpy() for _, _, r in read]


def _border(n_src: int, n_out: int) -> np.ndarray:
    """Output rows whose bilinear taps touch the first or last source row."""
    ys = (np.arange(n_out) + 0.5) * n_src / n_out - 0.5
    return (ys < 1.0) | (ys > n_src - 2.0)


def _reference_geometry(serialized: bytes, g: int, seed: int = 3, size=(32, 32)):
    """Unfused: decode_image, random_resized_crop, flip. Returns (uint8 image, exact mask):
    mask is False on output pixels fed by the window's outermost rows/columns, where 4:2:0
    JPEG chroma upsampling differs between decode_and_crop and decode + slice."""
    ex = tf.io.parse_single_example(serialized, {"image/encoded": tf.io.FixedLenFeature([], tf.string)})
    enc = ex["image/encoded"]
    img = tf.io.decode_image(enc, channels=3, expand_animations=False)
    s = seeds.sample_seed(seeds.epoch_seed(seeds.global_seed(seed), 0), g)
    x, _ = augment.random_resized_crop(img, seeds.op_seed(s, 0), size, (0.08, 1.0), (0.75, 1.3333))
    _, _, ch, cw = (int(v) for v in augment.sample_crop_window(
        seeds.op_seed(s, 0), tf.shape(img)[0], tf.shape(img)[1], (0.08, 1.0), (0.75, 1.3333)))
    exact = ~(_border(ch, size[0])[:, None] | _border(cw, size[1])[None, :])
    if not bool(tf.io.is_jpeg(enc)):
        exact[:] = True  # PNG: decode + slice on both paths
    both = tf.concat([x, tf.cast(tf.constant(exact)[..., None], tf.uint8)], axis=-1)
    both, _ = augment.random_flip(both, seeds.op_seed(s, 1), True, False, 0.5)
    return both[..., :3].numpy(), both[..., 3].numpy().astype(bool)


@pytest.fixture(scope="module")
def geometry_only(dataset):
    """uint8 output of L2 alone, in read order."""
    cfg = base_config(dataset, **{"pipeline.shuffle_buffer": 0, "data.output_dtype": "uint8",
                                  "augment.pixel": {}, **FULL})
    return by_index(build_pipeline(cfg, keep_index=True))


@pytest.fixture(scope="module")
def eval_u8(dataset):
    cfg = base_config(dataset, **{"data.output_dtype": "uint8", **FULL})
    return by_index(build_pipeline(cfg, split="validation", keep_index=True))


def test_fused_geometry_equals_unfused(geometry_only, records):
    """decode_and_crop_jpeg(window) + resize vs decode_image + random_resized_crop + flip:
    bit-identical for PNG and away from the window border for JPEG (docs/augment.md)."""
    got = geometry_only
    assert len(got) == (NUM // 8) * 8
    for g, (img, _) in got.items():
        ref, exact = _reference_geometry(records[g], g)
        np.testing.assert_array_equal(img[exact], ref[exact], err_msg=f"sample {g}")
        assert np.abs(img.astype(int) - ref.astype(int)).max() <= 32


def test_batched_pixel_ops_equal_per_sample_reference(dataset, geometry_only):
    """L3 on the batch with per-row seeds == per-sample ops on the same L2 output, to
    float32 rounding (the batched channel mean sums in another order)."""
    cfg = base_config(dataset, **{"pipeline.shuffle_buffer": 0,
                                  "augment.pixel.brightness": {"max_delta": 0.4, "p": 0.6},
                                  **FULL})
    got = by_index(build_pipeline(cfg, keep_index=True))
    geo = geometry_only
    es = seeds.epoch_seed(seeds.global_seed(3), 0)
    for g, (img, _) in got.items():
        s = seeds.sample_seed(es, g)
        xf = tf.cast(geo[g][0], tf.float32) / 255.0
        xf = color.random_brightness(xf, seeds.op_seed(s, 1000), 0.4, p=0.6)
        xf = color.random_contrast(xf, seeds.op_seed(s, 1001), 0.6, 1.4)
        ref = color.normalize(xf, MEAN, STD).numpy()
        np.testing.assert_allclose(img, ref, rtol=0, atol=1e-5, err_msg=f"sample {g}")


def _center_oracle(enc: bytes, size=(32, 32), frac=0.875) -> np.ndarray:
    """PIL decode + numpy window arithmetic + OpenCV bilinear resize."""
    im = np.asarray(Image.open(io.BytesIO(enc)).convert("RGB"))
    h, w = im.shape[:2]
    fit = min(h / size[0], w / size[1]) * frac
    ch, cw = min(h, max(1, round(size[0] * fit))), min(w, max(1, round(size[1] * fit)))
    oy, ox = (h - ch) // 2, (w - cw) // 2
    crop = np.ascontiguousarray(im[oy:oy + ch, ox:ox + cw])
    return cv2.resize(crop, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)


def test_eval_is_deterministic_center_crop_uint8(dataset, records, eval_u8):
    cfg = base_config(dataset, **{"data.output_dtype": "uint8", **FULL})
    a = eval_u8
    b = by_index(build_pipeline(cfg, split="validation", keep_index=True, epoch=5))
    assert len(a) == NUM  # eval keeps the last partial batch
    for g in a:
        assert a[g][0].dtype == np.uint8
        np.testing.assert_array_equal(a[g][0], b[g][0])  # no randomness, any epoch
        enc = tf.io.parse_single_example(
            records[g], {"image/encoded": tf.io.FixedLenFeature([], tf.string)})["image/encoded"]
        oracle = _center_oracle(enc.numpy())
        # PIL vs libjpeg-turbo IDCT and cv2 vs TF bilinear rounding: a few levels
        diff = np.abs(a[g][0].astype(int) - oracle.astype(int))
        assert diff.mean() < 1.5 and np.percentile(diff, 99) <= 8, f"sample {g}: {diff.mean()}"


@pytest.fixture(scope="module")
def f32_supervised(dataset):
    """(element_spec, first image batch, first label batch) of the float32 train
    pipeline with as_supervised=True: read by two tests, built once."""
    ds = build_pipeline(base_config(dataset), as_supervised=True)
    x, y = next(iter(ds))
    return ds.element_spec, x, y


def test_as_supervised_and_float_range(f32_supervised):
    spec, x, y = f32_supervised
    assert isinstance(spec, tuple)
    assert x.shape == (8, 32, 32, 3) and x.dtype == tf.float32
    assert y.dtype == tf.int64 and set(y.numpy()) <= set(range(CLASSES))
    lo = (0 - np.array(MEAN)) / np.array(STD)
    hi = (1 - np.array(MEAN)) / np.array(STD)
    assert np.all(x.numpy() >= lo - 1e-5) and np.all(x.numpy() <= hi + 1e-5)


def test_uint8_train_output_then_normalize_layer(dataset, f32_supervised):
    cfg = base_config(dataset, **{"data.output_dtype": "uint8"})
    u8 = next(iter(build_pipeline(cfg)))["image"]
    fl = f32_supervised[1]  # the float32 pipeline's first batch (as_supervised: the same images)
    assert u8.dtype == tf.uint8
    # uint8 runs L3 on uint8 (rounded per op), float32 in float: within rounding
    norm = color.Normalize(MEAN, STD)(u8).numpy()
    assert np.abs(norm - fl.numpy()).max() < 3.5 / 255 / min(STD)


def test_enable_rate_zero_gives_eval_images(dataset, eval_u8):
    cfg = base_config(dataset, **{"augment.enable_rate": 0.0, "pipeline.shuffle_buffer": 0,
                                  "data.output_dtype": "uint8", **FULL})
    train = by_index(build_pipeline(cfg, keep_index=True))
    val = eval_u8
    for g in train:
        np.testing.assert_array_equal(train[g][0], val[g][0])


@pytest.fixture(scope="module")
def bad_data(tmp_path_factory, images) -> str:
    return write_bad_dataset(tmp_path_factory.mktemp("bad-gate"), images)


@pytest.fixture(scope="module")
def bad_val_u8(bad_data):
    """The uint8 eval rendering of bad_data by index: the same for both parameters of
    the gating test (it does not depend on `deterministic`), so built once."""
    return by_index(build_pipeline(base_config(bad_data, **{"data.output_dtype": "uint8"}),
                                   split="validation", keep_index=True))


def _planned_enabled(g: int, rate: float = 0.5, batch: int = 8) -> bool:
    """The enable coin of the batch sample g was planned in (docs/pipeline.md, Seeds)."""
    es = seeds.epoch_seed(seeds.global_seed(3), 0)
    return bool(batch_enabled(es, tf.constant(g // batch, tf.int64), rate))


def _delivered(ds) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    return [(b["index"].numpy(), b["image"].numpy(), b["label"].numpy()) for b in ds]


@pytest.mark.parametrize("deterministic", [True, False])
def test_enable_rate_gates_every_stage_per_sample(bad_data, bad_val_u8, deterministic):
    """Bad records shift samples into other batches than planned (and
    deterministic: false reorders them): every sample still follows its own
    decision in L2 AND L3 -- a plain one is exactly the eval rendering, an
    augmented one is not."""
    over = {"augment.enable_rate": 0.5, "pipeline.shuffle_buffer": 0,
            "data.output_dtype": "uint8", "pipeline.deterministic": deterministic,
            "pipeline.drop_remainder": False}
    got = _delivered(build_pipeline(base_config(bad_data, **over), keep_index=True))
    val = bad_val_u8
    assert sum(len(i) for i, _, _ in got) == NUM - len(BAD) == len(val)
    mixed = 0
    for index, images, _ in got:
        decisions = [_planned_enabled(int(g)) for g in index]
        mixed += len(set(decisions)) > 1
        for g, on, img in zip(index, decisions, images):
            plain = np.array_equal(img, val[int(g)][0])
            assert plain != on, f"sample {g}: enabled={on} but plain={plain}"
    assert mixed, "no batch mixes decisions: the case under test did not occur"


def test_mixup_with_disagreeing_rows_keeps_plain_rows_plain(bad_data):
    """L4 on a batch whose rows disagree: plain rows keep their eval image and
    their own one-hot label; enabled rows are mixed."""
    over = {"augment.enable_rate": 0.5, "pipeline.shuffle_buffer": 0,
            "pipeline.deterministic": False, "pipeline.drop_remainder": False,
            "augment.batch": {"mixup": {"alpha": 0.4}}}
    got = _delivered(build_pipeline(base_config(bad_data, **over), keep_index=True))
    val = by_index(build_pipeline(base_config(bad_data, **over), split="validation",
                                  keep_index=True))
    mixed_labels = mixed_batches = 0
    for index, images, labels in got:
        decisions = [_planned_enabled(int(g)) for g in index]
        mixed_batches += len(set(decisions)) > 1
        for g, on, img, y in zip(index, decisions, images, labels):
            if on:
                mixed_labels += y.max() < 1.0
                assert not np.array_equal(img, val[int(g)][0])
            else:
                np.testing.assert_array_equal(img, val[int(g)][0], err_msg=f"sample {g}")
                np.testing.assert_array_equal(y, val[int(g)][1])
                assert y.max() == 1.0
    assert mixed_batches and mixed_labels


def test_mixup_cutmix_one_hot_labels(dataset):
    cfg = base_config(dataset, **{"augment.batch": {"mixup": {"alpha": 0.4},
                                                    "cutmix": {"alpha": 1.0}}})
    x, y = next(iter(build_pipeline(cfg, as_supervised=True)))
    assert y.shape == (8, CLASSES) and y.dtype == tf.float32
    np.testing.assert_allclose(y.numpy().sum(axis=1), 1.0, atol=1e-5)
    assert (y.numpy().max(axis=1) < 1.0).any()  # some labels are actually mixed


def test_detection_enable_rate_gates_per_sample(tmp_path, images):
    """Detection reuses the same per-sample gate: with bad records and
    deterministic: false a plain sample is exactly the eval rendering (whole image
    resized, boxes unchanged), an augmented one (crop + flip + brightness) is not."""
    from .conftest import _example, write_shards

    recs = []
    for i, (enc, fmt, _) in enumerate(images[:40]):
        if i in (5, 17):
            enc = b"not an image"
        recs.append(_example(enc, fmt, 0, [[0.2, 0.2, 0.8, 0.8]], [1 + i % 3]))
    write_shards(tmp_path, "train", recs, 2, eval_links=True)
    path = str(tmp_path / "*.tfrecord")
    over = {"data.task": "detection", "data.max_boxes": 4, "data.output_dtype": "uint8",
            "augment.enable_rate": 0.5, "pipeline.shuffle_buffer": 0,
            "pipeline.drop_remainder": False, "pipeline.deterministic": False,
            "augment.pixel": {"brightness": {"max_delta": 0.4}}}
    got = [(b["index"].numpy(), b["image"].numpy(), b["boxes"].numpy())
           for b in build_pipeline(base_config(path, **over), keep_index=True)]
    val = {}
    for b in build_pipeline(base_config(path, **over), split="validation", keep_index=True):
        for i, g in enumerate(b["index"].numpy()):
            val[int(g)] = (b["image"][i].numpy(), b["boxes"][i].numpy())
    assert sum(len(i) for i, _, _ in got) == 38 == len(val)
    mixed = 0
    for index, imgs, boxes in got:
        decisions = [_planned_enabled(int(g)) for g in index]
        mixed += len(set(decisions)) > 1
        for g, on, img, box in zip(index, decisions, imgs, boxes):
            plain = np.array_equal(img, val[int(g)][0])
            assert plain != on, f"sample {g}: enabled={on} but plain={plain}"
            if not on:
                np.testing.assert_array_equal(box, val[int(g)][1])
    assert mixed
