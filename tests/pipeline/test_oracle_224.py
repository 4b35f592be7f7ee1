"""The train path at 224x224 against an oracle that is not tfpipe's code.

For each sample the drawn parameters come from the public seed derivation and
samplers (docs/seeds.md: geometry op i draws from `op_seed(sample_seed, i)`,
pixel op j from `op_seed(sample_seed, 1000 + j)`): the crop window
(`augment.crop_window_draws` / `crop_window_from_draws`), the flip coin
(`random_flip`'s draw, rebuilt from TF's own stateless ops), the brightness
delta and contrast factor (`augment.color.sample_*`). Given those, the sample is
rebuilt from the decoded JPEG with NumPy (crop, bilinear resize with half-pixel
centres in float64, round half to even, flip) and float64 NumPy (brightness,
clip, per-channel-mean contrast, clip, normalize), and compared with:

- the pipeline's uint8 geometry stage (`build_stages`): from libjpeg's full
  decode with the pipeline's IDCT (TF's default, IFAST) within 1 level, except
  near the crop window's edge, where decode-and-crop's chroma upsampling sees
  the edge as the image border (a few levels; docs/pipeline.md, L1); from PIL's
  decode (ISLOW IDCT) about one level on average, a few at most;
- the pipeline's float32 output: the oracle's float chain run on the
  pipeline's own geometry output matches to 1e-5, and run on the oracle's
  geometry to the level bound above.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tfpipe import augment, seeds
from tfpipe.augment import color
from tfpipe.pipeline import build_pipeline, build_stages

from .conftest import _example, write_shards

# one xdist worker builds the module fixtures (photos, pipeline_out) once
pytestmark = pytest.mark.xdist_group("pipeline-oracle-224")

SIZE = (224, 224)
N = 12
SCALE, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)
DELTA, LOWER, UPPER = 0.3, 0.6, 1.4
MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> tuple[str, list[bytes]]:
    """12 JPEGs of 240-420 px (some wider, some taller than 224), 2 shards."""
    from tfpipe import sample_data

    rng = np.random.default_rng(224)
    src = list(sample_data.source_photos().values())
    encoded = [sample_data.encode(sample_data.random_crop(src[i % len(src)], rng, (240, 420)),
                                  "jpeg") for i in range(N)]
    out = tmp_path_factory.mktemp("p224")
    write_shards(out, "train", [_example(e, "jpeg", i % 4) for i, e in enumerate(encoded)], 2)
    return str(out / "train-*.tfrecord"), encoded


def _config(path: str) -> dict:
    return {
        "seed": 11,
        "data": {"path": path, "image_size": list(SIZE), "num_classes": 4},
        "pipeline": {"batch_size": 4, "shuffle_buffer": 0, "num_parallel_calls": 2,
                     "drop_remainder": False},
        "augment": {
            "geometry": {"random_resized_crop": {"scale": list(SCALE), "ratio": list(RATIO)},
                         "flip": {"horizontal": True, "p": 0.5}},
            "pixel": {"brightness": {"max_delta": DELTA},
                      "contrast": {"lower": LOWER, "upper": UPPER}},
        },
    }


def _draws(g: int, h: int, w: int) -> dict:
    """The sample's parameters from the public seed functions and samplers."""
    s = seeds.sample_seed(seeds.epoch_seed(seeds.global_seed(11), 0), g)
    draws = augment.crop_window_draws(seeds.op_seed(s, 0), SCALE, RATIO)
    oy, ox, ch, cw = (int(v) for v in augment.crop_window_from_draws(draws, h, w, RATIO))
    # random_flip: split the op seed in two (horizontal, vertical), coin = U[0,1) < p
    halves = tf.random.experimental.stateless_split(seeds.op_seed(s, 1), 2, alg="philox")
    flip = bool(tf.random.stateless_uniform((), halves[0], alg="philox") < 0.5)
    return {"window": (oy, ox, ch, cw), "flip": flip,
            "delta": float(color.sample_brightness(seeds.op_seed(s, 1000), DELTA)),
            "factor": float(color.sample_contrast(seeds.op_seed(s, 1001), LOWER, UPPER))}


