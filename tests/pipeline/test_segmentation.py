"""Segmentation end to end: the mask follows every geometric op through the image's
matrix (an independent NumPy nearest warp is the oracle), eval letterbox, batch ops,
as_supervised, seeds / resume / bad records as the other tasks."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A
from tfpipe import seeds
from tfpipe.config import load_config
from tfpipe.errors import ConfigError
from tfpipe.pipeline import build_pipeline, stream_offset
from tfpipe.pipeline._detect_geometry import op_matrix
from tfpipe.pipeline._plan import SampleSeeds
from tfpipe.pipeline._settings import settings

from .conftest import base_config, write_shards

OUT = (40, 48)
IGNORE = 255


def _png(a: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG")
    return buf.getvalue()


def _example(image: np.ndarray, mask: np.ndarray) -> bytes:
    def b(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    feat = {"image/encoded": b(_png(image)), "image/format": b(b"png"),
            "image/segmentation/class/encoded": b(_png(mask)),
            "image/segmentation/class/format": b(b"png")}
    return tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString()


def _noise(n: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random RGB noise images of varied sizes, and masks of random classes 0..4 with
    some ignore: any misplaced pixel shows."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        h, w = int(rng.integers(37, 70)), int(rng.integers(41, 90))
        # no multiple of 16: such sizes resized to 40 / 48 put source coordinates
        # exactly on half pixels (nearest ties), where float32 may round either way
        h, w = h + (h % 16 == 0), w + (w % 16 == 0)
        img = rng.integers(1, 256, (h, w, 3), dtype=np.uint8)  # 0 only in the fill
        mask = rng.integers(0, 5, (h, w), dtype=np.uint8)
        mask[rng.random((h, w)) < 0.05] = IGNORE
        out.append((img, mask))
    return out


@pytest.fixture(scope="module")
def noise_data(tmp_path_factory) -> tuple[str, list[tuple[np.ndarray, np.ndarray]]]:
    """10 records in ONE shard (record i = sample index i with shuffle_buffer 1)."""
    pairs = _noise(10, 5)
    out = Path(tmp_path_factory.mktemp("seg-noise"))
    write_shards(out, "train", [_example(i, m) for i, m in pairs], 1, eval_links=True)
    return str(out / "*.tfrecord"), pairs


def _cfg(path: str, geometry: dict | None = None, **over) -> dict:
    return base_config(path, **{
        "data.task": "segmentation", "data.image_size": list(OUT), "data.num_classes": 5,
        "data.output_dtype": "uint8", "augment.pixel": {},
        "augment.geometry": geometry or {}, "pipeline.batch_size": 4,
        "pipeline.shuffle_buffer": 1, "pipeline.drop_remainder": False, **over})


def _run(cfg: dict, split: str = "train", **kw) -> dict[str, np.ndarray]:
    batches = list(build_pipeline(cfg, split, keep_index=True, **kw))
    return {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}


# ------------------------------------------------------------------ the oracle
def nearest_warp(src: np.ndarray, m: np.ndarray, out_hw: tuple[int, int], fill: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """NumPy nearest-neighbour warp: output pixel centre (x, y) (integers, as geometry.py)
    maps through M^-1 (float64) to the source; the nearest source pixel (round half
    away from zero, as ImageProjectiveTransform's nearest) or `fill` outside.
    Returns (lo, hi): per pixel the values of the two candidates when the source
    coordinate is within 1e-3 of a half-pixel tie (float32 rounding in the kernel may
    pick either), else the same value twice."""
    h, w = src.shape[:2]
    inv = np.linalg.inv(m.astype(np.float64))
    ys, xs = np.mgrid[0:out_hw[0], 0:out_hw[1]].astype(np.float64)
    sx = inv[0, 0] * xs + inv[0, 1] * ys + inv[0, 2]
    sy = inv[1, 0] * xs + inv[1, 1] * ys + inv[1, 2]

    def pick(cx: np.ndarray, cy: np.ndarray) -> np.ndarray:
        ix = np.sign(cx) * np.floor(np.abs(cx) + 0.5)  # half away from zero
        iy = np.sign(cy) * np.floor(np.abs(cy) + 0.5)
        inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
        ixc = np.clip(ix, 0, w - 1).astype(int)
        iyc = np.clip(iy, 0, h - 1).astype(int)
        vals = src[iyc, ixc]
        cond = inside if src.ndim == 2 else inside[..., None]
        return np.where(cond, vals, fill)

    eps = 1e-3
    tie_x = np.abs(np.abs(sx - np.floor(sx)) - 0.5) < eps
    tie_y = np.abs(np.abs(sy - np.floor(sy)) - 0.5) < eps
    lo = pick(np.where(tie_x, sx - 2 * eps, sx), np.where(tie_y, sy - 2 * eps, sy))
    hi = pick(np.where(tie_x, sx + 2 * eps, sx), np.where(tie_y, sy + 2 * eps, sy))
    return lo, hi


def _agrees(got: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    ok = (got == lo) | (got == hi)
    return ok if ok.ndim == 2 else ok.all(axis=-1)


def _matrices(cfg: dict, indices: np.ndarray, pairs, epoch: int = 0) -> list[np.ndarray]:
    """Each sample's matrix: the ops' draws from the sample's seeds (the public
    samplers behind `op_matrix`), composed with the final resize."""
    s = settings(load_config(cfg))
    es = seeds.epoch_seed(seeds.global_seed(s.seed), epoch)
    ss = SampleSeeds(es, 0, 1, s.batch_size)
    ops = s.active("geometry")
    out = []
    for i in indices:
        img = pairs[int(i)][0]
        sseed = ss.op_seeds(tf.constant(int(i), tf.int64))
        cur = (tf.constant(img.shape[0]), tf.constant(img.shape[1]))
        mats = []
        for k, op in enumerate(ops):
            mk, cur = op_matrix(op, sseed(k), cur, OUT)
            mats.append(mk)
        mats.append(A.resize_matrix(cur, OUT))
        out.append(A.compose(*mats).numpy())
    return out


# the chain's kernel is the affine's: an identity affine makes it nearest, so the image
# too can be checked pixel-exact against the NumPy warp
NEAREST = {"affine": {"interpolation": "nearest"}}
GEOMETRIES = {
    "random_resized_crop": {"random_resized_crop": {"scale": [0.2, 1.0]}, **NEAREST},
    "center_crop": {"center_crop": {"crop_fraction": 0.7}, **NEAREST},
    "flip": {"flip": {"horizontal": True, "vertical": True, "p": 0.5}, **NEAREST},
    "rot90": {"rot90": {"p": 0.75}, **NEAREST},
    "affine": {"affine": {"rotation": 30.0, "scale": [0.6, 1.3], "shear": 10.0,
                          "translate": [0.2, 0.2], "interpolation": "nearest"}},
    "pad_and_crop": {"pad_and_crop": {"padding": 6}, **NEAREST},
    "composition": {
        "rot90": {"p": 0.5},
        "random_resized_crop": {"scale": [0.3, 1.0]},
        "flip": {"horizontal": True, "p": 0.5},
        "affine": {"rotation": 15.0, "scale": [0.8, 1.2], "interpolation": "nearest"}},
}


@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_mask_and_image_follow_every_op_exactly(noise_data, name):
    """Pixel-exact: the mask is the NumPy nearest warp of the source mask (fill
    ignore), the image (nearest here) the NumPy nearest warp of the source image
    (fill 0), both with the sample's matrix: one matrix for both."""
    path, pairs = noise_data
    cfg = _cfg(path, GEOMETRIES[name])
    got = _run(cfg)
    assert got["mask"].dtype == np.int32 and got["mask"].shape[1:] == (*OUT, 1)
    ties = 0
    for j, (idx, m) in enumerate(zip(got["index"], _matrices(cfg, got["index"], pairs))):
        img, mask = pairs[int(idx)]
        lo, hi = nearest_warp(mask, m, OUT, IGNORE)
        ok = _agrees(got["mask"][j, ..., 0], lo, hi)
        assert ok.all(), f"{name}: sample {idx}: {np.count_nonzero(~ok)} mask pixels off"
        ilo, ihi = nearest_warp(img, m, OUT, 0)
        ok = _agrees(got["image"][j], ilo, ihi)
        assert ok.all(), f"{name}: sample {idx}: {np.count_nonzero(~ok)} image pixels off"
        ties += np.count_nonzero(lo != hi)
    # the tolerance is for exact half-pixel ties only: most pixels are checked exactly
    assert ties < 0.1 * got["mask"].size, ties


