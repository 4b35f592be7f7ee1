"""Native tests skip only outside CI: under CI=true a missing or broken library
fails them (`.ci/run` builds it first; a skipped native test there would hide a
broken C++ build)."""

from __future__ import annotations

import os

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
