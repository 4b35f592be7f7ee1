"""Native tests skip only outside CI: under CI=true a missing or broken library
fails them (`.ci/run` builds it first; a skipped native test there would hide a
broken C++ build)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def needs(available: bool, what: str) -> pytest.MarkDecorator:
    """skipif(library missing), except under CI, where the test runs (and fails)."""
    from tfpipe import native

    return pytest.mark.skipif(not available and not CI,
                              reason=f"{what} unavailable: {native.status()['detail']}")


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers this mark; declared here too for `-p no:xdist` runs
    config.addinivalue_line("markers", "xdist_group(name): run on one xdist worker")


@pytest.fixture(scope="session")
def baseline_isa() -> dict[str, np.ndarray]:
    """`baseline_outputs()` of test_pixel_isa and test_resize_simd (keys "pixel<i>",
    "resize<i>"), computed with the kernels' baseline loops (the SSE2 / baseline
    x86-64 ones: `tfpipe.native.baseline_isa()`, the ops' `isa` attr)."""
    from tfpipe import native

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: native.<name>
    try:
        from native import test_pixel_isa, test_resize_simd
    finally:
        sys.path.pop(0)
    with native.baseline_isa():
        return {**test_pixel_isa.baseline_outputs(), **test_resize_simd.baseline_outputs()}
