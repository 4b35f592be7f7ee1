"""Image checks without TensorFlow: header, structure and a strict JPEG decode.

Images are stored as their original bytes, so all a converter needs is the
format, height and width (from the header) and confidence that the bytes
decode to the image they claim to be. PIL identifies the header and PNG chunks
are CRC-checked by `Image.verify()`. A JPEG must end with its EOI marker (a
truncated download or copy loses it) and decode *strictly*: TensorFlow's and
Pillow's decoders turn a damaged scan into a partly gray image with only a
libjpeg warning on stderr, so every JPEG is decoded once by libjpeg-turbo with
warnings as errors (`tfpipe.records.jpeg_damage`: 1/8-scale, ~0.5 ms for a
512x512 q90 image, where a full PIL decode costs ~2 ms).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from tfpipe.records import jpeg_damage

# PIL format name -> the value stored under image/format (what tf.io.decode_image reads).
_FORMATS = {"JPEG": "jpeg", "MPO": "jpeg", "PNG": "png", "GIF": "gif", "BMP": "bmp",
            "WEBP": "webp"}
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp")
# Entropy-coded JPEG data never holds 0xFFD9 (0xFF is byte-stuffed), so EOI in the
# tail means the scan ran to its end; some writers pad a few bytes after EOI.
_JPEG_TAIL = 1024


class BadImage(ValueError):
    """The bytes are not an image TensorFlow can decode; the message says why."""


@dataclass(frozen=True)
class ImageInfo:
    format: str
    height: int
    width: int


def probe(data: bytes) -> ImageInfo:
    """Format and size from the header; raises BadImage for unreadable or truncated bytes."""
    from PIL import Image, UnidentifiedImageError

    if not data:
        raise BadImage("empty file")
    try:
        with Image.open(io.BytesIO(data)) as img:
            pil_format = img.format or "?"
            width, height = img.size
            if pil_format == "PNG":
                img.verify()  # walks every chunk and checks its CRC, up to IEND
    except UnidentifiedImageError:
        raise BadImage("not a recognised image (unidentified header)") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise BadImage(f"undecodable image: {exc}") from None
    fmt = _FORMATS.get(pil_format)
    if fmt is None:
        raise BadImage(f"unsupported image format {pil_format} "
                       f"(TensorFlow decodes {', '.join(sorted(set(_FORMATS.values())))})")
    if fmt == "jpeg" and b"\xff\xd9" not in data[-_JPEG_TAIL:]:
        raise BadImage("truncated JPEG (no end-of-image marker)")
    if fmt == "jpeg":
        damage = jpeg_damage(data)
        if damage is not None:
            raise BadImage(f"damaged JPEG scan (a strict decode fails: {damage})")
    if width <= 0 or height <= 0:
        raise BadImage(f"image has size {width}x{height}")
    return ImageInfo(fmt, int(height), int(width))
