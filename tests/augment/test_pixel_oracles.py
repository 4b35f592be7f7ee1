"""Pixel kernels against independent oracles: tf.image, PIL, colorsys, OpenCV, NumPy.

Tolerances: float32 kernels vs tf.image 1e-5 (same maths, different op order);
uint8 kernels within 1 level (we round to nearest; tf.image and PIL's blend
truncate); PIL ImageOps LUT ops (posterize, solarize, equalize, autocontrast)
bit-exact.
"""

from __future__ import annotations

import colorsys

import cv2
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image, ImageEnhance, ImageOps

from tfpipe.augment import color as C
from tfpipe.augment import pixel as P


def _maxdiff(a, b) -> float:
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


# --------------------------------------------------------------------------- vs tf.image
TF_CASES = [
    ("brightness", C.adjust_brightness, tf.image.adjust_brightness, [-0.3, 0.15]),
    ("contrast", C.adjust_contrast, tf.image.adjust_contrast, [0.4, 1.8]),
    ("saturation", C.adjust_saturation, tf.image.adjust_saturation, [0.0, 0.5, 2.5]),
    ("hue", C.adjust_hue, tf.image.adjust_hue, [-0.45, 0.1, 0.3]),
    ("gamma", C.adjust_gamma, tf.image.adjust_gamma, [0.5, 1.7]),
]


@pytest.mark.parametrize("name,mine,ref,params", TF_CASES, ids=[c[0] for c in TF_CASES])
def test_matches_tf_image(name, mine, ref, params, photos_uint8):
    for photo in photos_uint8:
        f = tf.constant(photo.astype(np.float32) / 255.0)
        for v in params:
            expect = tf.clip_by_value(ref(f, v), 0.0, 1.0)
            assert _maxdiff(mine(f, v), expect) < 1e-5, (name, v)
            # uint8: same maths on the 0..255 scale, rounded
            got = mine(tf.constant(photo), v)
            assert got.dtype == tf.uint8
            assert _maxdiff(got, np.round(expect.numpy() * 255.0)) <= 1.0, (name, v)
    # per-sample [B] parameters on a batch == the scalar kernel per sample
    batch = tf.constant(np.stack(photos_uint8).astype(np.float32) / 255.0)
    vec = tf.constant((params * 3)[:3], tf.float32)
    out = mine(batch, vec)
    for i in range(3):
        assert _maxdiff(out[i], tf.clip_by_value(ref(batch[i], float(vec[i])), 0, 1)) < 1e-5


def test_grayscale_matches_tf_image(photo_float, photo_uint8):
    gray = tf.image.rgb_to_grayscale(photo_float)
    out = C.to_grayscale(photo_float)
    assert out.shape == photo_float.shape
    assert _maxdiff(out, np.repeat(gray.numpy(), 3, axis=2)) < 1e-6
    assert _maxdiff(C.to_grayscale(photo_uint8), np.repeat(np.round(gray.numpy() * 255), 3, 2)) <= 1


def test_hue_matches_colorsys(photo_float):
    pixels = photo_float[::13, ::17].reshape(-1, 3)[:40]
    delta = 0.27
    got = C.adjust_hue(tf.constant(pixels[None]), delta).numpy()[0]
    for px, g in zip(pixels, got):
        h, s, v = colorsys.rgb_to_hsv(*px.astype(np.float64))
        expect = colorsys.hsv_to_rgb((h + delta) % 1.0, s, v)
        np.testing.assert_allclose(g, expect, atol=1e-5)


def test_saturation_extremes(photo_float):
    # factor 0 -> every pixel grey (R = G = B = V); very large -> fully saturated (min = 0)
    grey = C.adjust_saturation(photo_float, 0.0).numpy()
    np.testing.assert_allclose(grey, np.repeat(photo_float.max(-1, keepdims=True), 3, -1), atol=1e-6)
    vivid = C.adjust_saturation(photo_float, 1e6).numpy()
    coloured = photo_float.max(-1) > photo_float.min(-1)  # grey pixels have no hue: stay grey
    assert np.abs(vivid.min(-1)[coloured]).max() < 1e-5
    np.testing.assert_array_equal(vivid[~coloured], photo_float[~coloured])


# --------------------------------------------------------------------------- vs PIL
PIL_ENHANCE = [
    ("brightness", C.enhance_brightness, ImageEnhance.Brightness),
    ("contrast", C.enhance_contrast, ImageEnhance.Contrast),
    ("color", C.enhance_color, ImageEnhance.Color),
    ("sharpness", P.sharpen, ImageEnhance.Sharpness),
]