def _bilinear(img: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Half-pixel-centre bilinear resize in float64, edge-clamped (NumPy only)."""
    h, w = img.shape[:2]

    def taps(n_in: int, n_out: int):
        x = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
        x = np.clip(x, 0.0, None)
        lo = np.minimum(np.floor(x).astype(int), n_in - 1)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, x - lo

    y0, y1, fy = taps(h, size[0])
    x0, x1, fx = taps(w, size[1])
    f = img.astype(np.float64)
    top = f[y0][:, x0] * (1 - fx)[None, :, None] + f[y0][:, x1] * fx[None, :, None]
    bot = f[y1][:, x0] * (1 - fx)[None, :, None] + f[y1][:, x1] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bot * fy[:, None, None]


def _pil(enc: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(enc)).convert("RGB"))


def _tf_full_decode(enc: bytes) -> np.ndarray:
    """libjpeg's decode of the whole image with TF's default IDCT (IFAST), the
    IDCT the pipeline's decode-and-crop uses; PIL's is ISLOW (up to ~7 levels apart)."""
    return tf.io.decode_jpeg(enc, channels=3).numpy()


def _oracle_geometry(im: np.ndarray, p: dict) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 image, interior mask): crop the decoded image, NumPy bilinear, flip. The
    mask is False on output pixels whose taps touch the window's outermost rows/columns."""
    oy, ox, ch, cw = p["window"]
    out = np.clip(np.rint(_bilinear(im[oy:oy + ch, ox:ox + cw], SIZE)), 0, 255).astype(np.uint8)

    def inner(n_src: int, n_out: int) -> np.ndarray:
        y = (np.arange(n_out) + 0.5) * n_src / n_out - 0.5
        return (y >= 1.0) & (y <= n_src - 2.0)

    mask = inner(ch, SIZE[0])[:, None] & inner(cw, SIZE[1])[None, :]
    if p["flip"]:
        out, mask = out[:, ::-1], mask[:, ::-1]
    return out, mask


def _oracle_pixels(u8: np.ndarray, p: dict) -> np.ndarray:
    """brightness -> clip -> contrast (per-channel mean) -> clip -> normalize, float64."""
    x = u8.astype(np.float64) / 255.0
    x = np.clip(x + p["delta"], 0.0, 1.0)
    m = x.mean(axis=(0, 1), keepdims=True)
    x = np.clip((x - m) * p["factor"] + m, 0.0, 1.0)
    return (x - MEAN) / STD


@pytest.fixture(scope="module")
def pipeline_out(photos):
    path, _ = photos
    cfg = _config(path)
    stages = dict(build_stages(cfg))
    geometry = {int(e["_local"]): e["image"].numpy() for e in stages["geometry"]}
    final = {}
    for b in build_pipeline(cfg, keep_index=True):
        for i, g in enumerate(b["index"].numpy()):
            final[int(g)] = b["image"][i].numpy()
    order = [r.numpy() for _, _, r in stages["read"]]  # local index -> serialized record
    return geometry, final, order


def _encoded(serialized: bytes) -> bytes:
    ex = tf.train.Example.FromString(serialized)
    return ex.features.feature["image/encoded"].bytes_list.value[0]


def test_geometry_at_224_matches_numpy_oracle(pipeline_out):
    geometry, _, order = pipeline_out
    assert sorted(geometry) == list(range(N))
    flips = 0
    for g in range(N):
        enc = _encoded(order[g])
        pil = _pil(enc)
        p = _draws(g, *pil.shape[:2])
        flips += p["flip"]
        got = geometry[g].astype(int)
        assert geometry[g].shape == (*SIZE, 3) and geometry[g].dtype == np.uint8
        # the same IDCT: within 1 level (float64 vs float32 bilinear), a few at the edge
        want, inner = _oracle_geometry(_tf_full_decode(enc), p)
        diff = np.abs(got - want.astype(int))
        assert diff[inner].max() <= 1, f"sample {g}: {diff[inner].max()} levels inside"
        assert diff.max() <= 12, f"sample {g}: {diff.max()} levels at the window edge"
        # PIL (ISLOW IDCT, another decoder): a few levels, about one on average
        want, inner = _oracle_geometry(pil, p)
        diff = np.abs(got - want.astype(int))
        assert diff.mean() < 1.5 and diff[inner].max() <= 10, f"sample {g}: {diff.mean()}"
    assert 0 < flips < N  # both branches of the flip were checked


def test_float_output_at_224_matches_numpy_oracle(pipeline_out):
    geometry, final, order = pipeline_out
    assert sorted(final) == list(range(N))
    for g in range(N):
        enc = _encoded(order[g])
        p = _draws(g, *_pil(enc).shape[:2])
        got = final[g].astype(np.float64)
        assert got.shape == (*SIZE, 3)
        # the same uint8 geometry in: float32 rounding only
        np.testing.assert_allclose(got, _oracle_pixels(geometry[g], p), rtol=1e-5, atol=2e-5,
                                   err_msg=f"sample {g}")
        # end to end from the decoded image: within the geometry's level bound, through
        # the contrast factor, plus the channel-mean shift the few-level edge pixels cause
        want, inner = _oracle_geometry(_tf_full_decode(enc), p)
        level = (max(1.0, p["factor"]) + 0.5 * abs(1.0 - p["factor"])) / 255.0 / STD.min()
        err = np.abs(got - _oracle_pixels(want, p))
        assert err[inner].max() <= level + 1e-5, f"sample {g}: {err[inner].max() / level}"
