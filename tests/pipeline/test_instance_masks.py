"""Instance masks through the detection pipeline (issue #24): every geometric op and a
random composition against an independent NumPy nearest application of (box-crop
matrix o the op's matrix) to the source mask, pixel-exact; eval; objects cut away
lose their masks; bad records; config errors; off = the detection outputs as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A
from tfpipe import seeds
from tfpipe.config import load_config
from tfpipe.errors import ConfigError
from tfpipe.pipeline import build_pipeline, hashed_settings
from tfpipe.pipeline._detect_geometry import op_matrix
from tfpipe.pipeline._plan import SampleSeeds
from tfpipe.pipeline._settings import settings

from .conftest import base_config
from .instance_data import (boxes_through, crop_matrix, painted_sample, png, warp_nearest,
                            write_dataset)

OUT = (40, 48)
S = (12, 10)  # not square: the two axes cannot be swapped unnoticed
MAX_BOXES = 3  # some records have 4 objects: the cut is checked too


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[str, list]:
    """10 records of varied sizes, 1-4 painted objects each (train and validation)."""
    rng = np.random.default_rng(11)
    samples, sources = [], []
    for i in range(10):
        h, w = int(rng.integers(33, 61)), int(rng.integers(37, 71))
        img, boxes, masks = painted_sample(rng, h, w, 1 + i % 4)
        sources.append((img, boxes, masks))
        samples.append((img, boxes, [png(m) for m in masks]))
    path = write_dataset(Path(tmp_path_factory.mktemp("inst")), samples)
    return path, sources


def _cfg(path: str, geometry: dict | None = None, **over) -> dict:
    cfg = base_config(path, **{
        "data.task": "detection", "data.image_size": list(OUT), "data.max_boxes": MAX_BOXES,
        "data.output_dtype": "uint8", "data.instance_masks": {"size": list(S)},
        "augment.pixel": {}, "augment.geometry": geometry or {}, "pipeline.batch_size": 5,
        "pipeline.shuffle_buffer": 1, "pipeline.drop_remainder": False, **over})
    del cfg["data"]["num_classes"]
    return cfg


def _run(cfg: dict, split: str = "train", **kw) -> dict[str, np.ndarray]:
    batches = list(build_pipeline(cfg, split, keep_index=True, **kw))
    return {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}


def _matrix(cfg: dict, index: int, hw: tuple[int, int], epoch: int = 0) -> np.ndarray:
    """The sample's matrix from the ops' own draws (`op_matrix`: the public samplers'
    draws, tested in test_detection.py) composed with the final resize."""
    s = settings(load_config(cfg))
    es = seeds.epoch_seed(seeds.global_seed(s.seed), epoch)
    sseed = SampleSeeds(es, 0, 1, s.batch_size).op_seeds(tf.constant(index, tf.int64))
    cur = (tf.constant(hw[0]), tf.constant(hw[1]))
    mats = []
    for k, op in enumerate(s.active("geometry")):
        mk, cur = op_matrix(op, sseed(k), cur, OUT)
        mats.append(mk)
    mats.append(A.resize_matrix(cur, OUT))
    return A.compose(*mats).numpy()


def _check(got: dict[str, np.ndarray], sources: list, matrix) -> tuple[int, int]:
    """Every sample: boxes = the NumPy corners through M (kept, in order, cut to
    max_boxes); each mask = the NumPy nearest warp of the source mask through
    (box-crop matrix o M) onto S; padding rows 0. Returns (objects, cut away)."""
    assert got["instance_masks"].dtype == np.uint8
    assert got["instance_masks"].shape[1:] == (MAX_BOXES, *S)
    objects = cut = 0
    for j, idx in enumerate(got["index"]):
        img, boxes, masks = sources[int(idx)]
        m = matrix(int(idx), img.shape[:2]).astype(np.float64)
        want, keep = boxes_through(boxes, m, img.shape[:2], OUT)
        kept = np.nonzero(keep)[0][:MAX_BOXES]
        n = int(got["num_boxes"][j])
        assert n == len(kept), (idx, n, kept)
        np.testing.assert_allclose(got["boxes"][j, :n], want[kept], atol=1e-5)
        for r, k in enumerate(kept):
            # the crop matrix of the OUTPUT box (as given, float32: ties stay ties)
            c = crop_matrix(got["boxes"][j, r], OUT, S)
            ref = warp_nearest(masks[k], c @ m, S)
            bad = np.count_nonzero(got["instance_masks"][j, r] != ref)
            assert bad == 0, f"sample {idx} object {k}: {bad} of {ref.size} pixels off"
        assert not got["instance_masks"][j, n:].any()  # padding
        objects += n
        cut += int(np.count_nonzero(~keep))
    return objects, cut


# every op of the detection geometry, each with p < 1 (samples with and without it), in
# one chain; each op alone is checked against its public sampler's matrix in
# tests/augment/test_instance_masks.py
COMPOSITION = {"random_resized_crop": {"scale": [0.03, 0.6], "p": 0.9},
               "rot90": {"p": 0.5}, "flip": {"horizontal": True, "vertical": True, "p": 0.5},
               "affine": {"rotation": 25.0, "scale": [0.7, 1.2], "shear": 8.0,
                          "translate": [0.1, 0.1], "p": 0.7},
               "pad_and_crop": {"padding": 4, "p": 0.5}}


def test_masks_follow_the_geometry_pixel_exact_and_cut_objects_lose_them(data):
    path, sources = data
    cfg = _cfg(path, COMPOSITION, **{"pipeline.batch_size": 10})
    got = _run(cfg)
    assert sorted(got["index"]) == list(range(len(sources)))
    objects, cut = _check(got, sources, lambda i, hw: _matrix(cfg, i, hw))
    assert objects >= 8 and cut >= 1


def test_eval_is_the_resize(data):
    path, sources = data
    cfg = _cfg(path, COMPOSITION)  # eval ignores the train geometry
    got = _run(cfg, "validation")
    objects, _ = _check(got, sources, lambda i, hw: A.resize_matrix(hw, OUT).numpy())
    assert objects == sum(min(len(b), MAX_BOXES) for _, b, _ in sources)


@pytest.fixture(scope="module")
def batch_runs(data) -> tuple[dict, dict]:
    """(instance masks on, off): the same train config with mosaic and mixup, gated
    per sample (enable_rate < 1)."""
    path, _ = data
    on = _cfg(path, {"random_resized_crop": {"scale": [0.5, 1.0]}, "flip": {"p": 0.5},
                     "affine": {"rotation": 15.0}},
              **{"augment.batch": {"mosaic": {"p": 0.7}, "mixup": {"p": 0.5}},
                 "augment.enable_rate": 0.8, "pipeline.batch_size": 10})
    off = {**on, "data": {k: v for k, v in on["data"].items() if k != "instance_masks"}}
    return _run(on), _run(off)


def test_off_leaves_detection_outputs_bit_identical(data, batch_runs):
    a, b = batch_runs
    assert set(a) - set(b) == {"instance_masks"}
    for k in b:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    path, _ = data
    off = _cfg(path)
    del off["data"]["instance_masks"]
    # the config's dict and the settings' hash are those of before when off
    assert "instance_masks" not in load_config(off).to_dict()["data"]
    assert "instance_masks" not in hashed_settings(settings(off))
    assert hashed_settings(settings(_cfg(path)))["instance_masks"] == list(S)


def test_mosaic_and_mixup_carry_masks(batch_runs):
    """Through the batch ops the masks stay aligned with their boxes: real rows have
    a mask, padding rows are 0; masks painted as their object's shape stay on its
    pixels (the property below) in the samples mixup did not blend."""
    got, _ = batch_runs
    n = got["num_boxes"]
    assert n.max() == MAX_BOXES
    filled = [got["instance_masks"][j, :n[j]].reshape(n[j], -1).any(axis=1) for j in range(len(n))]
    assert np.concatenate(filled).mean() > 0.9
    for j in range(len(n)):
        assert not got["instance_masks"][j, n[j]:].any()
    plain = (got["box_weights"] == (np.arange(MAX_BOXES)[None, :] < n[:, None])).all(axis=1)
    shares = _paint_check({k: v[plain] for k, v in got.items()})
    assert len(shares) >= 6 and np.median(shares) >= 0.9 and shares.mean() >= 0.8, shares


def _paint_check(got: dict[str, np.ndarray]) -> np.ndarray:
    """Each object's crop, put back into its box in the output image (nearest): the
    share of the lit pixels under it that have the object's hue (bilinear blends
    colours with black holes and edges, so hues are compared, and dark pixels --
    holes, background -- are left out), per object with enough of them."""
    palette = np.array([colour_of(k) for k in range(5)], float)
    palette /= np.linalg.norm(palette, axis=1, keepdims=True)
    shares = []
    for j in range(len(got["num_boxes"])):
        img = got["image"][j].astype(float)
        for r in range(int(got["num_boxes"][j])):
            y0, x0, y1, x1 = got["boxes"][j, r]
            iy = np.floor(((np.arange(OUT[0]) + 0.5) / OUT[0] - y0) / (y1 - y0) * S[0]).astype(int)
            ix = np.floor(((np.arange(OUT[1]) + 0.5) / OUT[1] - x0) / (x1 - x0) * S[1]).astype(int)
            iny, inx = (iy >= 0) & (iy < S[0]), (ix >= 0) & (ix < S[1])
            on = np.zeros(OUT, bool)
            on[np.ix_(iny, inx)] = got["instance_masks"][j, r][np.ix_(iy[iny], ix[inx])] > 0
            px = img[on & (img.max(axis=-1) >= 60)]
            if len(px) < 12:
                continue
            hue = (px @ palette.T).argmax(axis=1)  # (norms of px do not change argmax)
            shares.append(np.mean(hue == int(got["classes"][j, r]) % 5))
    return np.array(shares)


def colour_of(cls: int) -> tuple[int, int, int]:
    from .instance_data import colour

    return colour(cls)


def test_bad_records_follow_the_error_policy(tmp_path):
    """A mask count that differs from the box count, an undecodable mask, a mask of
    another size: the record is skipped (counted) or raised, naming it; the others pass."""
    rng = np.random.default_rng(3)
    samples = []
    for i in range(4):
        img, boxes, masks = painted_sample(rng, 30, 34, 2)
        enc = [png(m) for m in masks]
        if i == 1:
            enc = enc[:1]
        elif i == 2:
            enc[1] = b"not a png"
        elif i == 3:
            enc[0] = png(np.zeros((20, 20), np.uint8))
        samples.append((img, boxes, enc))
    path = write_dataset(tmp_path / "bad", samples, ("train",))
    cfg = _cfg(path, **{"pipeline.on_error": "skip"})
    got = _run(cfg)
    assert list(got["index"]) == [0]
    with pytest.raises(tf.errors.InvalidArgumentError, match="record 1"):
        _run(_cfg(path, **{"pipeline.on_error": "raise"}))


def test_config_errors(data, tmp_path):
    path, _ = data
    with pytest.raises((ConfigError, ValueError), match="data.instance_masks: needs data.task "
                                                        "'detection'"):
        load_config(base_config(path, **{"data.instance_masks": {"size": 28}}))
    cfg = load_config(_cfg(path, **{"data.instance_masks": {}}))
    assert cfg.data.instance_masks.size == (28, 28)
    assert settings(cfg).instance_masks == (28, 28)
    # records without image/object/mask: named, with the keys they have
    rng = np.random.default_rng(0)
    img, boxes, _ = painted_sample(rng, 20, 20, 1)
    from tfpipe.records import (Manifest, ShardedWriter, ShardEntry, SplitInfo,
                                detection_schema, encode_example)

    schema = detection_schema()
    out = tmp_path / "plain"
    with ShardedWriter(out, "train") as w:
        w.write(encode_example({"image/encoded": png(img), "image/format": b"png",
                                "image/height": 20, "image/width": 20,
                                "image/object/bbox/ymin": [0.1], "image/object/bbox/xmin": [0.1],
                                "image/object/bbox/ymax": [0.5], "image/object/bbox/xmax": [0.5],
                                "image/object/class/label": [0]}, schema))
    m = Manifest(schema=schema, class_names=["a"])
    m.splits["train"] = SplitInfo([ShardEntry.from_info(i, out) for i in w.infos])
    m.save(out)
    with pytest.raises(ConfigError, match=r"data.instance_masks: .*no 'image/object/mask'.*"
                                          r"image/object/bbox/xmin"):
        build_pipeline(_cfg(str(out)), "train")


def test_preview_paints_each_mask_inside_its_box():
    """A 4x4 crop whose left half is set, in the box [0.25, 0.75]^2 of a 40x40 black
    image: exactly pixels rows 10-29, columns 10-19 get the class colour's blend."""
    from tfpipe.pipeline.preview import MASK_ALPHA, PALETTE, draw_grid, paste_instance_masks

    crop = np.zeros((2, 4, 4), np.uint8)
    crop[0, :, :2] = 1
    crop[1] = 1  # a padding row: never drawn
    sample = {"image": np.zeros((40, 40, 3), np.uint8), "num_boxes": np.int32(1),
              "boxes": np.array([[0.25, 0.25, 0.75, 0.75], [0, 0, 1, 1]], np.float32),
              "classes": np.array([2, -1]), "instance_masks": crop}
    out = paste_instance_masks(sample["image"], sample)
    want = np.zeros((40, 40, 3), np.uint8)
    want[10:30, 10:20] = np.rint(MASK_ALPHA * np.array(PALETTE[2])).astype(np.uint8)
    np.testing.assert_array_equal(out, want)
    assert draw_grid([sample]).size[0] > 0
