"""Native tests skip only outside CI: under CI=true a missing or broken library
fails them (`.ci/run` builds it first; a skipped native test there would hide a
broken C++ build)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
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


# ONE fresh process with TFPIPE_NATIVE_ISA=baseline (the SSE2 / baseline x86-64 loops)
# computes the outputs of test_pixel_isa.py and test_resize_simd.py: a Python + TF
# start-up costs 5-8 s, and the forced ISA is the only thing either needs from it.
_BASELINE_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])  # tests/: the modules as native.<name>
    from tfpipe import native
    assert native.available(), native.status()
    from native import test_pixel_isa, test_resize_simd
    np.savez(sys.argv[2], **test_pixel_isa.baseline_outputs(),
             **test_resize_simd.baseline_outputs())
""")


@pytest.fixture(scope="session")
def baseline_isa(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """`baseline_outputs()` of test_pixel_isa and test_resize_simd (keys "pixel<i>",
    "resize<i>"), computed in a fresh process forced onto the baseline ISA."""
    from tfpipe import native

    out = tmp_path_factory.mktemp("isa") / "baseline.npz"
    env = {k: v for k, v in os.environ.items() if k != "TFPIPE_NATIVE"}
    env.update(TFPIPE_NATIVE_ISA="baseline", TFPIPE_NATIVE_BUILD="0", TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([str(Path(native.__file__).parents[2]),
                                           env.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _BASELINE_CHILD,
                           str(Path(__file__).resolve().parents[1]), str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(out) as z:
        return {k: z[k] for k in z.files}