@pytest.mark.parametrize("name,mine,enhancer", PIL_ENHANCE, ids=[c[0] for c in PIL_ENHANCE])
def test_matches_pil_enhance(name, mine, enhancer, photos_uint8):
    for photo in photos_uint8:
        pil = Image.fromarray(photo)
        for factor in (0.0, 0.4, 1.0, 1.9):
            expect = np.asarray(enhancer(pil).enhance(factor))
            # PIL truncates the blend, we round: at most one level apart
            assert _maxdiff(mine(tf.constant(photo), factor), expect) <= 1.0, (name, factor)


@pytest.mark.parametrize("bits", [1, 3, 6, 8])
def test_posterize_matches_pil(bits, photo_uint8):
    expect = np.asarray(ImageOps.posterize(Image.fromarray(photo_uint8), bits))
    np.testing.assert_array_equal(P.posterize(photo_uint8, bits), expect)
    f = P.posterize(photo_uint8.astype(np.float32) / 255.0, bits).numpy()
    np.testing.assert_allclose(f * 255.0, expect, atol=1e-3)


@pytest.mark.parametrize("threshold", [0, 64, 128, 200, 255])
def test_solarize_matches_pil(threshold, photo_uint8):
    expect = np.asarray(ImageOps.solarize(Image.fromarray(photo_uint8), threshold))
    np.testing.assert_array_equal(P.solarize(photo_uint8, threshold / 255.0), expect)
    f = P.solarize(photo_uint8.astype(np.float32) / 255.0, threshold / 255.0).numpy()
    np.testing.assert_allclose(f * 255.0, expect, atol=1e-3)


def _low_contrast(photo):
    """A washed-out photo (levels 60..160) plus one flat channel: both LUT branches."""
    out = (60 + photo.astype(np.float32) * (100 / 255)).astype(np.uint8)
    out[..., 2] = 77
    return out


def test_equalize_matches_pil(photos_uint8):
    images = [*photos_uint8, _low_contrast(photos_uint8[1])]
    batch = P.equalize(np.stack(images)).numpy()
    for img, got in zip(images, batch):
        expect = np.asarray(ImageOps.equalize(Image.fromarray(img)))
        np.testing.assert_array_equal(got, expect)
        np.testing.assert_array_equal(P.equalize(img), expect)


def test_autocontrast_matches_pil(photos_uint8):
    images = [*photos_uint8, _low_contrast(photos_uint8[2])]
    batch = P.autocontrast(np.stack(images)).numpy()
    for img, got in zip(images, batch):
        expect = np.asarray(ImageOps.autocontrast(Image.fromarray(img)))
        np.testing.assert_array_equal(got, expect)
    f = _low_contrast(photos_uint8[0]).astype(np.float32) / 255.0
    out = P.autocontrast(f).numpy()
    np.testing.assert_allclose(out[..., :2].min(axis=(0, 1)), 0.0, atol=1e-6)
    np.testing.assert_allclose(out[..., :2].max(axis=(0, 1)), 1.0, atol=1e-6)
    np.testing.assert_array_equal(out[..., 2], f[..., 2])  # flat channel untouched


# --------------------------------------------------------------------------- blur vs OpenCV
@pytest.mark.parametrize("sigma,ksize", [(0.6, 3), (1.3, 5), (2.5, 9)])
def test_gaussian_blur_matches_cv2(sigma, ksize, photo_uint8, photo_float):
    expect = cv2.GaussianBlur(photo_float, (ksize, ksize), sigma)  # BORDER_REFLECT_101
    assert _maxdiff(P.gaussian_blur(photo_float, sigma, ksize), expect) < 1e-5
    expect8 = cv2.GaussianBlur(photo_uint8, (ksize, ksize), sigma)  # fixed-point in cv2
    assert _maxdiff(P.gaussian_blur(photo_uint8, sigma, ksize), expect8) <= 1.0


def test_gaussian_blur_per_sample_sigma(photos_uint8):
    batch = np.stack(photos_uint8).astype(np.float32) / 255.0
    sigmas = [0.5, 1.5, 3.0]
    out = P.gaussian_blur(batch, tf.constant(sigmas), 7).numpy()
    for i, s in enumerate(sigmas):
        assert _maxdiff(out[i], cv2.GaussianBlur(batch[i], (7, 7), s)) < 1e-5


# --------------------------------------------------------------------------- normalize / fused
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def test_normalize_and_layer(photo_uint8, photo_float):
    expect = (photo_float - np.array(MEAN, np.float32)) / np.array(STD, np.float32)
    np.testing.assert_allclose(C.normalize(photo_float, MEAN, STD), expect, atol=1e-5)
    np.testing.assert_allclose(C.normalize(photo_uint8, MEAN, STD), expect, atol=1e-5)
    layer = C.Normalize(MEAN, STD)
    out = layer(photo_uint8[None])
    assert out.dtype == tf.float32
    np.testing.assert_allclose(out[0], expect, atol=1e-5)
    clone = C.Normalize.from_config(layer.get_config())
    np.testing.assert_allclose(clone(photo_uint8[None]), out)
    with pytest.raises(ValueError, match="std"):
        C.Normalize(MEAN, [0.2, 0.0, 0.2])


