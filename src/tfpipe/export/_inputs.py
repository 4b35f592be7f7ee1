"""Checks of the encoded images a serving signature receives, as graph ops.

TF's decoders reject most bad input, but their messages do not say WHICH
element of the batch was bad, and a few bad inputs decode "fine" (a JPEG cut
below the centre-crop window decodes the window and never sees the damage).
So every element is checked first and the request fails with one
`InvalidArgumentError` that names each bad element: `image_bytes[i]: <problem>`.
Anything these checks pass and a decoder still rejects fails with the decoder's
own message (docs/serving.md "Bad input").
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

JPEG_MAGIC = b"\xff\xd8\xff"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PNG_END = b"IEND\xaeB`\x82"  # the IEND chunk's type + CRC: the last 8 bytes of a PNG
GIF_MAGICS = (b"GIF87a", b"GIF89a")
BMP_MAGIC = b"BM"
RIFF, WEBP = b"RIFF", b"WEBP"  # WebP: "RIFF" <size> "WEBP" (tf.io.decode_image reads it)

# problem code -> message (0: fine)
PROBLEMS = (
    "",
    "empty (0 bytes)",
    "not a JPEG, PNG, GIF, BMP or WebP image (unknown leading bytes)",
    "truncated JPEG: no EOI marker after the last scan",
    "truncated PNG: the file does not end with the IEND chunk",
    "truncated GIF: the file does not end with the GIF trailer (0x3B)",
    "truncated BMP: shorter than the file size its header declares",
    "truncated WebP: shorter than the size its RIFF header declares",
)


def _le32(x32: tf.Tensor, at: int) -> tf.Tensor:
    """The little-endian uint32 at byte `at` of x32 (zero-padded), as int64."""
    b = tf.cast(tf.pad(x32[at:at + 4], [[0, 4 - tf.size(x32[at:at + 4])]]), tf.int64)
    return b[0] + b[1] * 256 + b[2] * 65536 + b[3] * 16777216


def _problem(encoded: tf.Tensor) -> tf.Tensor:
    """int32 code of one encoded image (scalar string), an index into PROBLEMS."""
    n = tf.strings.length(encoded)
    x = tf.io.decode_raw(encoded, tf.uint8)  # [n] bytes (n == 0 for b"")
    x32 = tf.cast(x, tf.int32)
    head = tf.strings.substr(encoded, 0, 8)
    tail8 = tf.strings.substr(encoded, tf.maximum(n - 8, 0), 8)
    is_jpeg = tf.strings.substr(encoded, 0, 3) == JPEG_MAGIC
    is_png = head == PNG_MAGIC
    six = tf.strings.substr(encoded, 0, 6)
    is_gif = tf.logical_or(six == GIF_MAGICS[0], six == GIF_MAGICS[1])
    is_bmp = tf.strings.substr(encoded, 0, 2) == BMP_MAGIC
    is_webp = tf.logical_and(tf.strings.substr(encoded, 0, 4) == RIFF,
                             tf.strings.substr(encoded, tf.minimum(8, n), 4) == WEBP)

    # JPEG: the last EOI (FF D9) must come after the last SOS (FF DA). Inside
    # entropy-coded data 0xFF is always followed by 0x00 or a restart marker, so
    # these byte pairs are markers (or sit in a segment before the first scan,
    # e.g. an EXIF thumbnail, which the last-scan rule ignores).
    ff = x32[:-1] == 0xFF
    nxt = x32[1:]
    pos = tf.range(tf.size(nxt))
    last_sos = tf.reduce_max(tf.concat([tf.where(ff & (nxt == 0xDA), pos, -1), [-1]], 0))
    last_eoi = tf.reduce_max(tf.concat([tf.where(ff & (nxt == 0xD9), pos, -1), [-1]], 0))
    jpeg_ok = last_eoi > last_sos
    png_ok = tail8 == PNG_END
    gif_ok = tf.strings.substr(encoded, tf.maximum(n - 1, 0), 1) == b";"
    # BMP: bytes 2..5 are the file size; WebP: bytes 4..7 the RIFF payload size
    bmp_ok = tf.logical_and(n >= 6, _le32(x32, 2) <= tf.cast(n, tf.int64))
    webp_ok = tf.logical_and(n >= 12, _le32(x32, 4) + 8 <= tf.cast(n, tf.int64))

    code = tf.constant(2)
    code = tf.where(is_webp, tf.where(webp_ok, 0, 7), code)
    code = tf.where(is_bmp, tf.where(bmp_ok, 0, 6), code)
    code = tf.where(is_gif, tf.where(gif_ok, 0, 5), code)
    code = tf.where(is_png, tf.where(png_ok, 0, 4), code)
    code = tf.where(is_jpeg, tf.where(jpeg_ok, 0, 3), code)
    return tf.where(n == 0, 1, code)


def check_images(image_bytes: tf.Tensor) -> tf.Operation:
    """An op that fails the request (InvalidArgumentError) naming every bad element
    of `image_bytes` ([N] tf.string): "image_bytes[i]: <problem> (<n> bytes)"."""
    codes = tf.map_fn(_problem, image_bytes, fn_output_signature=tf.TensorSpec([], tf.int32))
    bad = tf.reshape(tf.where(codes != 0), [-1])
    lines = tf.strings.join([
        "image_bytes[", tf.strings.as_string(bad), "]: ",
        tf.gather(tf.constant(PROBLEMS), tf.gather(codes, bad)), " (",
        tf.strings.as_string(tf.gather(tf.strings.length(image_bytes), bad)), " bytes)"])
    message = tf.strings.reduce_join(lines, separator="; ")
    # an empty request is refused too: a model on a 0-row batch fails deep inside
    # (oneDNN shapes) with a message that names no input
    message = tf.where(tf.size(image_bytes) == 0,
                       "image_bytes: no images (an empty batch)", message)
    ok = tf.logical_and(tf.size(bad) == 0, tf.size(image_bytes) > 0)
    return tf.debugging.Assert(ok, [
        "tfpipe serving: bad input; expected raw encoded JPEG, PNG, GIF, BMP or WebP bytes:",
        message])


# ------------------------------------------------------------ tabular requests
INT64_RANGE = (-(2**63), 2**63 - 1)
FLOAT32_MAX = 3.4028234663852886e38


def value_problem(value: object, dtype: str) -> str | None:
    """Why a plain request value does not fit a column of `dtype` (int64, float32), or
    None. Policy (docs/serving.md "Tabular requests"): integers must lie in int64's
    range; floats must be finite and within float32's range (NaN is a missing value,
    imputed as in training, so it passes); ±inf has no transform meaning and is refused."""
    import math
    import numbers

    if isinstance(value, bool):
        return None  # the type check names it
    if dtype == "int64" and isinstance(value, numbers.Integral):
        lo, hi = INT64_RANGE
        if not lo <= int(value) <= hi:
            return f"{value} is outside int64's range [{lo}, {hi}]"
    if dtype == "float32" and isinstance(value, numbers.Real):
        big = isinstance(value, numbers.Integral) and abs(int(value)) >= 2**1000
        v = math.inf if big else float(value)
        if math.isinf(v):
            return (f"{value!r} is not finite (a float feature must be finite; send NaN or a "
                    "null to mark a missing value)")
        if abs(v) > FLOAT32_MAX:
            return f"{value!r} is beyond float32's range (largest {FLOAT32_MAX:.7g})"
    return None


def check_finite(columns: dict[str, tf.Tensor], masks: dict[str, tf.Tensor]) -> list[tf.Operation]:
    """Ops that fail a request (InvalidArgumentError) when a float column holds ±inf in
    a row not marked missing: "column price rows [0 2]: ±inf is not a valid value ...".
    NaN passes: it is a missing value, imputed by the transforms as in training."""
    ops = []
    for name, v in columns.items():
        if not v.dtype.is_floating:
            continue
        bad = tf.math.is_inf(v)
        if name in masks:
            bad = tf.logical_and(bad, tf.logical_not(masks[name]))
        rows = tf.reshape(tf.where(bad), [-1])
        # one string (TF's Assert would quote and bracket each piece apart)
        message = tf.strings.join([
            f"tfpipe serving: bad input: column {name} rows [",
            tf.strings.reduce_join(tf.strings.as_string(rows[:20]), separator=" "),
            "]: ±inf is not a valid value for a float feature (send NaN"
            + (f" or set {name}__missing" if name in masks else "")
            + " to mark a missing value)"])
        ops.append(tf.debugging.Assert(tf.size(rows) == 0, [message]))
    return ops


def render_requests(pre: Any, image_bytes: tf.Tensor,
                    render: Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]
                    ) -> tuple[tf.Tensor, tf.Tensor]:
    """The checked request images rendered one by one by `render` (encoded ->
    (uint8 [h, w, c] at `pre.image_size`, int32 [2] decoded size)) and finished
    (`pre.finish`): (model input [N, h, w, c], sizes [N, 2]). Call it inside the
    CPU device scope: the eval pipeline's kernels, the same bits."""
    h, w = pre.image_size
    with tf.control_dependencies([check_images(image_bytes)]):
        image_bytes = tf.identity(image_bytes)
    images, sizes = tf.map_fn(render, image_bytes, fn_output_signature=(
        tf.TensorSpec([h, w, pre.channels], tf.uint8), tf.TensorSpec([2], tf.int32)))
    return pre.finish(images), sizes
