"""Shared fixtures for tests/augment (pixel + geometry engineers; append below)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def photos_uint8() -> list[np.ndarray]:
    """Three different 64x96x3 uint8 crops of real photos (textured, coloured)."""
    from tfpipe.sample_data import source_photos

    src = source_photos()
    crops = [src["chelsea"][100:164, 100:196], src["astronaut"][40:104, 180:276],
             src["coffee"][150:214, 200:296]]
    return [np.ascontiguousarray(c) for c in crops]


@pytest.fixture(scope="session")
def photo_uint8(photos_uint8) -> np.ndarray:
    """A 64x96x3 uint8 crop of a real photo (scikit-image's `chelsea`)."""
    return photos_uint8[0]


@pytest.fixture(scope="session")
def photo_float(photo_uint8) -> np.ndarray:
    """`photo_uint8` as float32 in [0, 1]."""
    return photo_uint8.astype(np.float32) / 255.0