def test_normalize_layer_in_a_saved_model(tmp_path, photo_uint8):
    import keras

    inp = keras.Input(photo_uint8.shape, dtype="uint8")
    model = keras.Model(inp, C.Normalize(MEAN, STD)(inp))
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")  # registered: no custom_objects
    np.testing.assert_allclose(loaded(photo_uint8[None]), model(photo_uint8[None]))


def test_color_affine_equals_sequential_ops(photos_uint8):
    # mid-range images so brightness never saturates (color_affine skips that clip)
    batch = tf.constant(np.stack(photos_uint8).astype(np.float32) / 255.0 * 0.6 + 0.2)
    deltas = tf.constant([0.15, -0.1, 0.0])
    factors = tf.constant([1.3, 0.7, 1.0])
    seq = C.adjust_contrast(C.adjust_brightness(batch, deltas), factors)
    fused = C.color_affine(batch, deltas, factors)
    assert _maxdiff(fused, seq) < 1e-5
    fused_n = C.color_affine(batch, deltas, factors, MEAN, STD)
    assert fused_n.dtype == tf.float32
    assert _maxdiff(fused_n, C.normalize(seq, MEAN, STD)) < 1e-5
    for i in range(3):  # per-sample parameters == scalar parameters per sample
        one = C.color_affine(batch[i], float(deltas[i]), float(factors[i]), MEAN, STD)
        assert _maxdiff(one, fused_n[i]) < 1e-5
    # uint8 in, normalized float out, vs the NumPy formula (float64, one final clip)
    u8 = tf.constant(np.stack(photos_uint8))
    x = np.stack(photos_uint8).astype(np.float64) / 255.0
    m = x.mean(axis=(1, 2), keepdims=True)
    ref = (np.clip((x + 0.05 - (m + 0.05)) * 1.2 + m + 0.05, 0, 1) - MEAN) / STD
    assert _maxdiff(C.color_affine(u8, 0.05, 1.2, MEAN, STD), ref) < 1e-5
    # saturating case: clipped to the image range (in normalized units)
    hot = C.color_affine(u8, 0.9, 1.0, MEAN, STD).numpy()
    np.testing.assert_allclose(hot.max(axis=(0, 1, 2)), (1 - np.array(MEAN)) / np.array(STD), atol=1e-5)
    # uint8 out (no normalization): within one level of the sequential uint8 ops
    assert _maxdiff(C.color_affine(u8, 0.05, 1.2),
                    C.adjust_contrast(C.adjust_brightness(u8, 0.05), 1.2)) <= 1.0


def test_sample_color_affine_per_sample(photo_uint8):
    seeds = tf.constant([[1, 2], [3, 4]], tf.int64)
    d, c = C.sample_color_affine(seeds, 0.3, 0.6, 1.4)
    assert d.shape == (2,) and c.shape == (2,)
    d0, c0 = C.sample_color_affine(seeds[1], 0.3, 0.6, 1.4)
    assert float(d[1]) == float(d0) and float(c[1]) == float(c0)
    assert np.all(np.abs(d) <= 0.3) and np.all((c >= 0.6) & (c <= 1.4))


# --------------------------------------------------------------------------- the rest
def test_jpeg_quality_matches_tf(photos_uint8):
    batch = tf.constant(np.stack(photos_uint8))
    q = tf.constant([15, 50, 95])
    out = P.adjust_jpeg_quality(batch, q)
    for i in range(3):
        np.testing.assert_array_equal(out[i], tf.image.adjust_jpeg_quality(batch[i], int(q[i])))
    assert _maxdiff(out[0], batch[0]) > _maxdiff(out[2], batch[2])  # lower quality, more loss


def test_channel_shuffle_is_a_permutation(photo_uint8):
    seeds = tf.constant([[i, 0] for i in range(12)], tf.int64)
    perms = P.sample_channel_permutation(seeds).numpy()
    assert all(sorted(p) == [0, 1, 2] for p in perms)
    assert len({tuple(p) for p in perms}) > 2
    out = P.permute_channels(np.stack([photo_uint8] * 12), perms).numpy()
    for p, o in zip(perms, out):
        np.testing.assert_array_equal(o, photo_uint8[..., p])


