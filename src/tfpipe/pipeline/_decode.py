"""L1: decode the encoded bytes, cropping inside the JPEG decoder when we can.

For JPEG, `tf.io.extract_jpeg_shape` reads the size from the header (no pixel
work), the crop window is sampled from that size, and `decode_and_crop_jpeg`
decodes only the MCU rows/columns the window touches. Any other format (PNG,
GIF, BMP) is fully decoded and then sliced with the SAME window, so the window
-- and therefore the output -- does not depend on the file format.

DCT scaling (`data.dct_scaling`, default on; `decode_window(..., target=)`):
libjpeg can decode at 1/2, 1/4, 1/8 scale in the DCT domain, which costs less
than decoding at full size and resizing (the entropy decoding of every row
down to the window's last one cannot be skipped, the inverse DCT, colour
conversion and the resize shrink with the scale). Per sample the largest
reduction r in {8, 4, 2} whose window still has at least the output's size on
both sides is chosen (`dct_ratio`: crop_h >= r * out_h and crop_w >= r * out_w,
else r = 1), from the window and the size the header read already gave (no
second header read). The scaled image is ceil(dim / r) on each side (libjpeg's
`jdiv_round_up`) and the window is mapped to it by `scaled_window`: floor of
its start, ceil of its end, so it covers the full-size window (at most r - 1
full-size pixels more on a side). Non-JPEG images are decoded at full size and
sliced with the full-size window, as before. The native strict decode does the
same choice and mapping itself (jpeg_strict.cc), bit for bit (tests/pipeline/
test_dct_scaling.py).

Everything here returns uint8 `[h, w, channels]`: grayscale is replicated to 3
channels, RGBA loses alpha, CMYK JPEGs are converted by libjpeg.

A damaged JPEG scan is an error, not a gray image: TF's JPEG ops only log
libjpeg's "Corrupt JPEG data" warning and return gray where data was missing,
so when the native library is built (`tfpipe.native.jpeg.available()`, decided
when the pipeline is traced) JPEGs go through `decode_jpeg_strict` -- the same
pixels, bit for bit, but an `InvalidArgumentError` on a warning or a damaged
marker structure, which `pipeline.on_error` then skips (and counts) or raises
with the shard and record. Without it (TFPIPE_NATIVE=0, not built) the same
marker walk runs as graph ops (`tfpipe.native.jpeg_structure`) and an end
marker inside the scan is found by a second decode of those files only
(`checked_jpeg`): the two paths skip the same records for those kinds of
damage; a scan cut and re-closed with EOI, or zeroed mid-way, only the native
decode sees (one warning when such a pipeline is built); docs/pipeline.md
"Bad records" lists exactly what each path catches.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import tensorflow as tf

Window = tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]
WindowFn = Callable[[tf.Tensor, tf.Tensor], Window]
Probe = Callable[[Any], Callable[[tf.Tensor], tf.Tensor]]  # jpeg_structure.Frame -> decode

log = logging.getLogger("tfpipe")
_WARNED: list[bool] = []  # the fallback's one warning per process


def _strict() -> bool:
    from tfpipe.native import jpeg as native_jpeg

    return native_jpeg.available()


def _checked() -> bool:
    """The fallback's own JPEG checks (`checked_jpeg`) apply: no strict decode in this
    process (not just inside `native.pure_tf()`, the serving graphs). Warns once."""
    from tfpipe.native import jpeg as native_jpeg

    checked = native_jpeg.fallback_checks()
    if checked and not _WARNED:
        _WARNED.append(True)
        log.warning(
            "tfpipe: JPEGs are decoded with TF's own ops (native library off or not built: "
            "tfpipe env); damaged marker structure and an end marker inside a scan are "
            "skipped as with the native library, but a scan cut and re-closed with EOI, or "
            "zeroed mid-way, is decoded with gray where the native decode skips it, so on "
            "such data the sample set can differ. Find them with tfpipe verify DATA --deep "
            "(docs/pipeline.md \"Bad records\")")
    return checked


def checked_jpeg(encoded: tf.Tensor, decode: Callable[[tf.Tensor], tf.Tensor],
                 probe: Probe | None = None) -> tf.Tensor:
    """`decode(encoded)` of a JPEG, failing (InvalidArgumentError, like the native
    strict decode) on a damaged marker structure or when the decode needed data
    past an end marker inside the scan: the pure-TF fallback's checks
    (`tfpipe.native.jpeg_structure`). `probe`: the decode whose rows tell (default
    `decode`; `_rows_probe` for a window). Same pixels as `decode` when it passes."""
    from tfpipe.native import jpeg_structure as js

    code, at, eoi, frame = js.structure(encoded)
    ok = tf.debugging.Assert(tf.equal(code, js.OK), [js.message(code, at)])
    with tf.control_dependencies([ok]):
        image = decode(encoded)
    if probe is None:
        cut = js.premature_end(encoded, eoi, decode, image)
    else:
        cut = js.premature_end(encoded, eoi, probe(frame))
    ok = tf.debugging.Assert(tf.logical_not(cut), [
        "damaged JPEG: an EOI marker inside the scan at byte", eoi,
        "(premature end of data segment)"])
    with tf.control_dependencies([ok]):
        return tf.identity(image)


def decode_full(encoded: tf.Tensor, channels: int) -> tf.Tensor:
    """Decode any supported format to uint8 [h, w, channels] (first frame of a GIF)."""
    def any_format() -> tf.Tensor:
        return tf.io.decode_image(encoded, channels=channels, dtype=tf.uint8,
                                  expand_animations=False)

    if _strict():
        from tfpipe.native.jpeg import decode_jpeg_strict

        # decode_image decodes a JPEG exactly as decode_jpeg does (same flags)
        image = tf.cond(tf.io.is_jpeg(encoded),
                        lambda: decode_jpeg_strict(encoded, channels), any_format)
    elif _checked():
        # decode_jpeg: what decode_image runs for a JPEG (same flags), checked
        image = tf.cond(tf.io.is_jpeg(encoded), lambda: checked_jpeg(
            encoded, lambda e: tf.io.decode_jpeg(e, channels=channels)), any_format)
    else:
        image = any_format()
    return tf.ensure_shape(image, [None, None, channels])


RATIOS = (1, 2, 4, 8)  # what libjpeg's DCT scaling (TF's `ratio` attr) offers


def dct_ratio(crop_h: tf.Tensor, crop_w: tf.Tensor, target: tuple[int, int]) -> tf.Tensor:
    """The largest DCT reduction r in {8, 4, 2} with crop_h >= r * target[0] and
    crop_w >= r * target[1], else 1 (int32 scalar): the decoded window then
    still has at least the output's size on both sides."""
    crop_h, crop_w = tf.cast(crop_h, tf.int32), tf.cast(crop_w, tf.int32)
    r = tf.constant(1, tf.int32)
    for k in RATIOS[1:]:
        r = tf.where((crop_h >= k * int(target[0])) & (crop_w >= k * int(target[1])),
                     tf.constant(k, tf.int32), r)
    return r


