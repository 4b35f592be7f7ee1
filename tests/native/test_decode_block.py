"""TfpipeDecodeCropResizeBlock (window_decode_block.cc): a block of records in one call.

Oracles: every row against the per-sample op (`decode_crop_resize`, modes 0/1)
and the eval L1 (`_classify.eval_image`, mode 2), which tests/native/
test_window_decode.py and tests/pipeline/test_dct_scaling.py tie to TF's own
ops; and, independently, TF's `decode_jpeg(ratio=r)` sliced at the scaled window
+ `tf.image.resize` bilinear, rounded and saturated, with the windows computed
by the pure-TF `augment.crop_window_from_draws` and a NumPy float32 centre crop.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment, native, sample_data
from tfpipe.config import load_config
from tfpipe.pipeline._classify import eval_image
from tfpipe.pipeline._decode import dct_ratio
from tfpipe.pipeline._settings import settings
from tfpipe import switches

from .conftest import needs

jpeg = pytest.importorskip("tfpipe.native.jpeg")
pytestmark = needs(jpeg.has_decode_crop_resize_block(), "block decode-crop-resize")

RATIO = (3 / 4, 4 / 3)
SIZES = [(24, 32), (96, 96), (224, 224)]


@pytest.fixture(scope="module")
def photos() -> dict[str, bytes]:
    src = sample_data.source_photos()
    big = src["retina"][:700, :911]
    return {"420": tf.io.encode_jpeg(big, quality=90).numpy(),
            "444": tf.io.encode_jpeg(big, quality=85, chroma_downsampling=False).numpy(),
            "gray": tf.io.encode_jpeg(big[..., :1], quality=90).numpy(),
            "small": sample_data.encode(src["coffee"][:301, :207], "jpeg", 90),
            "png": sample_data.encode(src["coffee"][:64, :48], "png")}


def _draws(n: int, seed: int = 7) -> np.ndarray:
    seeds_ = tf.constant([[seed, i] for i in range(n)], tf.int64)
    return augment.crop_window_draws(seeds_, (0.08, 1.0), RATIO).numpy()


def _message(exc: tf.errors.OpError) -> str:
    # eager wraps the kernel's text: "{{function_node ...}} TEXT [Op:Name]"
    return re.sub(r"^\{\{function_node [^}]*\}\} ", "", exc.message).split(" [Op:")[0]


def _rows(photos, n: int):
    """n rows cycling over the JPEGs, each with its own draws and flip."""
    names = ["420", "444", "gray", "small"]
    contents = [photos[names[i % 4]] for i in range(n)]
    flip = [i % 3 == 1 for i in range(n)]
    return contents, _draws(n), flip


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("dct", [True, False])
def test_rows_equal_the_per_sample_op(photos, channels, dct):
    n = 12
    contents, draws, flip = _rows(photos, n)
    mode = [0 if i % 4 != 2 else 1 for i in range(n)]
    seen = set()
    for size in SIZES[:2]:
        images, status, message = jpeg.decode_crop_resize_block(
            contents, draws, mode, flip, size, RATIO, channels, dct)
        assert images.shape == (n, *size, channels)
        np.testing.assert_array_equal(status, np.zeros(n))
        assert all(m == b"" for m in message.numpy())
        for i in range(n):
            want = jpeg.decode_crop_resize(contents[i], draws[i], mode[i] == 0, flip[i], size,
                                           RATIO, channels, dct)
            np.testing.assert_array_equal(images[i], want,
                                          err_msg=f"row {i} size {size} dct {dct}")
            h, w = tf.io.extract_jpeg_shape(contents[i])[:2]
            win = augment.crop_window_from_draws(draws[i], h, w, RATIO) if mode[i] == 0 \
                else (0, 0, h, w)
            seen.add(int(dct_ratio(win[2], win[3], size)))
    assert seen == {1, 2, 4, 8}  # the windows and sizes reach every DCT reduction


def _eval_settings(size, channels: int, dct: bool, fraction: float):
    return dataclasses.replace(settings(load_config("imagenet")), image_size=tuple(size),
                               channels=channels, dct_scaling=dct, eval_crop_fraction=fraction)


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("dct", [True, False])
def test_centre_crop_rows_equal_eval_image(photos, channels, dct):
    contents = [photos[k] for k in ("420", "444", "gray", "small")]
    n = len(contents)
    flip = [False] * n
    seen = set()
    for size, fraction in [((24, 32), 0.875), ((96, 96), 0.5), ((224, 224), 0.875),
                           ((64, 40), 1.0)]:
        images, status, _ = jpeg.decode_crop_resize_block(
            contents, np.zeros([n, 4, 1], np.float32), [2] * n, flip, size, RATIO, channels,
            dct, fraction)
        np.testing.assert_array_equal(status, np.zeros(n))
        s = _eval_settings(size, channels, dct, fraction)
        for i, enc in enumerate(contents):
            np.testing.assert_array_equal(images[i], eval_image(s, tf.constant(enc)),
                                          err_msg=f"row {i} size {size} {fraction}")
            h, w = (int(v) for v in tf.io.extract_jpeg_shape(enc)[:2])
            _, _, ch, cw = numpy_centre_window(h, w, size, fraction)
            seen.add(int(dct_ratio(ch, cw, size)))
    assert seen == {1, 2, 4, 8}


def numpy_centre_window(h: int, w: int, size, fraction: float) -> tuple[int, int, int, int]:
    """`augment.center_crop_window` written out in NumPy float32 (rint = half to even)."""
    f32 = np.float32
    fit = np.minimum(f32(h) / f32(size[0]), f32(w) / f32(size[1])) * f32(fraction)
    ch = int(np.clip(int(np.rint(f32(size[0]) * fit)), 1, h))
    cw = int(np.clip(int(np.rint(f32(size[1]) * fit)), 1, w))
    return (h - ch) // 2, (w - cw) // 2, ch, cw


def tf_oracle(enc: bytes, window, size, channels: int, flip: bool) -> np.ndarray:
    """TF's own ops: full decode at 1/r, slice [floor(start / r), ceil(end / r)),
    bilinear resize, round, saturate, mirror."""
    oy, ox, ch, cw = (int(v) for v in window)
    r = 1
    for k in (8, 4, 2):
        if ch >= k * size[0] and cw >= k * size[1]:
            r = k
            break
    full = tf.io.decode_jpeg(enc, channels=channels, ratio=r)
    crop = full[oy // r:math.ceil((oy + ch) / r), ox // r:math.ceil((ox + cw) / r)]
    out = tf.saturate_cast(tf.round(tf.image.resize(crop, size, "bilinear")), tf.uint8)
    return (tf.reverse(out, [1]) if flip else out).numpy()


def test_against_tf_decode_jpeg(photos):
    """4:4:4 (crop and slice of the full decode agree to the bit there)."""
    enc = photos["444"]
    n = 8
    draws = _draws(n, seed=3)
    mode = [0, 0, 2, 0, 1, 2, 0, 0]
    flip = [i % 2 == 0 for i in range(n)]
    size = (40, 56)
    images, status, _ = jpeg.decode_crop_resize_block([enc] * n, draws, mode, flip, size, RATIO)
    np.testing.assert_array_equal(status, np.zeros(n))
    h, w = 700, 911
    with native.pure_tf():  # the pure-TF window, not TfpipeCropWindow
        rrc = [augment.crop_window_from_draws(draws[i], h, w, RATIO) for i in range(n)]
    for i in range(n):
        win = {0: rrc[i], 1: (0, 0, h, w), 2: numpy_centre_window(h, w, size, 0.875)}[mode[i]]
        np.testing.assert_array_equal(images[i], tf_oracle(enc, win, size, 3, flip[i]),
                                      err_msg=f"row {i} mode {mode[i]}")


def _damage(data: bytes, at: float) -> bytes:
    """An EOI marker written into the scan (tests/native/test_jpeg_strict_native.py)."""
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")
    p = start + int((data.rindex(b"\xff\xd9") - start) * at)
    b = bytearray(data)
    b[p:p + 2] = b"\xff\xd9"
    return bytes(b)


def test_bad_rows_get_a_status_and_the_per_sample_message(photos):
    good, small = photos["420"], photos["small"]
    rst = bytearray(good)
    rst[len(good) // 2:len(good) // 2 + 2] = b"\xff\xd3"
    rng = np.random.default_rng(0)
    rows = [(good, 0), (photos["png"], 1), (good[:len(good) // 2], 2), (_damage(good, 0.2), 2),
            (b"\xff\xd8\xff" + rng.bytes(300), 2), (rng.bytes(300), 1), (small, 0),
            (bytes(rst), 2), (b"", 1)]
    contents = [c for c, _ in rows]
    n = len(rows)
    draws, flip, mode = _draws(n, seed=5), [i % 2 == 1 for i in range(n)], [1, 0] * 4 + [1]
    size = (32, 48)
    images, status, message = jpeg.decode_crop_resize_block(contents, draws, mode, flip, size,
                                                            RATIO)
    np.testing.assert_array_equal(status, [s for _, s in rows])
    for i, (enc, want) in enumerate(rows):
        got = message.numpy()[i].decode()
        if want == 0:
            assert got == ""
            np.testing.assert_array_equal(
                images[i], jpeg.decode_crop_resize(enc, draws[i], mode[i] == 0, flip[i], size,
                                                   RATIO))
            continue
        assert not images[i].numpy().any(), f"row {i} is not zeros"
        if want == 1:
            assert got == ""
            continue
        with pytest.raises(tf.errors.InvalidArgumentError) as exc:
            jpeg.decode_crop_resize(enc, draws[i], mode[i] == 0, flip[i], size, RATIO)
        assert got == _message(exc.value), f"row {i}"
    assert "damaged JPEG: libjpeg reported" in message.numpy()[3].decode()
    assert "no restart interval" in message.numpy()[7].decode()


def test_rows_do_not_depend_on_the_block_or_the_threads(photos):
    n = 10
    contents, draws, flip = _rows(photos, n)
    mode = [i % 3 for i in range(n)]
    args = (RATIO, 3, True, 0.875)
    block = jpeg.decode_crop_resize_block(contents, draws, mode, flip, (48, 40), *args)[0].numpy()
    for i in range(n):  # each row alone
        alone = jpeg.decode_crop_resize_block(contents[i:i + 1], draws[i:i + 1], mode[i:i + 1],
                                              flip[i:i + 1], (48, 40), *args)[0]
        np.testing.assert_array_equal(block[i], alone[0], err_msg=f"row {i}")
    # reversed order, inside tf.data with one thread
    order = np.arange(n)[::-1]
    ds = tf.data.Dataset.from_tensors(
        (tf.constant([contents[i] for i in order]), draws[order],
         tf.constant([mode[i] for i in order]), tf.constant([flip[i] for i in order])))
    ds = ds.map(lambda c, d, m, f: jpeg.decode_crop_resize_block(c, d, m, f, (48, 40), *args)[0])
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1  # Shard then runs the rows inline
    got = next(iter(ds.with_options(options))).numpy()
    np.testing.assert_array_equal(got[::-1], block)


def test_empty_block_and_static_shapes():
    images, status, message = jpeg.decode_crop_resize_block(
        tf.zeros([0], tf.string), tf.zeros([0, 4, 10]), tf.zeros([0], tf.int32),
        tf.zeros([0], tf.bool), (24, 32), RATIO, 1)
    assert images.shape == (0, 24, 32, 1) and images.dtype == tf.uint8
    assert status.shape == (0,) and message.shape == (0,)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string),
                                  tf.TensorSpec([None, 4, 10], tf.float32),
                                  tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.bool)])
    def block(c, d, m, f):
        out = jpeg.decode_crop_resize_block(c, d, m, f, (24, 32), RATIO)
        assert out[0].shape.as_list() == [None, 24, 32, 3]
        assert out[1].shape.as_list() == [None] and out[2].shape.as_list() == [None]
        return out

    block.get_concrete_function()


def test_malformed_arguments_raise(photos):
    c = [photos["small"]] * 2
    d, m, f = _draws(2), [0, 0], [False, False]
    bad = {
        "draws rank": (c, d[0], m, f, (8, 8)),
        "draws rows": (c, d[:1], m, f, (8, 8)),
        "draws [n, 3, a]": (c, d[:, :3], m, f, (8, 8)),
        "mode value": (c, d, [0, 3], f, (8, 8)),
        "mode length": (c, d, [0], f, (8, 8)),
        "flip length": (c, d, m, [True], (8, 8)),
        "no attempts": (c, d[:, :, :0], m, f, (8, 8)),
        "contents rank": (c[0], d, m, f, (8, 8)),
    }
    for what, (cc, dd, mm, ff, size) in bad.items():
        with pytest.raises(tf.errors.InvalidArgumentError):
            jpeg.decode_crop_resize_block(cc, dd, mm, ff, size, RATIO)
            pytest.fail(what)
    module = native.load()
    none = (tf.zeros([2, 0]), tf.zeros([2, 0], tf.bool), tf.zeros([2], tf.bool))
    for size in ([8, 8, 3], [0, 8]):
        with pytest.raises(tf.errors.InvalidArgumentError, match="size must be"):
            module.tfpipe_decode_crop_resize_block(c, d, m, f, tf.constant(size, tf.int32),
                                                   *none, ratio=list(RATIO))
    with pytest.raises(tf.errors.InvalidArgumentError, match="crop_fraction"):
        module.tfpipe_decode_crop_resize_block(c, d, m, f, tf.constant([8, 8]), *none,
                                               ratio=list(RATIO), crop_fraction=0.0)
    with pytest.raises(ValueError, match="crop_fraction"):
        jpeg.decode_crop_resize_block(c, d, m, f, (8, 8), RATIO, crop_fraction=1.5)
    # mode-2 rows ignore their draws (zeros here)
    jpeg.decode_crop_resize_block(c, np.zeros([2, 4, 1], np.float32), [2, 2], f, (8, 8), RATIO)


def test_write_out_equals_the_chain_op_on_the_rows(photos):
    """Each row of the fused write-out = `native.pixel.pixel_chain` of that uint8 row
    (the batch op `compose` runs): float32 (the [0,1] chain + normalize) and uint8
    (the levels chain), a gated op off in some rows, rows not enabled (the plain
    rendering: normalize of the levels / the row itself), 3 and 1 channels, a bad
    and a non-JPEG row (zeros)."""
    from tfpipe.native import pixel

    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    ops, gated = ("brightness", "contrast", "saturation"), (True, False, False)
    for channels in (3, 1):
        contents, draws, flip = _rows(photos, 6)
        contents[4], contents[5] = photos["png"], photos["420"][:500]  # status 1, 2
        mode = [0, 1, 2, 0, 0, 0]
        rng = np.random.default_rng(channels)
        k = 3 if channels == 3 else 2  # (saturation needs 3 channels)
        params = np.stack([rng.uniform(-0.4, 0.4, 6), rng.uniform(0.6, 1.4, 6),
                           rng.uniform(0.0, 2.0, 6)], 1)[:, :k].astype(np.float32)
        apply = np.array([[i % 2 == 0] * k for i in range(6)])
        enabled = np.array([True, True, False, True, True, True])
        m, sd = (mean, std) if channels == 3 else (mean[:1], std[:1])
        plain, status, _ = jpeg.decode_crop_resize_block(contents, draws, mode, flip, (64, 80),
                                                         RATIO, channels)
        np.testing.assert_array_equal(status, [0, 0, 0, 0, 1, 2])
        for float_out in (True, False):
            wo = jpeg.WriteOut(ops=ops[:k], gated=gated[:k], float_out=float_out, mean=m, std=sd,
                               params=params, apply=apply, enabled=enabled)
            got, st, _ = jpeg.decode_crop_resize_block(contents, draws, mode, flip, (64, 80),
                                                       RATIO, channels, write_out=wo)
            np.testing.assert_array_equal(st, status)
            assert got.dtype == (tf.float32 if float_out else tf.uint8)
            chain = pixel.pixel_chain(plain, params, apply, ops[:k], gated[:k],
                                      to_float=float_out, normalize=float_out, mean=m, std=sd)
            alone = pixel.pixel_chain(plain, params[:, :0], apply[:, :0], [], [],
                                      to_float=False, normalize=True, mean=m, std=sd)
            for i in range(6):
                want = (chain if enabled[i] else alone if float_out else plain)[i].numpy()
                if status[i]:
                    want = np.zeros_like(want)
                assert got[i].numpy().tobytes() == want.tobytes(), (channels, float_out, i)


def test_unavailable_when_disabled(monkeypatch):
    monkeypatch.setitem(switches.OVERRIDES, "TFPIPE_NATIVE", False)
    assert not jpeg.has_decode_crop_resize_block()
    with pytest.raises(RuntimeError, match="unavailable"):
        jpeg.decode_crop_resize_block([b""], np.zeros([1, 4, 1], np.float32), [0], [False],
                                      (8, 8), RATIO)
