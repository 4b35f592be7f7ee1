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
with the shard and record. Without it (TFPIPE_NATIVE=0, not built) only what
TF's ops reject fails (a file cut before its last rows); docs/pipeline.md
"Bad records" lists exactly what each path catches.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

Window = tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]
WindowFn = Callable[[tf.Tensor, tf.Tensor], Window]


def _strict() -> bool:
    from tfpipe.native import jpeg as native_jpeg

    return native_jpeg.available()


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


def decode_and_crop_scaled(encoded: tf.Tensor, window: Window, channels: int,
                           target: tuple[int, int]) -> tf.Tensor:
    """Pure TF: `decode_and_crop_jpeg` of the full-size `window` at the DCT
    reduction `dct_ratio` picks for `target` (`ratio` is a static attr of TF's op:
    a switch over the four)."""
    r = dct_ratio(window[2], window[3], target)
    scaled = tf.stack(scaled_window(window, r))

    def at(k: int) -> Callable[[], tf.Tensor]:
        return lambda: tf.io.decode_and_crop_jpeg(encoded, scaled, channels=channels, ratio=k)

    index = sum(tf.cast(r >= k, tf.int32) for k in RATIOS[1:])  # r = 2 ** index
    return tf.switch_case(index, [at(k) for k in RATIOS])


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

    def jpeg() -> tuple[tf.Tensor, ...]:
        shape = tf.io.extract_jpeg_shape(encoded, output_type=tf.int32)
        oy, ox, ch, cw = window_fn(shape[0], shape[1])
        if strict:
            from tfpipe.native.jpeg import decode_jpeg_strict

            crop = decode_jpeg_strict(encoded, channels, tf.stack([oy, ox, ch, cw]), target)
        elif target is not None:
            crop = decode_and_crop_scaled(encoded, (oy, ox, ch, cw), channels, target)
        else:
            crop = tf.io.decode_and_crop_jpeg(encoded, tf.stack([oy, ox, ch, cw]),
                                              channels=channels)
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
