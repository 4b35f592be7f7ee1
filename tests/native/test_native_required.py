"""Under CI the native library must be built and loadable, with every kernel."""

from __future__ import annotations

import pytest

from tfpipe import native

from .conftest import CI


@pytest.mark.skipif(not CI, reason="only CI requires the native build (CI=true)")
def test_native_library_built_and_complete():
    st = native.status()
    assert st["active"], (f"CI=true but the native library is not active: {st['detail']}. "
                          "Build it with `python -m tfpipe.native build --verbose` (needs g++ "
                          "and the TensorFlow headers) and fix the compiler error it prints.")
    module = native.load()
    for op in ("tfpipe_resize_bilinear_u8", "tfpipe_crop_window", "tfpipe_affine_warp",
               "tfpipe_pixel_chain"):
        assert hasattr(module, op), f"{op} missing from {st['detail']}: rebuild with --force"
