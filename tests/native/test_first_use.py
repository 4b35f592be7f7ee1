"""First use of the native kernels from a fresh, non-editable install.

A new venv gets tfpipe as a wheel built from this checkout (`pip install
--no-index --no-deps --no-build-isolation`, nothing downloaded; the
dependencies come from the test interpreter's site-packages through a .pth
file), with its package directory made read-only and an empty cache
(`TFPIPE_NATIVE_CACHE`). Then, in that venv:

- two processes build their first pipeline at the same moment: both run the
  native op, exactly one compiled (the other waited on the lock), and the cache
  holds one complete library and no temporary files;
- with a compiler that does not exist: one warning with the reason and what to
  install, the pipeline still runs (pure TF), and `tfpipe env` shows the reason.

The in-process tests below check the cache key, the cache location, and that a
failed build is remembered (no recompiling in every process) until retried.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfpipe import switches

from .conftest import CI

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600  # one process compiles on a loaded 2-core machine

CONFIG = {"seed": 5,
          "data": {"image_size": [40, 48], "num_classes": 3},
          "pipeline": {"batch_size": 4, "shuffle_buffer": 16, "num_parallel_calls": 2},
          "augment": {"geometry": {"random_resized_crop": {"scale": [0.08, 1.0]},
                                   "flip": {"horizontal": True, "p": 0.5}}}}

# Run inside the fresh venv: optionally wait for the "go" file (so two processes
# really reach the first-use build together), build the first pipeline, report;
# optionally then run `tfpipe env` in the same process (one TF start-up less).
SCRIPT = r"""
import json, logging, os, sys, time
from pathlib import Path
logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                    format="LOG %(name)s %(levelname)s %(message)s")
import tensorflow as tf
import tfpipe
from tfpipe import native
from tfpipe.pipeline import build_pipeline

if os.environ.get("GO_FILE"):
    Path(os.environ["READY_FILE"]).touch()
    deadline = time.monotonic() + 300
    while not Path(os.environ["GO_FILE"]).exists():
        if time.monotonic() > deadline:
            sys.exit("no go signal")
        time.sleep(0.01)
ds = build_pipeline(json.loads(sys.argv[1]))
policy = tf.data.experimental.ExternalStatePolicy.IGNORE
g = tf.compat.v1.GraphDef()
g.ParseFromString(ds._as_serialized_graph(external_state_policy=policy).numpy())
ops = {n.op for n in g.node} | {n.op for f in g.library.function for n in f.node_def}
batch = next(iter(ds))
print("RESULT", json.dumps({"tfpipe": tfpipe.__file__, "status": native.status(),
                            "native_op": "TfpipeResizeBilinearU8" in ops,
                            "image_shape": list(batch["image"].shape)}), flush=True)
if os.environ.get("THEN_TFPIPE_ENV"):  # the `tfpipe` console script's entry point
    from tfpipe.cli.main import main
    sys.argv = ["tfpipe", "env"]
    main()
