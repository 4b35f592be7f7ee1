"""Detection end to end: boxes follow the geometry (image oracle), flips exact, padding."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A
from tfpipe import sample_data
from tfpipe.config import load_config
from tfpipe.errors import ConfigError
from tfpipe.pipeline import build_pipeline
from tfpipe.pipeline._classify import coin
from tfpipe.pipeline._detect import op_matrix
from tfpipe.pipeline._settings import Op, settings

from .conftest import _example, base_config, write_shards

H, W = 48, 64


@pytest.fixture(scope="module")
def det_dataset(tmp_path_factory) -> str:
    """24 PNGs: one white rectangle on black, its box (normalized yxyx) and class 1..3."""
    rng = np.random.default_rng(1)
    recs = []
    for i in range(24):
        y0, x0 = int(rng.integers(2, H // 2)), int(rng.integers(2, W // 2))
        y1, x1 = y0 + int(rng.integers(8, H // 2 - 2)), x0 + int(rng.integers(8, W // 2 - 2))
        img = np.zeros((H, W, 3), np.uint8)
        img[y0:y1, x0:x1] = 255
        box = [y0 / H, x0 / W, y1 / H, x1 / W]
        recs.append(_example(sample_data.encode(img, "png"), "png", 0, [box], [1 + i % 3]))
    out = Path(tmp_path_factory.mktemp("det"))
    write_shards(out, "train", recs, 2, eval_links=True)
    return str(out / "*.tfrecord")


def _cfg(path, **over):
    cfg = base_config(path, **{"data.task": "detection", "data.max_boxes": 5,
                               "data.output_dtype": "uint8", "augment.pixel": {},
                               "pipeline.drop_remainder": False, **over})
    return cfg


def _mask_box(img: np.ndarray) -> np.ndarray:
    """Normalized yxyx box of the bright pixels (edges: first/last bright pixel +- 0.5)."""
    ys, xs = np.nonzero(img[..., 0] >= 128)
    h, w = img.shape[:2]
    return np.array([ys.min() / h, xs.min() / w, (ys.max() + 1) / h, (xs.max() + 1) / w])


def test_boxes_follow_random_crop_and_flip(det_dataset):
    cfg = _cfg(det_dataset, **{"augment.geometry": {
        "random_resized_crop": {"scale": [0.6, 1.0], "ratio": [0.75, 1.3333]},
        "flip": {"horizontal": True, "p": 0.5}}})
    checked = 0
    for b in build_pipeline(cfg):
        assert b["image"].shape[1:] == (32, 32, 3)
        assert b["boxes"].shape[1:] == (5, 4) and b["classes"].shape[1:] == (5,)
        for img, boxes, classes, n in zip(b["image"].numpy(), b["boxes"].numpy(),
                                          b["classes"].numpy(), b["num_boxes"].numpy()):
            assert np.all(classes[n:] == -1) and np.all(boxes[n:] == 0)
            if n == 0:
                assert (img[..., 0] >= 128).sum() < 8  # box cropped away: (almost) nothing left
                continue
            assert n == 1 and classes[0] in (1, 2, 3)
            # oracle: the box of the bright pixels in the OUTPUT image (bilinear blur: 1 px)
            np.testing.assert_allclose(boxes[0], _mask_box(img), atol=1.01 / 32)
            checked += 1
    assert checked >= 12


def test_flip_moves_boxes_exactly(det_dataset):
    flip = _cfg(det_dataset, **{"augment.geometry": {"flip": {"horizontal": True, "p": 1.0}},
                                "pipeline.shuffle_buffer": 0})
    plain = next(iter(build_pipeline(flip, split="validation", keep_index=True)))
    flipped = next(iter(build_pipeline(flip, keep_index=True)))
    np.testing.assert_array_equal(plain["index"], flipped["index"])
    p, f = plain["boxes"].numpy()[:, 0], flipped["boxes"].numpy()[:, 0]
    np.testing.assert_allclose(f[:, 0], p[:, 0], atol=1e-6)
    np.testing.assert_allclose(f[:, 2], p[:, 2], atol=1e-6)
    np.testing.assert_allclose(f[:, 1], 1.0 - p[:, 3], atol=1e-6)
    np.testing.assert_allclose(f[:, 3], 1.0 - p[:, 1], atol=1e-6)
    diff = np.abs(flipped["image"].numpy().astype(int) - plain["image"].numpy()[:, :, ::-1].astype(int))
    assert diff.max() <= 1  # one affine resample vs resize-then-reverse: rounding only


def test_detection_float_output_mosaic_and_supervised(det_dataset):
    cfg = _cfg(det_dataset, **{"data.output_dtype": "float32",
                               "augment.pixel": {"brightness": {"max_delta": 0.2}},
                               "augment.batch": {"mosaic": {"p": 1.0}}})
    x, target = next(iter(build_pipeline(cfg, as_supervised=True)))
    assert x.dtype == tf.float32 and x.shape == (8, 32, 32, 3)
    assert set(target) == {"boxes", "classes", "num_boxes"}
    n = target["num_boxes"].numpy()
    assert n.max() >= 2  # mosaic combines the boxes of 4 images
    valid = target["boxes"].numpy()[np.arange(5)[None, :] < n[:, None]]
    assert np.all((valid >= 0) & (valid <= 1)) and np.all(valid[:, 2] > valid[:, 0])


def test_detection_mixup_keeps_both_box_sets(det_dataset):
    cfg = _cfg(det_dataset, **{"augment.geometry": {}, "augment.batch": {"mixup": {"p": 1.0}}})
    b = next(iter(build_pipeline(cfg)))
    n, w = b["num_boxes"].numpy(), b["box_weights"].numpy()
    assert (n == 2).all()  # own box + partner's box
    np.testing.assert_allclose(w[:, 0] + w[:, 1], 1.0, atol=1e-6)  # lambda + (1 - lambda)
    assert np.all(w[:, 2:] == 0)


# ---------------------------------------------------------------- bug 5: config keys
# Every key here was silently ignored before: the image was always resampled bilinear
# with a constant fill (the first affine's fill_value), whatever the config said.
@pytest.fixture(scope="module")
def gray_dataset(tmp_path_factory) -> tuple[str, np.ndarray]:
    """12 PNGs, one shard: uniform gray 128 with a white box. Anything outside the
    source that a constant fill paints is < 128; reflect / nearest keep it >= 128."""
    rng = np.random.default_rng(2)
    recs, imgs = [], []
    for i in range(12):
        img = np.full((H, W, 3), 128, np.uint8)
        y0, x0 = int(rng.integers(4, H // 2)), int(rng.integers(4, W // 2))
        img[y0:y0 + 12, x0:x0 + 16] = 255
        imgs.append(img)
        recs.append(_example(sample_data.encode(img, "png"), "png", 0,
                             [[y0 / H, x0 / W, (y0 + 12) / H, (x0 + 16) / W]], [1]))
    out = Path(tmp_path_factory.mktemp("det-gray"))
    write_shards(out, "train", recs, 1)
    return str(out / "train-*.tfrecord"), np.stack(imgs)


def _images(cfg) -> np.ndarray:
    return np.concatenate([b["image"].numpy() for b in build_pipeline(cfg)])


def _geo(path, geometry, **over):
    return _cfg(path, **{"augment.geometry": geometry, **over})


SHRINK = {"scale": [0.6, 0.6]}  # every sample leaves a border outside the source


def test_affine_interpolation_nearest_is_honoured(det_dataset):
    geo = {"affine": {"rotation": 20.0, "scale": [0.8, 1.2], "interpolation": "nearest"}}
    nearest = _images(_geo(det_dataset, geo))
    # oracle: nearest-neighbour resampling only ever copies source pixels (0 or 255)
    assert set(np.unique(nearest)) <= {0, 255}
    geo["affine"]["interpolation"] = "bilinear"
    assert len(set(np.unique(_images(_geo(det_dataset, geo))))) > 2  # the test can fail


def test_affine_interpolation_bicubic_matches_tf_resize(tmp_path):
    """Identity affine + the final resize: TF's own bicubic resize (Keys a=-0.5,
    half-pixel centres, no antialias) is the oracle away from the border."""
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    write_shards(tmp_path, "train", [_example(sample_data.encode(img, "png"), "png", 0,
                                              [[0.1, 0.1, 0.6, 0.6]], [1])], 1)
    cfg = _geo(str(tmp_path / "train-*.tfrecord"), {"affine": {"interpolation": "bicubic"}})
    out = _images(cfg)[0].astype(np.float64)
    ref = tf.image.resize(img.astype(np.float32), (32, 32), method="bicubic",
                          antialias=False).numpy()
    ref = np.clip(np.round(ref), 0, 255)
    inner = (slice(2, -2), slice(2, -2))
    assert np.abs(out[inner] - ref[inner]).max() <= 1.0
    bilinear = tf.image.resize(img.astype(np.float32), (32, 32), antialias=False).numpy()
    assert np.abs(np.round(bilinear)[inner] - ref[inner]).max() > 8  # bicubic is not bilinear


@pytest.mark.parametrize("mode", ["reflect", "nearest"])
def test_affine_fill_mode_is_honoured(gray_dataset, mode):
    path, _ = gray_dataset
    constant = _images(_geo(path, {"affine": {**SHRINK, "fill_value": 0.0}}))
    assert (constant[:, 0, 0] == 0).all()  # corners lie outside the shrunk source
    out = _images(_geo(path, {"affine": {**SHRINK, "fill_mode": mode}}))
    assert out.min() >= 127, (mode, out.min())  # no fill anywhere: only source pixels


def test_affine_fill_value_is_honoured(gray_dataset):
    path, _ = gray_dataset
    out = _images(_geo(path, {"affine": {**SHRINK, "fill_value": 37.0}}))
    np.testing.assert_array_equal(out[:, 0, 0], 37)


@pytest.mark.parametrize("mode", ["reflect", "nearest"])
def test_pad_and_crop_fill_mode_is_honoured(gray_dataset, mode):
    path, _ = gray_dataset
    constant = _images(_geo(path, {"pad_and_crop": {"padding": 8}}))
    assert (constant == 0).any()  # shifted samples show the 0 padding
    out = _images(_geo(path, {"pad_and_crop": {"padding": 8, "fill_mode": mode}}))
    assert out.min() >= 127, (mode, out.min())


def test_one_fill_for_affine_and_pad_and_crop(gray_dataset):
    path, _ = gray_dataset
    out = _images(_geo(path, {"affine": {**SHRINK, "fill_mode": "reflect"},
                              "pad_and_crop": {"padding": 8, "fill_mode": "reflect"}}))
    assert out.min() >= 127


@pytest.mark.parametrize(("geometry", "keys"), [
    ({"affine": {"fill_mode": "reflect"}, "pad_and_crop": {"padding": 4}},
     ["augment.geometry.affine.fill_mode = 'reflect'",
      "augment.geometry.pad_and_crop.fill_mode = 'constant'", "constant, reflect, nearest"]),
    ({"affine": {"fill_value": 114.0}, "pad_and_crop": {"padding": 4}},
     ["augment.geometry.affine.fill_value = 114", "augment.geometry.pad_and_crop.fill_mode"]),
])
def test_conflicting_fill_keys_are_a_config_error(det_dataset, geometry, keys):
    with pytest.raises(ConfigError) as info:
        build_pipeline(_geo(det_dataset, geometry))
    for key in keys:
        assert key in str(info.value)


def test_random_resized_crop_interpolation(det_dataset):
    """The config has no random_resized_crop.interpolation (classification's fused crop
    is bilinear): it is rejected by name. A Settings that carries one is honoured, and
    one that disagrees with the affine's is an error naming both keys."""
    with pytest.raises(ConfigError, match=r"augment\.geometry\.random_resized_crop\."
                                          r"interpolation: unknown key"):
        build_pipeline(_geo(det_dataset, {"random_resized_crop": {"interpolation": "nearest"}}))
    s = settings(load_config(_geo(det_dataset, {"random_resized_crop": {"scale": [0.5, 1.0]}})))
    (rrc,) = s.geometry
    nearest = replace(rrc, params={**rrc.params, "interpolation": "nearest"})
    out = _images(replace(s, geometry=(nearest,)))
    assert set(np.unique(out)) <= {0, 255}
    assert len(set(np.unique(_images(s)))) > 2
    affine = settings(load_config(_geo(det_dataset, {"affine": {"interpolation": "bicubic"}})))
    with pytest.raises(ConfigError, match=r"random_resized_crop\.interpolation = 'nearest'.*"
                                          r"affine\.interpolation = 'bicubic'"):
        build_pipeline(replace(s, geometry=(nearest, *affine.geometry)))


