"""Damaged JPEG scans: what TF and Pillow decode silently (gray from the damage
on) is found by `jpeg_damage` and by `verify --deep` (bug 7)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from tfpipe.cli.main import cli
from tfpipe.records import classification_schema, encode_example, jpeg_damage, verify, write_shard
from tfpipe.sample_data import encode, source_photos


def scan_bounds(data: bytes) -> tuple[int, int]:
    """(first byte of the entropy-coded data, offset of the final EOI marker)."""
    sos = data.index(b"\xff\xda")
    return sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big"), data.rindex(b"\xff\xd9")


def damage(data: bytes, kind: str, at: float = 0.5) -> bytes:
    """Damage the scan at fraction `at` of its bytes, the ways real files break."""
    start, eoi = scan_bounds(data)
    p = start + int((eoi - start) * at)
    b = bytearray(data)
    if kind == "eoi":  # a marker-like EOI mid-scan (bit rot on an 0xFF byte)
        b[p:p + 2] = b"\xff\xd9"
    elif kind == "rst":  # a restart marker where no restart interval was declared
        b[p:p + 2] = b"\xff\xd0"
    elif kind == "zeros":  # a zero-filled block (a crash artefact)
        b[p:p + 1024] = bytes(1024)
    elif kind == "cut":  # cut mid-scan and re-closed with EOI (passes an EOI check)
        return bytes(b[:p]) + b"\xff\xd9"
    elif kind == "truncated":  # cut mid-scan, no EOI
        return bytes(b[:p])
    else:
        raise ValueError(kind)
    return bytes(b)


@pytest.fixture(scope="module")
def photo() -> bytes:
    return encode(source_photos()["astronaut"], "jpeg", 90)


SILENT = ("eoi", "rst", "zeros", "cut")  # TF decodes these without an error


@pytest.mark.parametrize("kind", SILENT)
def test_tf_and_pillow_decode_the_damage_silently(photo, kind):
    """The premise, checked against the decoders themselves: no error, gray rows."""
    import tensorflow as tf

    bad = damage(photo, kind)
    img = tf.io.decode_jpeg(bad, channels=3).numpy()  # no error
    ref = tf.io.decode_jpeg(photo, channels=3).numpy()
    Image.open(io.BytesIO(bad)).convert("RGB")  # no error either
    assert not np.array_equal(img, ref)
    if kind != "zeros":  # everything from the damage on is flat gray
        assert (img[-64:] == 128).all()


@pytest.mark.parametrize("kind", SILENT + ("truncated",))
def test_jpeg_damage_finds_every_kind(photo, kind):
    msg = jpeg_damage(damage(photo, kind))
    assert msg is not None and ("Corrupt JPEG data" in msg or "Premature end" in msg), msg


def test_jpeg_damage_passes_good_images(photo):
    from tfpipe.sample_data import make_jpeg_bytes

    for data in [photo] + make_jpeg_bytes(6, seed=2):
        assert jpeg_damage(data) is None
    gray = encode(source_photos()["astronaut"].mean(axis=2).astype(np.uint8), "jpeg")
    assert jpeg_damage(gray) is None
    cmyk = io.BytesIO()
    Image.fromarray(source_photos()["astronaut"]).convert("CMYK").save(cmyk, "JPEG")
    assert jpeg_damage(cmyk.getvalue()) is None
    progressive = io.BytesIO()
    Image.fromarray(source_photos()["astronaut"]).save(progressive, "JPEG", progressive=True)
    assert jpeg_damage(progressive.getvalue()) is None
    assert jpeg_damage(damage(progressive.getvalue(), "cut")) is not None


def _record(data: bytes, i: int) -> bytes:
    h, w = Image.open(io.BytesIO(data)).size[::-1]
    return encode_example({"image/encoded": data, "image/format": "jpeg", "image/height": h,
                           "image/width": w, "image/class/label": 0},
                          classification_schema())


def test_verify_deep_finds_both_kinds_of_damaged_scan(tmp_path, photo):
    """Before: only the truncated file (TF's decode fails) was found; the one
    re-closed with EOI decoded to a half-gray image and passed."""
    images = [photo, damage(photo, "truncated"), photo, damage(photo, "cut"),
              damage(photo, "eoi", 0.3), damage(photo, "zeros", 0.7)]
    path = str(tmp_path / "train-00000-of-00001.tfrecord")
    write_shard(path, [_record(d, i) for i, d in enumerate(images)])
    report = verify(path, deep=True)
    bad = {f.index: f for f in report.findings if f.kind == "bad-image"}
    assert sorted(bad) == [1, 3, 4, 5]
    assert "Corrupt JPEG data: premature end of data segment" in bad[3].message
    r = CliRunner().invoke(cli, ["verify", path, "--deep", "--json"], catch_exceptions=False)
    assert r.exit_code == 1
    assert sorted(f["index"] for f in json.loads(r.output)["findings"]) == [1, 3, 4, 5]
    assert verify(path, deep=False).ok  # framing is intact: only a decode sees it
