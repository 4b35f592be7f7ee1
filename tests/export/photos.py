"""Real photos (scikit-image's bundled data) encoded the ways serving clients send them."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image


def _enc(img: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def photos() -> dict[str, bytes]:
    """name -> encoded bytes: RGB / grayscale / progressive JPEG, PNG with alpha,
    GIF, BMP, WebP, odd sizes (301x207, 97x131)."""
    import skimage.data

    astro = Image.fromarray(skimage.data.astronaut()).resize((256, 256), Image.BILINEAR)
    coffee = Image.fromarray(skimage.data.coffee()).resize((301, 207), Image.BILINEAR)
    chelsea = Image.fromarray(skimage.data.chelsea())  # 451x300
    camera = Image.fromarray(skimage.data.camera()).resize((131, 97), Image.BILINEAR)
    rgba = chelsea.resize((207, 301)).convert("RGBA")
    alpha = np.asarray(rgba).copy()
    alpha[..., 3] = np.linspace(0, 255, alpha.shape[1], dtype=np.uint8)[None, :]
    return {
        "astronaut.jpg": _enc(astro, "JPEG", quality=90),
        "coffee_301x207.jpg": _enc(coffee, "JPEG", quality=85),
        "coffee_progressive.jpg": _enc(coffee, "JPEG", quality=90, progressive=True),
        "camera_gray.jpg": _enc(camera, "JPEG", quality=90),
        "chelsea_alpha.png": _enc(Image.fromarray(alpha, "RGBA"), "PNG"),
        "chelsea.gif": _enc(chelsea.resize((151, 100)), "GIF"),
        "astronaut.bmp": _enc(astro.resize((97, 131)), "BMP"),
        "chelsea.webp": _enc(chelsea.resize((150, 100)), "WEBP", quality=80),
    }