def scaled_window(window: Window, r: tf.Tensor) -> Window:
    """A full-size window (oy, ox, ch, cw) in the coordinates of the image decoded
    at 1/r (ceil(dim / r) per side): [floor(oy / r), ceil((oy + ch) / r)) and the
    same along x, so it covers the full-size window."""
    oy, ox, ch, cw = (tf.cast(v, tf.int32) for v in window)
    y0, x0 = oy // r, ox // r
    y1, x1 = (oy + ch + r - 1) // r, (ox + cw + r - 1) // r
    return y0, x0, y1 - y0, x1 - x0


def _crop_at(encoded: tf.Tensor, scaled: tf.Tensor, channels: int, r: tf.Tensor) -> tf.Tensor:
    """`decode_and_crop_jpeg(encoded, scaled, ratio=r)` for a tensor r in RATIOS
    (`ratio` is a static attr of TF's op: a switch over the four)."""
    def at(k: int) -> Callable[[], tf.Tensor]:
        return lambda: tf.io.decode_and_crop_jpeg(encoded, scaled, channels=channels, ratio=k)

    index = sum(tf.cast(r >= k, tf.int32) for k in RATIOS[1:])  # r = 2 ** index
    return tf.switch_case(index, [at(k) for k in RATIOS])


def decode_and_crop_scaled(encoded: tf.Tensor, window: Window, channels: int,
                           target: tuple[int, int]) -> tf.Tensor:
    """Pure TF: `decode_and_crop_jpeg` of the full-size `window` at the DCT
    reduction `dct_ratio` picks for `target`."""
    r = dct_ratio(window[2], window[3], target)
    return _crop_at(encoded, tf.stack(scaled_window(window, r)), channels, r)


