"""Class masks: check a mask file and store it as a lossless single-channel PNG.

A mask is stored as ``image/segmentation/class/encoded``: an 8-bit grayscale PNG
of the image's size, pixel = class index, 255 = ignore. A file that already is
one (PNG colour type 0, bit depth 8) is stored as its original bytes; anything
else a mask may losslessly be (a 16-bit grayscale PNG whose values are all <= 255)
is re-encoded. A palette PNG is refused: its pixels are indices into a colour
table, and whether those indices are the class ids is a property of how it was
made, not of the file.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import numpy as np

from tfpipe.convert._source import MAX_INPUT_BYTES, BadInput

IGNORE = 255
MASK_SUFFIX = ".png"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PALETTE_HELP = ("if its indices are the class ids (as in PASCAL VOC), save them as a "
                 "single-channel PNG: PIL.Image.fromarray(numpy.asarray(PIL.Image.open(p)))"
                 ".save(p); otherwise map its colours to class ids first")


def encode_mask(mask: np.ndarray) -> bytes:
    """An [H, W] uint8 array as 8-bit grayscale PNG bytes (deterministic)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(mask, dtype=np.uint8), mode="L").save(
        buf, format="PNG", compress_level=6)
    return buf.getvalue()


def _ihdr(data: bytes) -> tuple[int, int] | None:
    """(bit depth, colour type) from a PNG header, or None if not a PNG."""
    if len(data) < 29 or not data.startswith(_PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    depth, color = struct.unpack(">BB", data[24:26])
    return depth, color


def decode_mask(data: bytes) -> tuple[np.ndarray, bool]:
    """(the [H, W] uint8 class array, whether `data` can be stored as is); raises BadInput."""
    from PIL import Image, UnidentifiedImageError

    header = _ihdr(data)
    if header is None:
        raise BadInput("not a PNG (masks are single-channel 8-bit PNGs, "
                       "pixel = class index)")
    try:
        with Image.open(io.BytesIO(data)) as img:
            mode = img.mode
            img.load()
            array = np.asarray(img)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as exc:
        raise BadInput(f"undecodable PNG: {exc}") from None
    depth, color = header
    if mode == "P" or color == 3:
        raise BadInput(f"a palette (P mode) PNG: its pixels are colour-table "
                       f"indices, not class ids; {_PALETTE_HELP}")
    if color != 0:
        raise BadInput(f"{mode} pixels ({array.shape[-1] if array.ndim == 3 else 1} "
                       "channels); masks must be single-channel 8-bit PNGs, pixel = class "
                       "index (e.g. numpy array -> PIL.Image.fromarray(a.astype('uint8')))")
    if depth == 8:
        return array.astype(np.uint8, copy=False), True
    if depth == 16 and int(array.max(initial=0)) <= 255:
        return array.astype(np.uint8), False
    raise BadInput(f"a {depth}-bit grayscale PNG"
                   + (" with values over 255" if depth == 16 else "")
                   + "; masks must be single-channel 8-bit PNGs, pixel = class index")


def read_mask(path: Path, label: str, height: int, width: int
              ) -> tuple[bytes, np.ndarray]:
    """The PNG bytes to store and the class array of the mask at `path` for an
    image of `height` x `width`; raises BadInput naming `label` (the mask's path)."""
    try:
        size = path.stat().st_size
        if size > MAX_INPUT_BYTES:
            raise BadInput(f"mask {label}: {size} bytes, over the {MAX_INPUT_BYTES}-byte limit")
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"mask not found: {label} (a mask is a PNG with the image's "
                       "relative path and stem)") from None
    except OSError as exc:
        raise BadInput(f"cannot read mask {label}: {exc.strerror or exc}") from None
    try:
        array, as_is = decode_mask(data)
    except BadInput as exc:
        raise BadInput(f"mask {label}: {exc}") from None
    if array.shape != (height, width):
        raise BadInput(f"mask {label} is {array.shape[1]}x{array.shape[0]}, its image is "
                       f"{width}x{height} (width x height); a mask must have its image's size")
    return (data if as_is else encode_mask(array)), array


def histogram(mask: np.ndarray) -> np.ndarray:
    """Pixels per value 0..255 of a uint8 mask."""
    return np.bincount(mask.reshape(-1), minlength=256)


def class_counts(hist: np.ndarray) -> dict[str, int]:
    """A mask's `histogram` as the converter's counters (``mask_pixels/<k>``)."""
    return {f"mask_pixels/{k:03d}": int(n) for k, n in enumerate(hist) if n}


def check_classes(hist: np.ndarray, class_names: list[str] | None, label: str) -> None:
    """Every value of the mask with `histogram` hist is a named class or ignore (255);
    raises BadInput."""
    if not class_names:
        return
    bad = [k for k in np.flatnonzero(hist[len(class_names):]) + len(class_names)
           if k != IGNORE]
    if bad:
        raise BadInput(f"mask {label} has class value(s) {[int(k) for k in bad[:5]]}, but "
                       f"the classes file names {len(class_names)} (0..{len(class_names) - 1}; "
                       f"{IGNORE} = ignore)")


def names_from_counts(stats: dict[str, Any]) -> list[str]:
    """Class names ``class_0 .. class_K`` for the largest non-ignore class K seen."""
    seen = [int(k.split("/")[1]) for k in stats if k.startswith("mask_pixels/")]
    seen = [k for k in seen if k != IGNORE]
    return [f"class_{k}" for k in range(max(seen) + 1)] if seen else []
