"""The whole-image resize that presets without a crop op (cifar, medical,
remote-sensing) do first follows `data.dct_scaling` as the eval window does:
a JPEG is decoded at the largest DCT reduction r in {8, 4, 2} with
h >= r * out_h and w >= r * out_w, then resized. Oracle: TF's own
`decode_jpeg(ratio=r)` / `decode_png` + bilinear resize (round, saturate), with
r from the rule written out in Python; native kernels on and off."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import native, sample_data


OUT = (32, 32)


def _ratio(h: int, w: int) -> int:
    return next((r for r in (8, 4, 2) if h >= r * OUT[0] and w >= r * OUT[1]), 1)


@pytest.fixture(scope="module")
def encs() -> list[tuple[bytes, str]]:
    photos = list(sample_data.source_photos().values())
    out = []
    for i, (h, w) in enumerate([(300, 280), (140, 260), (70, 90), (40, 33), (200, 150)]):
        img = np.ascontiguousarray(photos[i % len(photos)][:h, 7:7 + w, :3])
        fmt = "png" if i == 4 else "jpeg"
        out.append((sample_data.encode(img, fmt), fmt))
    return out


def _want(encs, dct: bool) -> np.ndarray:
    out = []
    for enc, fmt in encs:
        if fmt == "png":
            img = tf.io.decode_png(enc, channels=3)
        else:
            h, w = (int(v) for v in tf.io.extract_jpeg_shape(enc)[:2])
            img = tf.io.decode_jpeg(enc, channels=3, ratio=_ratio(h, w) if dct else 1)
        img = tf.image.resize(img, OUT, method="bilinear")
        out.append(tf.saturate_cast(tf.round(img), tf.uint8).numpy())
    return np.stack(out)


@pytest.mark.parametrize("native_on", [True, False])
def test_whole_image_decode_follows_dct_scaling(encs, native_on) -> None:
    """The cifar preset's train decode (pad 0 + crop: the identity, so the whole
    image resized is what comes out of the decode stage)."""
    from tfpipe import load_config
    from tfpipe.pipeline._decode_stage import DecodeStage
    from tfpipe.pipeline._settings import settings

    if native_on and not native.available():
        pytest.skip("native kernels not built")
    ratios = [_ratio(*(int(v) for v in tf.io.extract_jpeg_shape(e)[:2]))
              for e, f in encs if f == "jpeg"]
    assert set(ratios) == {8, 4, 2, 1}
    row = {"_base": tf.constant([1, 2], tf.int64)}
    for dct in (True, False):
        s = settings(load_config("cifar", {
            "data.path": "unused", "data.num_classes": 2, "data.dct_scaling": dct,
            "augment.geometry": {"pad_and_crop": {"padding": 0}}}))
        stage = DecodeStage(s, s.active("geometry"), fused_l1=False)
        with (contextlib.nullcontext() if native_on else native.pure_tf()):
            got = np.stack([stage.train_image(tf.constant(e), row).numpy() for e, _ in encs])
        np.testing.assert_array_equal(got, _want(encs, dct), err_msg=f"dct_scaling={dct}")
