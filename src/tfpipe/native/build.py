"""Compile every `*.cc` of this package into one TensorFlow op library.

    python -m tfpipe.native build [--force] [--verbose]

Where a library lives, and in which order the loader (`tfpipe.native.load`)
looks:

1. next to this file, `_tfpipe_ops-tf<version>-<key>.so`: an ahead-of-time
   build (`python -m tfpipe.native build` when this directory is writable:
   `make native`, a container's build step);
2. the per-user cache, `<cache>/tf<version>-<key>/_tfpipe_ops.so`, with
   `<cache>` = `$TFPIPE_NATIVE_CACHE`, else `$XDG_CACHE_HOME/tfpipe/native`,
   else `~/.cache/tfpipe/native` (the AOT build goes here when the package
   directory is read-only);
3. else the loader builds into the cache on first use (`TFPIPE_NATIVE_BUILD=0`
   forbids that).

`<key>` hashes what the binary depends on: the TensorFlow version, its
compile/link flags, tfpipe's own flags, the machine type, every source and
header file's bytes (native/*.cc, *.h) and the generated header
(`generated()`: pixel.cc's op enum from the colour-chain table,
`tfpipe.native.chain_ops`). An upgraded TensorFlow or an edited kernel never loads
an old library: it is simply not found, and a new one is built.

A cache build runs under an exclusive `fcntl.flock` on `<cache>/tf...-<key>/.lock`,
so processes starting together (tf.data service workers, multi-worker training,
pytest-xdist) compile once; the others wait and load the result. The library
is compiled (all sources as one translation unit) into a temporary directory
beside the target and `os.replace`d into place, so a reader never sees half a
file. A failed build leaves `build.log` and a
`failed.json` marker: later processes fall back at once instead of compiling
again, until the compiler changes or `python -m tfpipe.native build` retries.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("tfpipe.native")

HERE = Path(__file__).resolve().parent
CACHE_ENV = "TFPIPE_NATIVE_CACHE"
BUILD_ENV = "TFPIPE_NATIVE_BUILD"
LIBRARY = "_tfpipe_ops.so"
# -O3 without -march=native: the .so must run on any x86-64 the TF wheel runs on,
# and no FMA contraction, so the float arithmetic matches TF's kernel bit for bit.
# -Wno-deprecated-declarations: TF's headers emit thousands of these, which would
# bury a real error in build.log and in the fallback warning.
FLAGS = ("-std=c++17", "-fPIC", "-O3", "-ffp-contract=off", "-Wno-deprecated-declarations")
# Bump when the build recipe changes in a way FLAGS do not show.
_RECIPE = "2"
_TIMEOUT_S = 900
HOW_TO_FIX = ("install a C++17 compiler (Debian/Ubuntu: apt-get install g++; Fedora: dnf "
              "install gcc-c++) or set CXX, then run `python -m tfpipe.native build` or "
              "restart; TFPIPE_NATIVE=0 silences this")


class BuildError(RuntimeError):
    """The library could not be built; the message says why and what to do."""


def sources(root: Path | None = None) -> list[Path]:
    """Every kernel source that goes into the library (package data: native/*.cc)."""
    return sorted((root or HERE).glob("*.cc"))


def headers(root: Path | None = None) -> list[Path]:
    """The headers the sources include (package data: native/*.h; common.h)."""
    return sorted((root or HERE).glob("*.h"))


def generated() -> dict[str, str]:
    """The headers the build writes beside its translation unit, name -> text:
    `tfpipe_chain_ops.h`, pixel.cc's op enum, from the one colour-chain op table
    (`tfpipe.native.chain_ops`). Generated, never in the source tree, so it cannot
    drift from the table."""
    from tfpipe.native import chain_ops

    return {"tfpipe_chain_ops.h": chain_ops.header()}


def build_allowed() -> bool:
    """False when `TFPIPE_NATIVE_BUILD` is 0/false/off/no: use a prebuilt library or
    the fallback, never compile at run time."""
    from tfpipe import switches

    return bool(switches.get(BUILD_ENV))


def tf_flags() -> tuple[list[str], list[str]]:
    import tensorflow as tf

    return list(tf.sysconfig.get_compile_flags()), list(tf.sysconfig.get_link_flags())


def cache_key() -> str:
    """16 hex digits of sha256(recipe, TF version and flags, our flags, machine,
    every source's and header's name and bytes, every generated header)."""
    import tensorflow as tf

    cflags, lflags = tf_flags()
    h = hashlib.sha256()
    for part in (_RECIPE, tf.__version__, platform.machine(), *FLAGS, "|", *cflags, "|",
                 *lflags):
        h.update(part.encode() + b"\0")
    for src in [*sources(), *headers()]:
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    for name, text in sorted(generated().items()):
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()[:16]


def _tag(key: str) -> str:
    import tensorflow as tf

    return f"tf{tf.__version__}-{key}"


def cache_root() -> Path:
    """`$TFPIPE_NATIVE_CACHE`, else `$XDG_CACHE_HOME/tfpipe/native`, else
    `~/.cache/tfpipe/native`."""
    from tfpipe import switches

    if switches.get(CACHE_ENV):
        return Path(switches.get(CACHE_ENV))
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "tfpipe" / "native"


def package_library(key: str) -> Path:
    """The ahead-of-time library next to this file (may not exist)."""
    return HERE / f"_tfpipe_ops-{_tag(key)}.so"


def cache_library(key: str) -> Path:
    """The per-user cached library (may not exist)."""
    return cache_root() / _tag(key) / LIBRARY


def library_path() -> Path:
    """The library the loader would use now: the AOT one if built, else the cache's
    (built or not)."""
    key = cache_key()
    aot = package_library(key)
    return aot if aot.exists() else cache_library(key)


def compiler() -> list[str] | None:
    """The C++ compiler command: `$CXX` (may hold arguments, e.g. "ccache g++"), else
    g++, c++ or clang++ from PATH. None when `$CXX` is unset and none is found."""
    if os.environ.get("CXX"):
        return shlex.split(os.environ["CXX"])
    for name in ("g++", "c++", "clang++"):
        found = shutil.which(name)
        if found:
            return [found]
    return None


def _compiler_or_raise() -> list[str]:
    cxx = compiler()
    if cxx is None:
        raise BuildError(f"no C++ compiler found (g++, c++, clang++ are not on PATH and CXX "
                         f"is unset); {HOW_TO_FIX}")
    exe = shutil.which(cxx[0])
    if exe is None:
        raise BuildError(f"C++ compiler {cxx[0]!r} (from CXX) not found; {HOW_TO_FIX}")
    return [exe, *cxx[1:]]


def _compiler_identity(cxx: list[str]) -> dict[str, object]:
    """What decides whether a failed build is worth retrying: the compiler command
    and its executable's mtime (a reinstalled or upgraded compiler retries)."""
    try:
        mtime = os.stat(cxx[0]).st_mtime
    except OSError:
        mtime = None
    return {"compiler": cxx, "mtime": mtime}


def command(out: Path, unity: Path, cxx: list[str]) -> list[str]:
    """Compile the one translation unit `unity` (it #includes every source; the
    generated headers lie beside it) and link it into `out`."""
    cflags, lflags = tf_flags()
    return [*cxx, *FLAGS, "-iquote", str(unity.parent), "-shared", str(unity), "-o", str(out),
            *cflags, *lflags]


def _summary(stderr: str, lines: int = 3) -> str:
    """The first error lines of a compiler's output (else its last lines)."""
    text = stderr.strip().splitlines()
    errors = [ln.strip() for ln in text if "error" in ln.lower()]
    return " | ".join((errors or text[-lines:] or ["(no output)"])[:lines])[:600]


def compile_into(target: Path, logfile: Path, verbose: bool = False) -> float:
    """Compile the library to `target` atomically; return the seconds it took.

    Every command and its output go to `logfile`. Raises BuildError (why, the
    first compiler error lines, the log's path) on failure.
    """
    cxx = _compiler_or_raise()
    target.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        out = workdir / LIBRARY
        # One translation unit: TF's headers dominate the compile (~6 s of CPU per
        # source parsing them), so parsing them once is 4x less work than six
        # separate compiles (12 s vs 45 s of CPU here) and faster in wall time
        # up to ~4 cores. The sources' anonymous namespaces merge here: a name
        # clash between two of them fails this compile (and `make test`), never
        # silently. Same flags, so the same float operations: same bits.
        unity = workdir / "_tfpipe_ops_all.cc"
        for name, text in generated().items():
            (workdir / name).write_text(text, encoding="utf-8")
        unity.write_text("".join(f'#include "{src}"\n' for src in sources()))
        cmd = command(out, unity, cxx)
        if verbose:
            print(shlex.join(cmd), file=sys.stderr)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            proc = subprocess.CompletedProcess(cmd, -1, "", f"error: {exc}")
        logfile.write_text(f"$ {shlex.join(cmd)}\n[exit {proc.returncode}]\n{proc.stderr}\n",
                           encoding="utf-8")
        if proc.returncode != 0:
            raise BuildError(f"compiling the native kernels failed (exit {proc.returncode}): "
                             f"{_summary(proc.stderr)}; full log: {logfile}; {HOW_TO_FIX}")
        os.chmod(out, 0o755)
        os.replace(out, target)  # atomic: a concurrent reader sees no file or all of it
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return time.perf_counter() - t0


@contextmanager
def _locked(lockfile: Path) -> Iterator[None]:
    """Exclusive flock on `lockfile` (released when the process dies, so never stale)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: the atomic rename still holds
        yield
        return
    with open(lockfile, "a+b") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("tfpipe.native: waiting for another process building in %s",
                     lockfile.parent)
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_cached(key: str | None = None, force: bool = False, retry: bool = False,
                  verbose: bool = False) -> tuple[Path, float | None]:
    """The cached library for `key`, built under the cache lock if missing (or
    `force`). Returns (path, build seconds or None when it was already there).

    Raises BuildError when it cannot be built, including when an earlier build
    with the same compiler failed (`failed.json`), unless `retry` or `force`.
    """
    key = key or cache_key()
    target = cache_library(key)
    if target.exists() and not force:
        return target, None
    _compiler_or_raise()  # before touching the cache: no compiler, no directory
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"cannot create the native cache {target.parent} ({exc}); set "
                         f"{CACHE_ENV} to a writable directory") from exc
    marker = target.parent / "failed.json"
    with _locked(target.parent / ".lock"):
        if target.exists() and not force:  # another process built it while we waited
            return target, None
        cxx = _compiler_or_raise()
        if marker.exists() and not (force or retry):
            try:
                failed = json.loads(marker.read_text())
            except (OSError, ValueError):
                failed = {}
            if failed.get("identity") == _compiler_identity(cxx):
                raise BuildError(f"{failed.get('reason')} (an earlier attempt; "
                                 "`python -m tfpipe.native build` retries)")
        log.warning("tfpipe.native: compiling the native kernels for this TensorFlow into "
                    "%s (first use, under a minute; `python -m tfpipe.native build` does "
                    "this ahead of time)", target.parent)
        try:
            seconds = compile_into(target, target.parent / "build.log", verbose=verbose)
        except BuildError as exc:
            marker.write_text(json.dumps({"identity": _compiler_identity(cxx),
                                          "reason": str(exc)}))
            raise
        marker.unlink(missing_ok=True)
        log.warning("tfpipe.native: compiled %s in %.1f s", target, seconds)
        return target, seconds


def build(force: bool = False, verbose: bool = False) -> Path:
    """Ahead-of-time build: next to this file when the package directory is
    writable (then older libraries for this TF version there are removed), else
    into the per-user cache. Returns the library's path; raises BuildError."""
    key = cache_key()
    target = package_library(key)
    if not os.access(HERE, os.W_OK):
        return ensure_cached(key, force=force, retry=True, verbose=verbose)[0]
    if target.exists() and not force:
        return target
    # the log goes to the cache (never a stray file in the package or source tree)
    logdir = cache_library(key).parent
    try:
        logdir.mkdir(parents=True, exist_ok=True)
    except OSError:
        logdir = Path(tempfile.gettempdir())
    try:
        compile_into(target, logdir / "build.log", verbose=verbose)
    except OSError as exc:  # writable by os.access, yet not (ACLs, quotas): use the cache
        log.info("tfpipe.native: cannot write %s (%s); building into the cache", HERE, exc)
        return ensure_cached(key, force=force, retry=True, verbose=verbose)[0]
    prefix = target.name.rsplit("-", 1)[0]  # _tfpipe_ops-tf<version>
    for old in HERE.glob(f"{prefix}*.so"):
        if old != target:
            old.unlink(missing_ok=True)
    return target


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "build" or set(argv[1:]) - {"--force", "--verbose"}:
        print("usage: python -m tfpipe.native build [--force] [--verbose]", file=sys.stderr)
        return 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    t = time.perf_counter()
    try:
        path = build(force="--force" in argv, verbose="--verbose" in argv)
    except BuildError as exc:
        print(f"tfpipe.native: {exc}", file=sys.stderr)
        print("tfpipe.native: `python -m tfpipe.native build --verbose` prints every "
              "command.", file=sys.stderr)
        return 1
    import tensorflow as tf

    try:
        tf.load_op_library(str(path))
    except Exception as exc:  # noqa: BLE001 - report any load failure, keep the file
        print(f"tfpipe.native: built {path} but it does not load: {exc}", file=sys.stderr)
        return 1
    print(f"tfpipe.native: {path} ({time.perf_counter() - t:.1f} s)")
    return 0
