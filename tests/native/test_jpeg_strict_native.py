"""TfpipeDecodeJpegStrict: TF's JPEG pixels bit for bit, an error on a damaged scan.

Oracle: `tf.io.decode_jpeg` / `tf.io.decode_and_crop_jpeg` themselves, on JPEG
crops of the bundled photos (RGB, grayscale, 4:4:4, progressive, restart markers).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tfpipe import native
from tfpipe.native import jpeg as native_jpeg
from tfpipe.sample_data import encode, make_jpeg_bytes, source_photos
from tfpipe import switches

needs_native = pytest.mark.skipif(
    not native_jpeg.available(),
    reason=f"native strict JPEG op unavailable: {native.status()['detail']}")


def _variants() -> list[bytes]:
    photo = source_photos()["astronaut"][:301, :203]
    out = make_jpeg_bytes(4, seed=5) + [encode(photo.mean(axis=2).astype(np.uint8), "jpeg")]
    for kw in ({"subsampling": 0}, {"progressive": True}, {"restart_marker_blocks": 3}):
        try:
            buf = io.BytesIO()
            Image.fromarray(photo).save(buf, "JPEG", quality=85, **kw)
            out.append(buf.getvalue())
        except TypeError:  # an old Pillow without that option
            pass
    return out


def _damage(data: bytes, at: float) -> bytes:
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")
    p = start + int((data.rindex(b"\xff\xd9") - start) * at)
    b = bytearray(data)
    b[p:p + 2] = b"\xff\xd9"
    return bytes(b)


@needs_native
@pytest.mark.parametrize("channels", [0, 1, 3])
def test_same_pixels_as_tf(channels):
    for data in _variants():
        full = native_jpeg.decode_jpeg_strict(data, channels).numpy()
        np.testing.assert_array_equal(full, tf.io.decode_jpeg(data, channels=channels).numpy())
        h, w = full.shape[:2]
        for win in ([0, 0, h, w], [h // 3, w // 5, h // 2, w // 3], [h - 9, w - 7, 9, 7]):
            got = native_jpeg.decode_jpeg_strict(data, channels, win).numpy()
            ref = tf.io.decode_and_crop_jpeg(data, win, channels=channels).numpy()
            np.testing.assert_array_equal(got, ref)


@needs_native
def test_damaged_scan_is_an_error():
    data = encode(source_photos()["astronaut"], "jpeg", 90)
    bad = _damage(data, 0.2)
    tf.io.decode_jpeg(bad)  # TF: no error, gray from row ~100 on
    with pytest.raises(tf.errors.InvalidArgumentError, match="damaged JPEG: libjpeg reported"):
        native_jpeg.decode_jpeg_strict(bad, 3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="damaged JPEG"):
        native_jpeg.decode_jpeg_strict(bad, 3, [200, 0, 100, 512])
    # a window above the damage decodes correct pixels: libjpeg stops before it
    np.testing.assert_array_equal(native_jpeg.decode_jpeg_strict(bad, 3, [0, 0, 32, 512]),
                                  tf.io.decode_and_crop_jpeg(data, [0, 0, 32, 512], 3))
    rst = bytearray(data)
    rst[len(data) // 2:len(data) // 2 + 2] = b"\xff\xd3"
    with pytest.raises(tf.errors.InvalidArgumentError, match="no restart interval"):
        native_jpeg.decode_jpeg_strict(bytes(rst), 3, [0, 0, 32, 512])  # seen anywhere
    with pytest.raises(tf.errors.InvalidArgumentError, match="without an EOI"):
        native_jpeg.decode_jpeg_strict(data[:len(data) // 2], 3, [0, 0, 32, 512])


def test_fallback_when_disabled(monkeypatch):
    monkeypatch.setitem(switches.OVERRIDES, "TFPIPE_NATIVE", False)
    assert not native_jpeg.available()
    with pytest.raises(RuntimeError, match="unavailable"):
        native_jpeg.decode_jpeg_strict(b"", 3)
