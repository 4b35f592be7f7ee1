"""Bad input to the serving signatures: one InvalidArgumentError naming each bad
element and its problem; never a crash, never a silently gray or black image."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.xdist_group("export")


def _call(loaded, sig: str, data: list[bytes]):
    return loaded.signatures[sig](image_bytes=tf.constant(data, tf.string))


def _error(loaded, data: list[bytes], sig: str = "preprocess") -> str:
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        _call(loaded, sig, data)
    return e.value.message


@pytest.fixture(scope="module")
def good(photo_bytes) -> dict[str, bytes]:
    return photo_bytes


@pytest.mark.parametrize("sig", ["preprocess", "serving_default"])
def test_empty_and_not_an_image_name_the_element(loaded, good, sig):
    jpg = good["astronaut.jpg"]
    msg = _error(loaded, [jpg, b"", jpg, b"hello, I am not an image"], sig)
    assert "image_bytes[1]: empty (0 bytes)" in msg
    assert "image_bytes[3]: not a JPEG, PNG, GIF, BMP or WebP image" in msg
    assert "(24 bytes)" in msg
    assert "image_bytes[0]" not in msg and "image_bytes[2]" not in msg


@pytest.mark.parametrize("name,problem", [
    ("coffee_301x207.jpg", "truncated JPEG"),
    ("coffee_progressive.jpg", "truncated JPEG"),
    ("camera_gray.jpg", "truncated JPEG"),
    ("chelsea_alpha.png", "truncated PNG"),
    ("chelsea.gif", "truncated GIF"),
    ("astronaut.bmp", "truncated BMP"),
    ("chelsea.webp", "truncated WebP"),
])
@pytest.mark.parametrize("keep", [0.6, 0.995])
def test_truncated_files(loaded, good, name, problem, keep):
    data = good[name]
    cut = data[:int(len(data) * keep)]
    msg = _error(loaded, [good["astronaut.jpg"], cut])
    assert f"image_bytes[1]: {problem}" in msg, msg
    assert f"({len(cut)} bytes)" in msg


def test_jpeg_without_its_eoi_marker(loaded, good):
    data = good["coffee_301x207.jpg"]
    msg = _error(loaded, [data, data[:-2]], "serving_default")
    assert "image_bytes[1]: truncated JPEG: no EOI marker after the last scan" in msg


def test_damaged_scan_with_intact_markers_is_not_a_crash(loaded, good):
    """The documented limit (docs/serving.md "Bad input"): a JPEG whose markers are
    intact but whose entropy-coded data is garbage makes stock TF's decoder only warn
    and fill gray; the serving graph (stock ops only) answers, it does not crash."""
    data = good["astronaut.jpg"]
    sos = data.index(b"\xff\xda")
    length = int.from_bytes(data[sos + 2:sos + 4], "big")
    garbage = data[:sos + 2 + length] + bytes(range(1, 200)) * 3 + b"\xff\xd9"
    out = _call(loaded, "serving_default", [garbage])
    assert np.isfinite(out["probabilities"].numpy()).all()


def test_good_batch_after_bad_one_and_empty_batch(loaded, good):
    _error(loaded, [b""])
    out = _call(loaded, "preprocess", list(good.values()))["image"].numpy()
    assert out.shape == (len(good), 48, 64, 3)
    # no element is a flat (gray / black) image
    assert all(float(np.std(x)) > 0.05 for x in out)
    for sig in ("preprocess", "serving_default"):
        assert "image_bytes: no images (an empty batch)" in _error(loaded, [], sig)