def test_mask_follows_bilinear_image(noise_data):
    """The image resampled bilinear (the default), the mask nearest, one matrix: the
    image agrees with OpenCV's warpAffine of the same matrix, the mask with the
    NumPy nearest warp."""
    import cv2

    path, pairs = noise_data
    geo = {"affine": {"rotation": 20.0, "scale": [0.7, 1.2], "translate": [0.1, 0.1]},
           "flip": {"horizontal": True, "p": 0.5}}
    cfg = _cfg(path, geo)
    got = _run(cfg)
    for j, (idx, m) in enumerate(zip(got["index"], _matrices(cfg, got["index"], pairs))):
        img, mask = pairs[int(idx)]
        lo, hi = nearest_warp(mask, m, OUT, IGNORE)
        assert _agrees(got["mask"][j, ..., 0], lo, hi).all()
        ref = cv2.warpAffine(img, m[:2].astype(np.float64), (OUT[1], OUT[0]),
                             flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                             borderValue=(0, 0, 0))
        # inside the source (no fill blended in): within the kernels' rounding
        inner = (lo != IGNORE) & (hi != IGNORE)
        diff = np.abs(got["image"][j].astype(int) - ref.astype(int)).max(axis=-1)
        assert np.percentile(diff[inner], 99) <= 2, np.percentile(diff[inner], 99)


