"""Mosaic pixels: one resample per output pixel, checked against a NumPy oracle of the
documented fixed-point definition (docs/augment.md), native == pure TF bit for bit,
and the detection pipeline's mosaic is `augment.mosaic` on the uint8 batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A
from tfpipe import native, sample_data, seeds
from tfpipe.augment.detection import mosaic_taps
from tfpipe.native import mosaic as native_mosaic
from tfpipe.pipeline import build_stages

N = 3  # box rows


def _draws(seed, b: int, h: int, w: int, p: float, center_range=(0.25, 0.75)):
    """mosaic's documented draws, from TF's stateless ops: partners (tile 0 = the
    sample, tiles 1-3 = argsort of a uniform per seed part 1..3), the centre (part 4,
    rounded to whole pixels) and the p coin (part 5)."""
    parts = seeds.split(tf.constant(seed), 6)
    alg = seeds.ALG
    partners = [np.arange(b)] + [
        np.argsort(tf.random.stateless_uniform([b], parts[i], alg=alg).numpy(), kind="stable")
        for i in range(1, 4)]
    cxy = tf.random.stateless_uniform([b, 2], parts[4], center_range[0], center_range[1],
                                      alg=alg)
    cx = tf.round(cxy[:, 0] * float(w)).numpy().astype(np.int64)
    cy = tf.round(cxy[:, 1] * float(h)).numpy().astype(np.int64)
    apply = tf.random.stateless_uniform([b], parts[5], alg=alg).numpy() < p
    return np.stack(partners), cx, cy, apply


def _oracle_taps(cut: int, n: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """docs/augment.md: u17 = (2 (i - cut) + 1) r + (2n - 1) 2^16 (first tile) or
    - 2^16 (second), r = round(2^16 / scale); t0 = floor(u17 / 2^17),
    w1 = floor((frac17 + 2^8) / 2^9)."""
    r = int(round(65536 / scale))
    t0s, w1s = [], []
    for i in range(n):
        u = (2 * (i - cut) + 1) * r + ((2 * n - 1) * 65536 if i < cut else -65536)
        t0 = u // 131072  # Python: floor division
        t0s.append(t0)
        w1s.append((u - t0 * 131072 + 256) // 512)
    return np.array(t0s), np.array(w1s)


def _oracle(images: np.ndarray, seed, p: float, scale: float, fill: float) -> np.ndarray:
    b, h, w, c = images.shape
    partners, cx, cy, apply = _draws(seed, b, h, w, p)
    out = images.copy()
    integer = images.dtype == np.uint8
    fill_px = np.uint8(np.clip(np.round(fill), 0, 255)) if integer else np.float32(fill)
    for i in np.nonzero(apply)[0]:
        xt, xw = _oracle_taps(int(cx[i]), w, scale)
        yt, yw = _oracle_taps(int(cy[i]), h, scale)
        for y in range(h):
            for x in range(w):
                q = 2 * int(y >= cy[i]) + int(x >= cx[i])
                src = images[partners[q, i]]

                def px(yy: int, xx: int) -> np.ndarray:
                    if 0 <= yy < h and 0 <= xx < w:
                        return src[yy, xx]
                    return np.full(c, fill_px, images.dtype)

                y0, x0 = int(yt[y]), int(xt[x])
                taps = [px(y0, x0), px(y0, x0 + 1), px(y0 + 1, x0), px(y0 + 1, x0 + 1)]
                if integer:
                    t = [v.astype(np.int64) for v in taps]
                    wx1, wy1 = int(xw[x]), int(yw[y])
                    h0 = (256 - wx1) * t[0] + wx1 * t[1]
                    h1 = (256 - wx1) * t[2] + wx1 * t[3]
                    out[i, y, x] = ((256 - wy1) * h0 + wy1 * h1 + 32768) >> 16
                else:
                    f32 = np.float32
                    wx1, wy1 = f32(xw[x]), f32(yw[y])
                    wx0, wy0 = f32(256) - wx1, f32(256) - wy1
                    h0 = wx0 * taps[0] + wx1 * taps[1]
                    h1 = wx0 * taps[2] + wx1 * taps[3]
                    out[i, y, x] = (wy0 * h0 + wy1 * h1) * f32(1 / 65536)
    return out


def _empty_boxes(b: int):
    return (np.zeros((b, N, 4), np.float32), np.full((b, N), -1, np.int64),
            np.zeros(b, np.int32))


def _images(dtype: str, shape, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "uint8":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    return rng.random(shape, dtype=np.float32)


def test_taps_match_the_documented_formula() -> None:
    cuts = tf.constant([0, 5, 11, 17], tf.int32)
    for n, scale in ((17, 0.5), (17, 0.37), (12, 1.6)):
        t0, w1 = (v.numpy() for v in mosaic_taps(cuts, n, scale))
        for k, cut in enumerate(cuts.numpy()):
            et0, ew1 = _oracle_taps(int(cut), n, scale)
            np.testing.assert_array_equal(w1[k], ew1)
            np.testing.assert_array_equal(t0[k], np.clip(et0, -2, n))
            # the real-valued definition (i + 0.5 - cut) / scale + (n or 0) - 0.5,
            # to the fixed point's resolution (weights in 1/256)
            i = np.arange(n)
            u = (i + 0.5 - cut) / scale + np.where(i < cut, n, 0) - 0.5
            inside = (et0 >= -2) & (et0 <= n)
            np.testing.assert_allclose((et0 + ew1 / 256)[inside], u[inside], atol=1 / 512 + 1e-9)


@pytest.mark.parametrize("path", ["native", "pure_tf"])
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_pixels_match_numpy_oracle(dtype: str, path: str) -> None:
    if path == "native" and not native_mosaic.available():
        pytest.skip("native library not built")
    images = _images(dtype, (4, 14, 19, 3))
    for seed, scale, p in (([4, 1], 0.5, 1.0), ([4, 2], 0.7, 0.6)):
        ctx = native.pure_tf() if path == "pure_tf" else _nothing()
        with ctx:
            got = A.mosaic(images, *_empty_boxes(4), tf.constant(seed), p=p, scale=scale,
                           fill_value=9.0)[0].numpy()
        want = _oracle(images, seed, p, scale, 9.0)
        np.testing.assert_array_equal(got, want)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_native_equals_pure_tf() -> None:
    """The kernel and its twin on the same tables: odd sizes, 1/3/4 channels, scales
    that leave fill (0.3) or cut tiles (1.3), centres on the canvas edges."""
    if not native_mosaic.available():
        pytest.skip("native library not built")
    from tfpipe.augment.detection import _mosaic_tf

    rng = np.random.default_rng(11)
    for dtype in ("uint8", "float32"):
        for k, (shape, scale) in enumerate((((5, 21, 27, 3), 0.5), ((4, 12, 17, 1), 0.3),
                                            ((3, 10, 13, 4), 1.3), ((6, 19, 23, 3), 0.77),
                                            ((3, 64, 96, 3), 0.5))):  # long scale-0.5 runs
            b, h, w, _ = shape
            images = _images(dtype, shape, k)
            centers = np.stack([rng.integers(0, w + 1, b), rng.integers(0, h + 1, b)], 1)
            centers[0] = [0, h]  # one tile only / edges
            centers = tf.constant(centers, tf.int32)
            x0, wx = mosaic_taps(centers[:, 0], w, scale)
            y0, wy = mosaic_taps(centers[:, 1], h, scale)
            args = (images, tf.constant(rng.integers(0, b, (4, b)), tf.int32), centers, x0, wx,
                    y0, wy, tf.constant(rng.random(b) < 0.7), 114.0)
            np.testing.assert_array_equal(native_mosaic.mosaic_taps(*args).numpy(),
                                          _mosaic_tf(*args).numpy(),
                                          err_msg=f"{dtype} {shape} {scale}")
    # the graph runs the kernel (stateless), and pure_tf() traces stock TF ops only
    spec = (tf.TensorSpec([2, 8, 8, 3], tf.uint8), tf.TensorSpec([2], tf.int32))

    def types() -> set[str]:
        fn = tf.function(lambda x, s: A.mosaic(x, *_empty_boxes(2), s)[0], autograph=False)
        return {n.op for n in fn.get_concrete_function(*spec).graph.as_graph_def().node}

    assert "TfpipeMosaic" in types()
    with native.pure_tf():
        assert "TfpipeMosaic" not in types()


def test_scale_half_is_the_2x2_mean_inside_each_tile() -> None:
    """At scale 0.5 every tap sits on a pixel boundary: a pixel well inside a tile is
    the rounded-half-up mean of a 2x2 source block (independent of the tap code)."""
    images = _images("uint8", (4, 24, 32, 3), 3)
    seed = [2, 9]
    out = A.mosaic(images, *_empty_boxes(4), tf.constant(seed), p=1.0)[0].numpy()
    partners, cx, cy, _ = _draws(seed, 4, 24, 32, 1.0)
    i = 0
    y, x = int(cy[i]) - 1, int(cx[i]) - 1  # bottom-right pixel of the top-left tile
    src = images[partners[0, i]].astype(int)
    block = src[22:24, 30:32]  # the tile's far corner lands on the centre
    np.testing.assert_array_equal(out[i, y, x], (block.sum((0, 1)) * 16384 + 32768) >> 16)
    y, x = int(cy[i]), int(cx[i])  # top-left pixel of the bottom-right tile
    src = images[partners[3, i]].astype(int)
    np.testing.assert_array_equal(out[i, y, x],
                                  (src[0:2, 0:2].sum((0, 1)) * 16384 + 32768) >> 16)


def test_other_dtypes_and_bad_scale() -> None:
    images = _images("uint8", (3, 10, 12, 3))
    got = A.mosaic(images.astype(np.int32), *_empty_boxes(3), tf.constant([1, 1]))[0]
    ref = A.mosaic(images.astype(np.float32), *_empty_boxes(3), tf.constant([1, 1]))[0]
    assert got.dtype == tf.int32
    np.testing.assert_array_equal(got, np.round(ref.numpy()).astype(np.int32))
    with pytest.raises(ValueError, match="scale"):
        A.mosaic(images, *_empty_boxes(3), tf.constant([1, 1]), scale=0.0)


# ---------------------------------------------------------------- the pipeline
H, W = 24, 32


def _record(png: bytes, box: list[float], cls: int) -> bytes:
    def f(v):
        return tf.train.Feature(float_list=tf.train.FloatList(value=v))

    feat = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png])),
            "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"png"])),
            "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[0])),
            "image/object/class/label": tf.train.Feature(
                int64_list=tf.train.Int64List(value=[cls]))}
    for k, key in enumerate(("ymin", "xmin", "ymax", "xmax")):
        feat[f"image/object/bbox/{key}"] = f([box[k]])
    return tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString()


@pytest.fixture(scope="module")
def det_shards(tmp_path_factory) -> str:
    """16 noise PNGs with one box each, 2 shards."""
    rng = np.random.default_rng(5)
    out = Path(tmp_path_factory.mktemp("mosaic"))
    recs = [_record(sample_data.encode(rng.integers(0, 256, (H, W, 3), dtype=np.uint8), "png"),
                    [0.1, 0.1 + 0.02 * i, 0.6, 0.5 + 0.02 * i], 1 + i % 3) for i in range(16)]
    for s in range(2):
        with tf.io.TFRecordWriter(str(out / f"train-{s:05d}-of-00002.tfrecord")) as w:
            for r in recs[s::2]:
                w.write(r)
    return str(out / "train-*.tfrecord")


def test_pipeline_mosaic_is_augment_mosaic_on_the_uint8_batch(det_shards) -> None:
    """The pipeline's first batch == `augment.mosaic` (seed: op 0 of the batch seed)
    of the uint8 batch its compose stage receives; uint8 in, uint8 out."""
    def cfg(batch_ops):
        return {"seed": 3,
                "data": {"path": det_shards, "task": "detection", "image_size": [H, W],
                         "max_boxes": 6, "output_dtype": "uint8", "num_classes": 4},
                "pipeline": {"batch_size": 8, "shuffle_buffer": 16, "num_parallel_calls": 2},
                "augment": {"geometry": {"flip": {"horizontal": True, "p": 0.5}},
                            "pixel": {}, "batch": batch_ops}}

    stages = dict(build_stages(cfg({"mosaic": {"p": 0.75}})))
    plain = next(iter(stages["batch"]))  # the uint8 batch the compose stage gets
    with_m = next(iter(stages["compose"]))
    es = seeds.epoch_seed(seeds.global_seed(3), 0)
    kseed = seeds.op_seed(seeds.batch_seed(es, tf.constant(0, tf.int64)), 0)
    want = A.mosaic(plain["image"], plain["boxes"], plain["classes"], plain["num_boxes"],
                    kseed, p=0.75)
    assert with_m["image"].dtype == tf.uint8
    for key, ref in zip(("image", "boxes", "classes", "num_boxes"), want):
        np.testing.assert_array_equal(with_m[key].numpy(), ref.numpy(), err_msg=key)
    assert not np.array_equal(with_m["image"].numpy(), plain["image"].numpy())


def test_native_rejects_bad_tables() -> None:
    if not native_mosaic.available():
        pytest.skip("native library not built")
    images = np.zeros((2, 4, 5, 3), np.uint8)
    good = dict(partners=np.zeros((4, 2), np.int32), centers=np.full((2, 2), 2, np.int32),
                x0=np.zeros((2, 5), np.int32), wx=np.zeros((2, 5), np.int32),
                y0=np.zeros((2, 4), np.int32), wy=np.zeros((2, 4), np.int32),
                apply=np.ones(2, bool))
    assert native_mosaic.mosaic_taps(images, **good).shape == images.shape
    for key, value, match in (("partners", np.full((4, 2), 2, np.int32), "partners must be in"),
                              ("wx", np.full((2, 5), 257, np.int32), "weights must be in"),
                              ("y0", np.zeros((2, 5), np.int32), r"y0 \[B, H\]")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=match):
            native_mosaic.mosaic_taps(images, **{**good, key: value})
