"""Strict image checks without TensorFlow: is this JPEG's scan intact?

libjpeg treats damaged entropy-coded data as a *warning*: "Corrupt JPEG data:
premature end of data segment" (the scan hit a marker, was cut and re-closed,
or desynchronised), "N extraneous bytes before marker" (it decoded garbage).
TensorFlow's decoders and Pillow return an image anyway, gray or garbled from
the damage on. `jpeg_damage` decodes with libjpeg-turbo (simplejpeg) in strict
mode, where every such warning is an error, at 1/8 scale: the entropy data is
still decoded in full (that is where the damage shows) but the IDCT and colour
work shrink, ~0.5 ms for a 512x512 q90 image (docs/convert.md).

Used by `tfpipe convert` (a damaged image is listed as skipped, with the
reason) and `tfpipe verify --deep` (a ``bad-image`` finding).
"""

from __future__ import annotations

JPEG_SOI = b"\xff\xd8"


def is_jpeg(data: bytes) -> bool:
    """Whether the bytes start like a JPEG file (SOI marker)."""
    return data[:2] == JPEG_SOI


def jpeg_damage(data: bytes) -> str | None:
    """None when the JPEG decodes with no libjpeg warning, else what went wrong.

    The message is libjpeg's own ("Corrupt JPEG data: premature end of data
    segment", "Premature end of JPEG file", ...).
    """
    import simplejpeg

    try:
        _, _, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError as exc:
        return f"unreadable JPEG header ({exc})"
    # libjpeg-turbo cannot convert CMYK/YCCK to RGB: decode those as CMYK.
    space = "CMYK" if str(colorspace).upper() in ("CMYK", "YCCK") else "GRAY"
    try:
        simplejpeg.decode_jpeg(data, colorspace=space, strict=True, min_factor=8,
                               min_height=1, min_width=1)
    except ValueError as exc:
        return str(exc).strip() or type(exc).__name__
    return None