# ------------------------------------------------------------------ eval, supervised
def test_eval_letterbox_pads_image_with_zero_and_mask_with_ignore(noise_data):
    path, pairs = noise_data
    cfg = _cfg(path, GEOMETRIES["composition"], **{"data.ignore_label": 254})
    got = _run(cfg, "validation")
    for j, idx in enumerate(got["index"]):
        img, mask = pairs[int(idx)]
        h, w = mask.shape
        scale = min(OUT[0] / h, OUT[1] / w)
        nh, nw = round(h * scale), round(w * scale)
        top, left = (OUT[0] - nh) // 2, (OUT[1] - nw) // 2
        inside = np.zeros(OUT, bool)
        inside[top:top + nh, left:left + nw] = True
        assert (got["mask"][j, ..., 0][~inside] == 254).all()
        assert (got["image"][j][~inside] == 0).all()
        assert (got["image"][j][inside] > 0).all()  # the source has no 0 pixel
        # the mask inside: nearest of the scaled source, same window
        m = np.array([[nw / w, 0, 0.5 * nw / w - 0.5 + left],
                      [0, nh / h, 0.5 * nh / h - 0.5 + top], [0, 0, 1]])
        np.testing.assert_allclose(A.letterbox_matrix((h, w), OUT).numpy(), m, atol=1e-5)
        lo, hi = nearest_warp(mask, m, OUT, 254)
        assert _agrees(got["mask"][j, ..., 0], lo, hi).all()
        # the image inside: tf.image.resize of the whole image (bilinear, half pixel)
        ref = np.round(tf.image.resize(img, (nh, nw)).numpy()).clip(0, 255)
        np.testing.assert_array_equal(got["image"][j][top:top + nh, left:left + nw], ref)


def test_as_supervised_gives_image_and_int32_mask(noise_data):
    path, _ = noise_data
    cfg = _cfg(path, GEOMETRIES["flip"], **{"data.output_dtype": "float32"})
    for split in ("train", "validation"):
        ds = build_pipeline(cfg, split, as_supervised=True)
        image_spec, mask_spec = ds.element_spec
        assert image_spec.dtype == tf.float32 and image_spec.shape[1:] == (*OUT, 3)
        assert mask_spec.dtype == tf.int32 and mask_spec.shape.as_list()[1:] == [*OUT, 1]
        x, y = next(iter(ds))
        assert x.shape[0] == y.shape[0] == 4


def test_mixup_is_refused_with_the_reason(noise_data):
    path, _ = noise_data
    with pytest.raises(ConfigError, match="no single class per pixel"):
        build_pipeline(_cfg(path, **{"augment.batch": {"mixup": {"alpha": 0.2}}}))