def test_unhonoured_param_is_a_config_error(det_dataset):
    s = settings(load_config(_geo(det_dataset, {"flip": {}, "pad_and_crop": {}})))
    flip, pad = s.geometry
    with pytest.raises(ConfigError, match=r"augment\.geometry\.flip\.interpolation: not "
                                          r"supported for detection"):
        build_pipeline(replace(s, geometry=(replace(flip, params={
            **flip.params, "interpolation": "nearest"}), pad)))
    with pytest.raises(ConfigError, match=r"augment\.geometry\.pad_and_crop\.fill_mode: "
                                          r"'wrap' is not supported; allowed: constant"):
        build_pipeline(replace(s, geometry=(flip, replace(pad, params={
            **pad.params, "fill_mode": "wrap"}))))


# ----------------------------------------- detection draws = the augment samplers' draws
SEEDS = [tf.constant([s, 11 * s + 1], tf.int64) for s in range(8)]
SIZES = [(40, 56), (31, 23)]


def _op(geometry: dict) -> Op:
    cfg = load_config({"data": {"task": "detection"}, "augment": {"geometry": geometry}})
    (op,) = settings(cfg).geometry
    return op


def _same(op: Op, public) -> None:  # type: ignore[no-untyped-def]
    """op_matrix(op, seed) == the public sampler's matrix (and size) for every seed/size."""
    for h, w in SIZES:
        image = tf.zeros([h, w, 3], tf.uint8)
        for seed in SEEDS:
            m, (nh, nw) = op_matrix(op, seed, (tf.constant(h), tf.constant(w)), (24, 24))
            out, ref = public(image, seed)
            np.testing.assert_array_equal(m.numpy(), ref.numpy())
            assert (int(nh), int(nw)) == tuple(out.shape[:2])


