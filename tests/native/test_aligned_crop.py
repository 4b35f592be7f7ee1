"""The fused decode's iMCU-aligned crop request (window_decode.cc, jpeg_strict.cc
CropAlign / AlignCropLeft): the same bytes as TF's own decode of the window.

The fused ops ask `jpeg::Uncompress` for the window widened left to the iMCU
column libjpeg-turbo decodes from anyway, and the resize reads the window out of
the wider rows. Oracle, TF's own ops only: `tf.io.decode_and_crop_jpeg` (ratio r,
the window mapped to the 1/r image as [floor(x / r), ceil((x + w) / r))),
`tf.image.resize` bilinear, `tf.round`, `tf.saturate_cast`, `tf.reverse` for the
flip. Windows are placed by hand relative to the iMCU column width A = (8 / r) *
max_h_samp_factor (A = 8 / r for grayscale): left edge unaligned, aligned, inside
the first iMCU column, touching the right edge, both (where the widened request
would be the whole width), the whole width; on 4:2:0, 4:2:2, 4:4:4, grayscale,
progressive and CMYK JPEGs, at r = 1, 2, 4, 8, channels 1 and 3.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tfpipe import augment, native, sample_data

from .conftest import needs

jpeg = pytest.importorskip("tfpipe.native.jpeg")
pytestmark = needs(jpeg.has_decode_crop_resize_block(), "block decode-crop-resize")

RATIO = (3 / 4, 4 / 3)
H, W = 203, 331  # neither a multiple of 16: partial iMCU rows / columns at the edges


def _encode(image: Image.Image, **options) -> bytes:
    buf = io.BytesIO()
    image.save(buf, "JPEG", quality=90, **options)
    return buf.getvalue()


@pytest.fixture(scope="module")
def photos() -> dict[str, tuple[bytes, int]]:
    """name -> (JPEG, max horizontal sampling factor of the frame)."""
    rgb = Image.fromarray(sample_data.source_photos()["retina"][100:100 + H, 150:150 + W])
    cmyk = rgb.convert("CMYK")
    return {"420": (_encode(rgb, subsampling=2), 2),
            "422": (_encode(rgb, subsampling=1), 2),
            "444": (_encode(rgb, subsampling=0), 1),
            "gray": (_encode(rgb.convert("L")), 1),
            "progressive": (_encode(rgb, subsampling=2, progressive=True), 2),
            "cmyk": (_encode(cmyk), 1)}


def _draws(window: tuple[int, int, int, int]) -> np.ndarray:
    """One attempt of `augment.crop_window_draws` rows placing exactly `window`."""
    y, x, ch, cw = window
    f32 = np.float32
    return np.array([[f32(ch * cw) / f32(H * W)], [f32(cw) / f32(ch)],
                     [f32((y + 0.5) / (H - ch + 1))], [f32((x + 0.5) / (W - cw + 1))]],
                    np.float32)


def dct_ratio(ch: int, cw: int, size) -> int:
    """The DCT ratio the ops pick: largest k in 8, 4, 2 with crop >= k * size on
    both sides, else 1 (data.dct_scaling; tfpipe.pipeline._decode.dct_ratio)."""
    return next((k for k in (8, 4, 2) if ch >= k * size[0] and cw >= k * size[1]), 1)


def tf_oracle(enc: bytes, window, size, channels: int, flip: bool) -> np.ndarray:
    y, x, ch, cw = window
    r = dct_ratio(ch, cw, size)
    y0, x0 = y // r, x // r
    scaled = [y0, x0, math.ceil((y + ch) / r) - y0, math.ceil((x + cw) / r) - x0]
    crop = tf.io.decode_and_crop_jpeg(enc, scaled, channels=channels, ratio=r)
    out = tf.saturate_cast(tf.round(tf.image.resize(crop, size, "bilinear")), tf.uint8)
    return (tf.reverse(out, [1]) if flip else out).numpy()


def windows(r: int, a: int) -> dict[str, tuple[int, int, int, int]]:
    """Case -> full-size window (y, x, h, w) whose 1/r-scaled left edge x // r lies
    where the case says relative to the iMCU column width `a` (scaled pixels)."""
    ch, cw = 96, 140
    # odd multiples of `a`: an align of 2a (a wrong, too coarse one) would move them
    wins = {"aligned": (37, r * 3 * a, ch, cw),
            "right_edge": (21, W - cw, ch, cw),
            "full_width": (37, 0, ch, W)}
    if a > 1:  # at a = 1 every column is an iMCU boundary
        edge = r * (a // 2)  # inside the first iMCU column
        wins |= {"unaligned": (37, r * (3 * a + 1), ch, cw),
                 "first_imcu": (5, r * (a - 1), ch, cw),
                 # the widened request would be the whole width: kept as asked
                 "first_imcu_to_right_edge": (37, edge, ch, W - edge)}
    for case, (y, x, h, w) in wins.items():
        assert 0 <= x and x + w <= W, (case, r, a)
        assert case != "unaligned" or ((x // r) % a != 0 and x // r > a)
        assert case != "aligned" or ((x // r) % a == 0 and x > 0)
        assert not case.startswith("first_imcu") or 0 < x // r < a
        assert not case.endswith("right_edge") or x + w == W
    return wins


def _rows(photos, channels: int):
    """Every (image, r, case) row: (label, JPEG, draws, flip, size, TF's bytes)."""
    rows = []
    for name, (enc, max_h) in photos.items():
        if name == "cmyk" and channels == 1:
            continue  # libjpeg cannot convert CMYK to grayscale (TF's op fails too)
        for r in (1, 2, 4, 8):
            a = (8 // r) * (1 if name == "gray" else max_h)
            for case, win in windows(r, a).items():
                size = (win[2] // r, win[3] // r)  # decodes the window at 1/r
                assert dct_ratio(win[2], win[3], size) == r
                flip = len(rows) % 2 == 1
                rows.append(((name, r, case, win), enc, _draws(win), flip, size,
                             tf_oracle(enc, win, size, channels, flip)))
    # the windows the ops compute from the draws are the ones placed
    with native.pure_tf():
        for (label, _, d, _, _, _) in rows:
            got = tuple(int(v) for v in augment.crop_window_from_draws(d, H, W, RATIO))
            assert got == label[3], (label, got)
    return rows


@pytest.fixture(scope="module", params=[1, 3], ids=["c1", "c3"])
def rows(request, photos):
    return request.param, _rows(photos, request.param)


def test_cases_cover_every_placement(rows):
    _, rs = rows
    assert {label[2] for label, *_ in rs} == {
        "unaligned", "aligned", "first_imcu", "right_edge", "first_imcu_to_right_edge",
        "full_width"}
    assert {label[1] for label, *_ in rs} == {1, 2, 4, 8}


def test_fused_op_equals_tf_decode_and_crop(rows):
    channels, rs = rows
    for label, enc, d, flip, size, want in rs:
        got = jpeg.decode_crop_resize(enc, d, True, flip, size, RATIO, channels, True)
        np.testing.assert_array_equal(got, want, err_msg=str(label))


def test_block_rows_equal_tf_decode_and_crop(rows):
    """Each output size is one block holding the rows of every image."""
    channels, rs = rows
    by_size: dict = {}
    for row in rs:
        by_size.setdefault(row[4], []).append(row)
    for size, block in by_size.items():
        images, status, message = jpeg.decode_crop_resize_block(
            [r[1] for r in block], np.stack([r[2] for r in block]), [0] * len(block),
            [r[3] for r in block], size, RATIO, channels, True)
        np.testing.assert_array_equal(status, np.zeros(len(block)), err_msg=str(message))
        for k, (label, *_, want) in enumerate(block):
            np.testing.assert_array_equal(images[k], want, err_msg=str(label))


def test_whole_image_rows_equal_tf_decode(photos):
    """mode 1 (whole image) at every ratio: the full-width request, never widened."""
    for name, (enc, _) in photos.items():
        for r in (1, 2, 4, 8):
            size = (H // r, W // r)
            images, status, _ = jpeg.decode_crop_resize_block([enc], np.zeros([1, 4, 1],
                                                                              np.float32),
                                                              [1], [False], size, RATIO, 3)
            assert int(status[0]) == 0
            np.testing.assert_array_equal(images[0], tf_oracle(enc, (0, 0, H, W), size, 3,
                                                               False), err_msg=f"{name} {r}")


def test_switch_off_gives_the_same_bytes(photos, monkeypatch):
    """`jpeg.unaligned_crop()` (the kernel's `aligned_crop: false` attr, set when the
    op is built: a fresh tf.function inside it) asks for the window itself: the
    same rows."""
    enc = [photos[k][0] for k in ("420", "422", "444", "gray")]
    wins = [(37, 2 * (16 * 2 + 3), 96, 140), (11, 75, 120, 200), (0, 9, 150, 322),
            (5, 13, 40, 60)]
    draws = np.stack([_draws(w) for w in wins])

    def run():
        fn = tf.function(lambda: jpeg.decode_crop_resize_block(
            enc, draws, [0] * 4, [False, True, False, True], (40, 64), RATIO, 3)[0])
        return fn().numpy()

    with jpeg.unaligned_crop():
        off = run()
    on = run()
    np.testing.assert_array_equal(on, off)
