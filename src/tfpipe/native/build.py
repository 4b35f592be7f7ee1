"""Compile every `*.cc` here into `_tfpipe_ops-tf<version>.so` next to this file.

    python -m tfpipe.native build [--force] [--verbose]

Uses the compile/link flags of the installed TensorFlow
(`tf.sysconfig.get_compile_flags()` / `get_link_flags()`); the TF version is in
the file name so an upgraded TensorFlow never loads a library built against
another ABI (it falls back to pure TF until rebuilt).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "ops.cc"
# Every *.cc here goes into the one library (ops.cc, affine.cc, ...).
SOURCES = sorted(HERE.glob("*.cc"))


def library_path() -> Path:
    """Where the library for the installed TensorFlow lives (built or not)."""
    import tensorflow as tf

    return HERE / f"_tfpipe_ops-tf{tf.__version__}.so"


def compiler() -> str | None:
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") \
        or shutil.which("clang++")


def command(out: Path) -> list[str]:
    import tensorflow as tf

    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found (set CXX, or install g++)")
    # -O3 without -march=native: the .so must run on any x86-64 the wheel runs on,
    # and no FMA contraction, so the float arithmetic matches TF's kernel bit for bit.
    return [cxx, "-std=c++17", "-shared", "-fPIC", "-O3", "-ffp-contract=off",
            *map(str, SOURCES), "-o", str(out), *tf.sysconfig.get_compile_flags(),
            *tf.sysconfig.get_link_flags()]


def build(force: bool = False, verbose: bool = False) -> Path:
    """Build the library if missing or older than ops.cc; return its path.

    Raises RuntimeError with the compiler's output on failure.
    """
    target = library_path()
    if not force and target.exists() and target.stat().st_mtime >= max(
            s.stat().st_mtime for s in SOURCES):
        return target
    # Compile to a temporary name and rename: a concurrent loader never sees half a file.
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=HERE)
    os.close(fd)
    cmd = command(Path(tmp))
    if verbose:
        print(" ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            names = ", ".join(s.name for s in SOURCES)
            raise RuntimeError(f"compiling {names} failed ({proc.returncode}):\n"
                               f"{proc.stderr[-4000:]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "build":
        print("usage: python -m tfpipe.native build [--force] [--verbose]", file=sys.stderr)
        return 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    t = time.perf_counter()
    try:
        path = build(force="--force" in argv, verbose="--verbose" in argv)
    except RuntimeError as exc:
        print(f"tfpipe.native: {exc}", file=sys.stderr)
        print("tfpipe.native: how to fix: install a C++17 compiler (g++) and the TensorFlow "
              "that tfpipe uses, or set CXX; `python -m tfpipe.native build --verbose` "
              "prints the full command.", file=sys.stderr)
        return 1
    import tensorflow as tf

    try:
        tf.load_op_library(str(path))
    except Exception as exc:  # noqa: BLE001 - report any load failure, keep the file
        print(f"tfpipe.native: built {path} but it does not load: {exc}", file=sys.stderr)
        return 1
    print(f"tfpipe.native: {path} ({time.perf_counter() - t:.1f} s)")
    return 0