def _gated(op: Op, public):  # type: ignore[no-untyped-def]
    """With p < 1 the op applies under classification's coin (identity otherwise)."""
    def run(image, seed):  # type: ignore[no-untyped-def]
        out, m = public(image, seed)
        on = bool(coin(seed, op.p))
        return (out, m) if on else (image, tf.eye(3))
    return run


@pytest.mark.parametrize("p", [1.0, 0.5])
def test_flip_draws_are_random_flip(p):
    op = _op({"flip": {"horizontal": True, "vertical": True, "p": p}})
    _same(op, lambda im, s: A.random_flip(im, s, True, True, p))


@pytest.mark.parametrize("p", [1.0, 0.6])
def test_rot90_draws_are_random_rot90(p):
    _same(_op({"rot90": {"p": p}}), lambda im, s: A.random_rot90(im, s, p))


@pytest.mark.parametrize("p", [1.0, 0.5])
def test_random_resized_crop_draws_are_the_sampler(p):
    op = _op({"random_resized_crop": {"scale": [0.2, 0.9], "ratio": [0.5, 2.0], "p": p}})
    _same(op, _gated(op, lambda im, s: A.random_resized_crop(im, s, (24, 24), (0.2, 0.9),
                                                              (0.5, 2.0))))


@pytest.mark.parametrize("p", [1.0, 0.5])
def test_affine_draws_are_random_affine(p):
    prm = {"rotation": 25.0, "scale": [0.7, 1.3], "per_axis_scale": True, "shear": 10.0,
           "translate": [0.1, 0.2]}
    op = _op({"affine": {**prm, "p": p}})
    _same(op, _gated(op, lambda im, s: A.random_affine(
        im, s, rotation=25.0, scale=(0.7, 1.3), per_axis_scale=True, shear=10.0,
        translate=(0.1, 0.2))))


@pytest.mark.parametrize("p", [1.0, 0.5])
def test_pad_and_crop_draws_are_the_sampler(p):
    op = _op({"pad_and_crop": {"padding": 5, "p": p}})
    _same(op, _gated(op, lambda im, s: A.pad_and_crop(im, s, 5)))


def test_label_offset_shifts_box_classes_not_padding(det_dataset):
    """data.label_offset (1-based box classes, COCO-style): every real box's class
    minus the offset, the padding stays -1. Before: the key did not exist."""
    cfg = _cfg(det_dataset, **{"augment.geometry": {}, "pipeline.shuffle_buffer": 0})
    plain = next(iter(build_pipeline(cfg, split="validation")))
    shifted = next(iter(build_pipeline({**cfg, "data": {**cfg["data"], "label_offset": 1}},
                                       split="validation")))
    n = plain["num_boxes"].numpy()
    want = plain["classes"].numpy().copy()
    for row, k in enumerate(n):
        want[row, :k] -= 1
    np.testing.assert_array_equal(shifted["classes"].numpy(), want)
    assert (want[:, 0] >= 0).all() and (want[:, 1:] == -1).all()
    np.testing.assert_array_equal(shifted["boxes"].numpy(), plain["boxes"].numpy())
