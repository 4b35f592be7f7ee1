"""Strict JPEG decode (`TfpipeDecodeJpegStrict`, jpeg_strict.cc).

TF's `decode_jpeg` / `decode_and_crop_jpeg` accept a JPEG whose entropy-coded
data is damaged: libjpeg only *warns* ("Corrupt JPEG data: premature end of
data segment") and fills the rest with gray. `decode_jpeg_strict` returns the
same pixels as those ops (it calls the same `tensorflow::jpeg::Uncompress`
with the same flags; tests/native) but fails with `InvalidArgumentError` when
libjpeg warns, or when the file's marker structure is damaged (no EOI marker,
a restart marker that cannot be there).

Limits (docs/pipeline.md "Bad records"): with a crop window libjpeg stops after
the window's last row, so damage below the window is only found by the
structural scan; warnings libjpeg emits only after the last row ("N extraneous
bytes before marker") are not counted by `Uncompress`. `tfpipe convert` and
`tfpipe verify --deep` decode every image fully and strictly and do see both.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe import native


_PROBE: dict[str, bool] = {}


def available() -> bool:
    """Native ops enabled, the built library has the strict JPEG kernel, and the
    kernel found TF's `jpeg::Uncompress` (a TF build that does not export it
    makes the kernel fail; then the pipeline keeps TF's own ops)."""
    if not (native.available() and hasattr(native.load(), "tfpipe_decode_jpeg_strict")):
        return False
    if "ok" not in _PROBE:
        try:
            with tf.init_scope():  # eager, also when asked while a graph is traced
                tiny = tf.io.encode_jpeg(tf.zeros([8, 8, 3], tf.uint8))
                native.load().tfpipe_decode_jpeg_strict(tiny, tf.zeros([4], tf.int32),
                                                        tf.zeros([2], tf.int32),
                                                        channels=3, crop=False)
            _PROBE["ok"] = True
        except Exception as exc:  # noqa: BLE001 - any failure -> TF's own ops
            native.log.info("tfpipe.native: strict JPEG decode unusable (%s); using TF's "
                            "decode ops", exc)
            _PROBE["ok"] = False
    return _PROBE["ok"]


def decode_jpeg_strict(contents: tf.Tensor, channels: int = 0,
                       window: Any | None = None, target: Any | None = None) -> tf.Tensor:
    """uint8 [h, w, c]: `tf.io.decode_jpeg(contents, channels)` or, with `window`
    = (y, x, h, w), `tf.io.decode_and_crop_jpeg(contents, window, channels)`,
    bit for bit, but an error on a damaged scan. Requires `available()`.

    `target` = (out_h, out_w) with a window: decode at the largest DCT reduction
    that keeps the window >= target on both sides, the window mapped to the
    scaled image (`tfpipe.pipeline._decode.dct_ratio` / `scaled_window`, whose
    `decode_and_crop_jpeg(ratio=r)` this equals bit for bit)."""
    if channels not in (0, 1, 3):
        raise ValueError(f"channels must be 0, 1 or 3, got {channels!r}")
    if not available():
        raise native.unavailable("strict JPEG decode", "jpeg_strict.cc")
    module = native.load()
    if window is None:
        return module.tfpipe_decode_jpeg_strict(contents, tf.zeros([4], tf.int32),
                                                tf.zeros([2], tf.int32),
                                                channels=channels, crop=False)
    window = tf.cast(tf.convert_to_tensor(window), tf.int32)
    target = tf.zeros([2], tf.int32) if target is None else \
        tf.cast(tf.convert_to_tensor(target), tf.int32)
    return module.tfpipe_decode_jpeg_strict(contents, window, target, channels=channels,
                                            crop=True)