"""


def _setuptools_ok() -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 77


def _env(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that would point at this checkout
    or pre-decide the native path."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "TFPIPE_NATIVE",
                        "TFPIPE_NATIVE_BUILD", "TFPIPE_NATIVE_CACHE", "TFPIPE_NATIVE_ISA")}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", **extra)
    return env


def _run(cmd: list[str], env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> str:
    import tensorflow as tf

    from tfpipe.sample_data import make_jpeg_bytes

    root = tmp_path_factory.mktemp("first-use-shards")
    with tf.io.TFRecordWriter(str(root / "train-00000-of-00001.tfrecord")) as w:
        for i, jpeg in enumerate(make_jpeg_bytes(8, seed=3)):
            feats = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                         value=[jpeg])),
                     "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(
                         value=[b"jpeg"])),
                     "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(
                         value=[i % 3]))}
            w.write(tf.train.Example(features=tf.train.Features(
                feature=feats)).SerializeToString())
    return str(root / "train-*.tfrecord")


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """(python, installed package dir) of a fresh venv with tfpipe installed from a
    wheel of this checkout; the package dir is read-only."""
    if not _setuptools_ok():
        if CI:
            pytest.fail("building tfpipe's wheel offline needs setuptools>=77 (dev extra)")
        pytest.skip("building tfpipe's wheel offline needs setuptools>=77 (dev extra)")
    root = tmp_path_factory.mktemp("fresh-venv")
    # A copy of the project: the wheel build writes build/ and *.egg-info, never
    # into the checkout; an AOT library built in the checkout stays behind.
    src = root / "project"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "src", src / "src", ignore=shutil.ignore_patterns(
        "*.so", "__pycache__", "*.egg-info", ".build-*"))
    env_dir = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)],
                   check=True, timeout=120)
    python = env_dir / "bin" / "python"
    purelib = Path(_run([str(python), "-c", "import sysconfig; "
                         "print(sysconfig.get_paths()['purelib'])"], _env()).stdout.strip())
    import setuptools

    deps = [str(Path(setuptools.__file__).parent.parent), *site.getsitepackages()]
    (purelib / "_tfpipe_test_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    pip = _run([str(python), "-m", "pip", "install", "--no-index", "--no-deps",
                "--no-build-isolation", "--ignore-installed", "--no-compile", "-q", str(src)],
               _env(PIP_DISABLE_PIP_VERSION_CHECK="1"))
    assert pip.returncode == 0, pip.stdout + pip.stderr
    package = purelib / "tfpipe"
    for pattern in ("*.cc", "*.h"):
        assert sorted(p.name for p in (package / "native").glob(pattern)) == \
            sorted(p.name for p in (REPO / "src/tfpipe/native").glob(pattern)), \
            f"the wheel must ship every kernel source, {pattern} (pyproject package-data)"
    assert not list((package / "native").glob("*.so"))
    for p in [package, *package.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    yield python, package
    for p in [package, *package.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


def _result(stdout: str) -> dict:
    [line] = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):])


def _log_lines(stderr: str, text: str) -> list[str]:
    return [ln for ln in stderr.splitlines()
            if ln.startswith("LOG tfpipe.native") and text in ln]


@pytest.mark.slow
@pytest.mark.xdist_group("fresh_venv")  # one venv per module: keep its tests on one worker
def test_first_pipeline_in_a_fresh_venv_races_one_build(venv, shards, tmp_path):
    python, package = venv
    cache = tmp_path / "cache"
    config = json.dumps({**CONFIG, "data": {**CONFIG["data"], "path": shards}})
    procs = []
    try:
        for i in range(2):
            procs.append(subprocess.Popen(
                [str(python), "-c", SCRIPT, config], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                env=_env(TFPIPE_NATIVE_CACHE=str(cache), READY_FILE=str(tmp_path / f"ready{i}"),
                         GO_FILE=str(tmp_path / "go"))))
        deadline = time.monotonic() + 300
        while not all((tmp_path / f"ready{i}").exists() for i in range(2)):
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            assert time.monotonic() < deadline, "the processes never got ready"
            time.sleep(0.05)
        assert not cache.exists()  # nothing built before both reach the first pipeline
        (tmp_path / "go").touch()
        outs = [p.communicate(timeout=TIMEOUT_S) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    results = [_result(out) for out, _ in outs]
    errs = "\n".join(err for _, err in outs)
    # non-editable: the installed copy runs, not this checkout
    for r in results:
        assert Path(r["tfpipe"]).parent == package, r["tfpipe"]
    # both first pipelines run the native op, from the one cached library
    [lib] = list(cache.glob("tf*-*/_tfpipe_ops.so"))
    for r in results:
        assert r["native_op"] and r["status"]["active"], r["status"]
        assert r["status"]["path"] == str(lib)
        assert r["image_shape"] == [4, 40, 48, 3]
    # one compile: one "compiling" + one "compiled ... in N s" line; the other waited
    assert len(_log_lines(errs, "compiling the native kernels")) == 1, errs[-3000:]
    assert len(_log_lines(errs, "compiled ")) == 1, errs[-3000:]
    assert len(_log_lines(errs, "waiting for another process")) == 1, errs[-3000:]
    assert sorted(r["status"]["reason"].split(" in ")[0] for r in results) == \
        ["built by another process", "built on first use"]
    # no half-written or temporary file left; nothing written into the package
    assert sorted(p.name for p in lib.parent.iterdir()) == [".lock", "_tfpipe_ops.so",
                                                            "build.log"]
    assert not [p for p in package.rglob("*") if p.suffix == ".so" or ".build-" in p.name]


@pytest.mark.slow
@pytest.mark.xdist_group("fresh_venv")
def test_no_compiler_falls_back_with_one_warning(venv, shards, tmp_path):
    python, _ = venv
    cache = tmp_path / "cache"
    env = _env(TFPIPE_NATIVE_CACHE=str(cache), CXX=str(tmp_path / "no" / "g++"),
               COLUMNS="1000", THEN_TFPIPE_ENV="1")
    config = json.dumps({**CONFIG, "data": {**CONFIG["data"], "path": shards}})
    proc = _run([str(python), "-c", SCRIPT, config], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = _result(proc.stdout)
    assert not result["native_op"] and result["image_shape"] == [4, 40, 48, 3]
    warnings = [ln for ln in proc.stderr.splitlines()
                if ln.startswith("LOG tfpipe.native WARNING")]
    assert len(warnings) == 1, proc.stderr[-3000:]  # also after `tfpipe env` asked again
    assert f"{tmp_path / 'no' / 'g++'}' (from CXX) not found" in warnings[0]
    assert "apt-get install g++" in warnings[0] and "pure-TF fallback" in warnings[0]
    assert result["status"]["reason"] in warnings[0]
    assert not cache.exists()
    [row] = [ln for ln in proc.stdout.splitlines() if "native ops" in ln]
    assert "pure-TF fallback" in row and "(from CXX) not found" in row, proc.stdout


# ------------------------------------------------------------------ in process


def test_cache_location_and_key(monkeypatch, tmp_path):
    import tfpipe.native.build as build

    monkeypatch.delitem(switches.OVERRIDES, build.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build.cache_root() == tmp_path / "xdg" / "tfpipe" / "native"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert build.cache_root() == tmp_path / "home" / ".cache" / "tfpipe" / "native"
    monkeypatch.setitem(switches.OVERRIDES, build.CACHE_ENV, str(tmp_path / "mine"))
    assert build.cache_root() == tmp_path / "mine"
    import tensorflow as tf

    key = build.cache_key()
    assert build.cache_library(key) == tmp_path / "mine" / f"tf{tf.__version__}-{key}" / \
        "_tfpipe_ops.so"
    # an edited kernel source is another key (an old library is never loaded for it)
    copy = tmp_path / "src"
    shutil.copytree(build.HERE, copy, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    monkeypatch.setattr(build, "HERE", copy)
    assert build.cache_key() == key
    (copy / "ops.cc").write_text((copy / "ops.cc").read_text() + "\n// edited\n")
    edited = build.cache_key()
    assert edited != key
    # so is an edited shared header (common.h: not compiled itself, included by them)
    (copy / "common.h").write_text((copy / "common.h").read_text() + "\n// edited\n")
    assert build.cache_key() not in (key, edited)
    edited = build.cache_key()
    # so are other compiler flags
    monkeypatch.setattr(build, "FLAGS", (*build.FLAGS, "-DTFPIPE_OTHER"))
    assert build.cache_key() not in (key, edited)


def test_failed_build_is_remembered_until_retried(monkeypatch, tmp_path):
    import tfpipe.native.build as build

    calls = tmp_path / "calls"
    cxx = tmp_path / "bad-cxx"
    cxx.write_text(f"#!/bin/sh\necho x >> {calls}\n"
                   "echo 'ops.cc:1:1: error: boom' >&2\nexit 1\n")
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.setitem(switches.OVERRIDES, build.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(build.BuildError, match="error: boom") as err:
        build.ensure_cached()
    assert len(calls.read_text().splitlines()) == 1
    [log] = list((tmp_path / "cache").glob("tf*/build.log"))
    assert str(log) in str(err.value) and "apt-get install g++" in str(err.value)
    assert "error: boom" in log.read_text()
    assert not list((tmp_path / "cache").glob("tf*/_tfpipe_ops.so"))
    assert not list((tmp_path / "cache").glob("tf*/.build-*"))
    # the next process falls back at once, with the same reason
    with pytest.raises(build.BuildError, match="an earlier attempt"):
        build.ensure_cached()
    assert len(calls.read_text().splitlines()) == 1
    # `python -m tfpipe.native build` retries (ensure_cached(retry=True))
    with pytest.raises(build.BuildError, match="error: boom"):
        build.ensure_cached(retry=True)
    assert len(calls.read_text().splitlines()) == 2


def test_env_shows_the_native_path_in_use():
    from click.testing import CliRunner

    from tfpipe import native
    from tfpipe.cli.main import cli

    st = native.status()
    r = CliRunner().invoke(cli, ["env", "--json"], env={"COLUMNS": "1000"})
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["tensorflow"]["native_ops"] == st
    r = CliRunner().invoke(cli, ["env"], env={"COLUMNS": "1000"})
    [row] = [ln for ln in r.output.splitlines() if "native ops" in ln]
    if st["active"]:  # the library's file and how it got there
        assert st["path"] in row and st["reason"] in row and Path(st["path"]).is_file()
    else:
        assert f"pure-TF fallback: {st['reason']}" in row


def test_aot_build_reports_failure_and_targets(monkeypatch, tmp_path, capsys):
    """`python -m tfpipe.native build`: next to the package when writable, else into
    the cache; a failure exits 1 with the reason (what `make native` stops on)."""
    import tfpipe.native.build as build

    pkg = tmp_path / "pkg"
    shutil.copytree(build.HERE, pkg, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    monkeypatch.setattr(build, "HERE", pkg)
    monkeypatch.setitem(switches.OVERRIDES, build.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", str(tmp_path / "no-g++"))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")  # main() sets it; restored after
    assert build.main(["build", "--bogus"]) == 2
    assert build.main(["build"]) == 1
    assert "(from CXX) not found" in capsys.readouterr().err
    # which target each case picks, without compiling
    picked = []
    monkeypatch.setattr(build, "compile_into", lambda target, logfile, verbose=False:
                        picked.append(("package", target)) or 0.0)
    monkeypatch.setattr(build, "ensure_cached", lambda key, **kw:
                        picked.append(("cache", build.cache_library(key))) or (None, None))
    key = build.cache_key()
    build.build()
    monkeypatch.setattr(build.os, "access", lambda path, mode: False)  # read-only install
    build.build()
    assert picked == [("package", pkg / f"_tfpipe_ops-{build._tag(key)}.so"),
                      ("cache", build.cache_library(key))]