def test_erasing_box_and_fill(photo_uint8):
    h, w = photo_uint8.shape[:2]
    seeds = tf.constant([[i, 3] for i in range(20)], tf.int64)
    boxes = P.sample_erasing(seeds, h, w, scale=(0.05, 0.2), ratio=(0.5, 2.0)).numpy()
    y0, x0, y1, x1 = boxes.T
    assert np.all((y0 >= 0) & (x0 >= 0) & (y1 <= h) & (x1 <= w) & (y1 > y0) & (x1 > x0))
    frac = (y1 - y0) * (x1 - x0) / (h * w)
    assert np.all((frac > 0.03) & (frac < 0.25))  # scale range, up to rounding of the sides
    out = P.erase(np.stack([photo_uint8] * 20), boxes, 0.5).numpy()
    for b, o in zip(boxes, out):
        inside = np.zeros((h, w), bool)
        inside[b[0]:b[2], b[1]:b[3]] = True
        assert np.all(o[inside] == 128)
        np.testing.assert_array_equal(o[~inside], photo_uint8[~inside])


def test_noise_statistics():
    grey = tf.fill([128, 128, 3], 0.5)
    out = P.random_gaussian_noise(grey, tf.constant([4, 2], tf.int64), 0.05).numpy()
    diff = out - 0.5
    assert abs(diff.mean()) < 0.003 and abs(diff.std() - 0.05) < 0.003
    speck = P.random_speckle_noise(grey, tf.constant([4, 2], tf.int64), 0.1).numpy()
    assert abs((speck / 0.5 - 1.0).std() - 0.1) < 0.005
    black = P.random_speckle_noise(tf.zeros([8, 8, 3]), tf.constant([1, 1], tf.int64), 0.5)
    assert float(tf.reduce_max(black)) == 0.0  # multiplicative: black stays black


def test_p_zero_and_one(photo_uint8):
    seeds = tf.constant([[i, 9] for i in range(16)], tf.int64)
    batch = np.stack([photo_uint8] * 16)
    np.testing.assert_array_equal(C.random_brightness(batch, seeds, 0.3, p=0.0), batch)
    some = C.random_grayscale(batch, seeds, p=0.5).numpy()
    changed = [not np.array_equal(s, photo_uint8) for s in some]
    assert 2 <= sum(changed) <= 14


def test_bad_arguments(photo_uint8):
    with pytest.raises(ValueError, match="max_delta"):
        C.random_brightness(photo_uint8, [1, 2], 1.5)
    with pytest.raises(ValueError, match="kernel_size"):
        P.gaussian_blur(photo_uint8, 1.0, 4)
    with pytest.raises(TypeError, match="uint8"):
        C.adjust_brightness(tf.zeros([4, 4, 3], tf.int32), 0.1)
    with pytest.raises(ValueError, match="per-sample"):
        C.adjust_contrast(photo_uint8, tf.constant([1.0, 2.0]))
    with pytest.raises(ValueError, match="seed"):
        C.random_contrast(np.stack([photo_uint8] * 2), [1, 2], 0.5, 1.5)
    with pytest.raises(ValueError, match="random_erasing.value"):
        P.random_erasing(photo_uint8, [1, 2], value="noise")


def test_xla_compiled_batch_chain_matches(photos_uint8):
    """The opt-in XLA path (augment.xla) gives the plain kernels' result to float rounding."""
    batch = tf.constant(np.stack(photos_uint8))
    d, c, s = tf.constant([0.1, -0.2, 0.0]), tf.constant([1.2, 0.8, 1.0]), tf.constant([0.5, 1.5, 1.0])

    def chain(x, d, c, s):
        return C.color_affine(C.adjust_saturation(x, s), d, c, MEAN, STD)

    plain = chain(batch, d, c, s)
    fused = C.xla(chain)(batch, d, c, s)
    # one uint8 level of the saturation step, after normalization, at most
    assert _maxdiff(fused, plain) <= 1.0 / 255.0 / min(STD) + 1e-5
    assert np.mean(np.abs(fused.numpy() - plain.numpy()) < 1e-5) > 0.99
    ds = tf.data.Dataset.from_tensors((batch, d, c, s)).map(C.xla(chain))
    np.testing.assert_array_equal(next(iter(ds)), fused)


def test_int32_and_int64_seeds_agree(photo_uint8):
    a = C.random_contrast(photo_uint8, tf.constant([3, 9], tf.int32), 0.5, 1.5, p=0.7)
    b = C.random_contrast(photo_uint8, tf.constant([3, 9], tf.int64), 0.5, 1.5, p=0.7)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="int32/int64"):
        C.random_contrast(photo_uint8, tf.constant([3.0, 9.0]), 0.5, 1.5)
