"""The library's normal path is quiet (issue 22, item 12).

A fresh process that does what the README does -- `import tfpipe`, build the
pipeline over a directory `tfpipe convert` wrote, train two epochs' worth of
iteration -- writes nothing to stderr: no AutoGraph "could not transform"
warnings (the epoch function is not converted), no TensorFlow C++ start-up lines
(`import tfpipe` sets TF_CPP_MIN_LOG_LEVEL=1 when it is unset, before TensorFlow
is imported; docs/config.md). A level the user set is left alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent("""
    import sys
    import tfpipe

    cfg = tfpipe.load_config({"base": "imagenet",
                              "data": {"path": sys.argv[1], "image_size": [32, 32]},
                              "pipeline": {"batch_size": 4, "shuffle_buffer": 16}})
    ds = tfpipe.build_pipeline(cfg)
    n = [sum(1 for _ in ds) for epoch in range(2)]
    print("batches", n)
    """)


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tfpipe.convert import convert
    from tfpipe.sample_data import make_image_folder

    root = tmp_path_factory.mktemp("quiet")
    folder = make_image_folder(root / "raw", num_classes=2, per_class=8, seed=0,
                               size_range=(40, 64))
    convert(str(folder), str(root / "data"), workers=1, seed=0)
    return root / "data"


def _run(data: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MAX_VLOG_LEVEL")}
    clean["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.run([sys.executable, "-c", SCRIPT, str(data)], capture_output=True,
                          text=True, env={**clean, **env}, timeout=300)


def test_import_build_and_two_epochs_write_nothing_to_stderr(converted: Path) -> None:
    res = _run(converted)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "batches [4, 4]"       # 16 images, batch 4, two epochs
    assert res.stderr.splitlines() == []


def test_a_log_level_the_user_set_is_kept(converted: Path) -> None:
    """TF_CPP_MIN_LOG_LEVEL=0 asks for TensorFlow's INFO lines: they appear."""
    res = _run(converted, TF_CPP_MIN_LOG_LEVEL="0")
    assert res.returncode == 0, res.stderr
    assert any("] " in ln and ln[:1] == "I" for ln in res.stderr.splitlines()), res.stderr
    assert "could not transform" not in res.stderr