def _rows_probe(window: Window, size: tf.Tensor, channels: int,
                target: tuple[int, int] | None) -> Probe:
    """What `checked_jpeg` compares for a window decode: full width, at the window's
    DCT ratio, the rows down to the last iMCU row libjpeg entropy-decodes for the
    window (`jpeg_structure.rows_decoded`): it decodes whole MCU rows, so an end
    marker beside or just below the window is hit too (the native op then warns
    although the window's pixels are intact)."""
    r = tf.constant(1) if target is None else dct_ratio(window[2], window[3], target)
    y0, _, h, _ = scaled_window(window, r)
    height, width = ((tf.cast(v, tf.int32) + r - 1) // r for v in (size[0], size[1]))

    def probe(frame: Any) -> Callable[[tf.Tensor], tf.Tensor]:
        from tfpipe.native.jpeg_structure import rows_decoded

        rows = tf.stack([0, 0, rows_decoded(y0 + h, height, r, frame), width])
        return lambda e: _crop_at(e, rows, channels, r)
    return probe


def decode_window(encoded: tf.Tensor, channels: int, window_fn: WindowFn,
                  crop_in_decoder: bool = True, target: tuple[int, int] | None = None
                  ) -> tuple[tf.Tensor, Window, tf.Tensor]:
    """Decode only `window_fn(height, width)` of the image.

    Returns (uint8 crop [ch, cw, channels], window (oy, ox, ch, cw) int32,
    original size [2] int32). `crop_in_decoder=False` decodes JPEGs fully and
    slices too (for TFLite, which has no kernel for extract_jpeg_shape): NOT the
    same bits at the window's edges where chroma is subsampled. `target` (the
    output size the crop is resized to next): decode a JPEG window at the DCT
    reduction `dct_ratio` picks (the crop is then smaller than the window, ~1/r
    per side); ignored with `crop_in_decoder=False` (the size is not known
    before decoding there).
    """
    strict = _strict()
    checked = not strict and crop_in_decoder and _checked()

    def jpeg() -> tuple[tf.Tensor, ...]:
        shape = tf.io.extract_jpeg_shape(encoded, output_type=tf.int32)
        oy, ox, ch, cw = window_fn(shape[0], shape[1])
        if strict:
            from tfpipe.native.jpeg import decode_jpeg_strict

            crop = decode_jpeg_strict(encoded, channels, tf.stack([oy, ox, ch, cw]), target)
        else:
            def decode(e: tf.Tensor) -> tf.Tensor:
                if target is not None:
                    return decode_and_crop_scaled(e, (oy, ox, ch, cw), channels, target)
                return tf.io.decode_and_crop_jpeg(e, tf.stack([oy, ox, ch, cw]),
                                                  channels=channels)

            crop = checked_jpeg(encoded, decode, _rows_probe(
                (oy, ox, ch, cw), shape, channels, target)) if checked else decode(encoded)
        return crop, oy, ox, ch, cw, shape[0], shape[1]

    def other() -> tuple[tf.Tensor, ...]:
        image = decode_full(encoded, channels)
        shape = tf.shape(image, out_type=tf.int32)
        oy, ox, ch, cw = window_fn(shape[0], shape[1])
        return image[oy:oy + ch, ox:ox + cw, :], oy, ox, ch, cw, shape[0], shape[1]

    if crop_in_decoder:
        crop, oy, ox, ch, cw, h, w = tf.cond(tf.io.is_jpeg(encoded), jpeg, other)
    else:
        crop, oy, ox, ch, cw, h, w = other()
    crop = tf.ensure_shape(crop, [None, None, channels])
    return crop, (oy, ox, ch, cw), tf.stack([h, w])


def resize_uint8(image: tf.Tensor, size: tuple[int, int]) -> tf.Tensor:
    """Bilinear (half-pixel centres) resize, rounded and saturated back to uint8.

    Exactly what `tfpipe.augment.crop_and_resize` does after its slice, so the
    fused path and decode-then-`random_resized_crop` agree bit for bit. Runs the
    native kernel when `tfpipe.native.available()` (decided when the pipeline is
    traced): same float formula, bit-identical output (tests/native), ~3x faster.
    """
    from tfpipe import native

    if image.dtype == tf.uint8 and native.available():
        out = native.resize_bilinear_u8(image, size)
        return tf.ensure_shape(out, [size[0], size[1], image.shape[-1]])
    out = tf.image.resize(image, size, method="bilinear")
    out = tf.saturate_cast(tf.round(out), tf.uint8)
    return tf.ensure_shape(out, [size[0], size[1], image.shape[-1]])
