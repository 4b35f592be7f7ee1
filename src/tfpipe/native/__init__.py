"""Optional native (C++ custom op) kernels, with a pure-TF fallback everywhere.

Nothing to do by hand: the first `available()` (asked when a pipeline is
built) loads the library, from next to this package (an ahead-of-time
`python -m tfpipe.native build`) or from the per-user cache, and when neither
exists compiles it into the cache (under a minute, once per TensorFlow version
and kernel source; see `tfpipe.native.build`). Without a compiler, on a failed
build or load, it logs ONE warning with the reason and what to install, and
every caller uses its pure-TF twin; `TFPIPE_NATIVE=0` (tfpipe.switches) or
`pure_tf()` forces that twin silently. The kernels are bit-identical to the twins (tests/native), so the
choice only changes speed. `status()` (shown by `tfpipe env`) says which path
runs and why.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

import tensorflow as tf

log = logging.getLogger("tfpipe.native")

ENV = "TFPIPE_NATIVE"
_lock = threading.Lock()
# once per process: "module" + "path" + "how" when loaded, else "reason"
_state: dict[str, Any] = {}
_local = threading.local()  # `pure_tf()` depth of this thread


def disabled() -> bool:
    """True when `TFPIPE_NATIVE` is 0 (tfpipe.switches: read once, a bad value
    named), or inside `pure_tf()` on this thread."""
    if getattr(_local, "pure", 0):
        return True
    from tfpipe import switches

    return not switches.get(ENV)


@contextlib.contextmanager
def baseline_isa() -> Iterator[None]:
    """Native kernels built (traced) inside run the loops a host without AVX/AVX2
    runs (their `isa: 'baseline'` attr): the same bits, for the host-independence
    tests and the benchmarks that compare them. Thread-local, like `pure_tf()`."""
    _local.baseline = getattr(_local, "baseline", 0) + 1
    try:
        yield
    finally:
        _local.baseline -= 1


def isa_attrs() -> dict[str, str]:
    """The `isa` attr for a SIMD kernel built now: {} (the widest loops the CPU
    has: the op's default) unless inside `baseline_isa()`."""
    return {"isa": "baseline"} if getattr(_local, "baseline", 0) else {}


@contextlib.contextmanager
def pure_tf() -> Iterator[None]:
    """Within the block, on this thread only, `available()` is False: what is traced
    there uses the pure-TF twins (stock TF ops only). For graphs that must load
    without the library, e.g. a SavedModel for TF Serving (tfpipe.export)."""
    _local.pure = getattr(_local, "pure", 0) + 1
    try:
        yield
    finally:
        _local.pure -= 1


def _try_load(path: Any, how: str) -> dict[str, Any]:
    try:
        return {"module": tf.load_op_library(str(path)), "path": str(path), "how": how}
    except Exception as exc:  # noqa: BLE001 - any load failure -> fallback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return {"reason": f"{path} failed to load ({first}); delete it and rerun "
                          "`python -m tfpipe.native build --force`"}


def _resolve() -> dict[str, Any]:
    """Package dir (AOT), then the cache, then a first-use build into the cache."""
    from tfpipe.native import build

    try:
        key = build.cache_key()
    except Exception as exc:  # noqa: BLE001 - e.g. a TF without sysconfig flags
        return {"reason": f"cannot key the native build ({type(exc).__name__}: {exc})"}
    aot = build.package_library(key)
    if aot.exists():
        return _try_load(aot, "built ahead of time next to the package")
    cached = build.cache_library(key)
    if cached.exists():
        return _try_load(cached, "cached from an earlier first use or build")
    if not build.build_allowed():
        return {"reason": f"not built and {build.BUILD_ENV}=0 forbids building it at run "
                          "time (run `python -m tfpipe.native build`)"}
    try:
        path, seconds = build.ensure_cached(key)
    except build.BuildError as exc:
        return {"reason": str(exc)}
    except OSError as exc:  # e.g. a read-only cache directory
        return {"reason": f"building into {cached.parent} failed ({exc}); set "
                          f"{build.CACHE_ENV} to a writable directory"}
    how = (f"built on first use in {seconds:.0f} s" if seconds is not None
           else "built by another process")
    return _try_load(path, how)


def load() -> Any | None:
    """The loaded op module, or None (the reason is in `status()`).

    The first call decides, once per process: it may compile the library (see
    the module doc) and, when the fallback is used, logs one warning saying why.
    """
    if disabled():
        return None
    with _lock:
        if not _state:
            _state.update(_resolve())
            if "reason" in _state:
                log.warning("tfpipe.native: %s. Using the pure-TF fallback (same results, "
                            "slower).", _state["reason"])
        return _state.get("module")


def available() -> bool:
    """Whether the native ops will be used (built, loadable, not disabled)."""
    return not disabled() and load() is not None


def status() -> dict[str, Any]:
    """For `tfpipe env`: {"active": bool, "path": library or None, "reason": why this
    path, "detail": one line}. May build the library (the first `load()`)."""
    if disabled():
        reason = ("off on this thread (native.pure_tf())" if getattr(_local, "pure", 0)
                  else f"disabled by {ENV}=0")
        return {"active": False, "path": None, "reason": reason,
                "detail": f"{reason} (pure-TF fallback)"}
    if load() is None:
        return {"active": False, "path": None, "reason": _state["reason"],
                "detail": _state["reason"] + " (pure-TF fallback)"}
    return {"active": True, "path": _state["path"], "reason": _state["how"],
            "detail": _state["path"]}


def unavailable(kernel: str, source: str) -> RuntimeError:
    """The error a wrapper raises when its kernel cannot run: why (disabled, not
    built, not loadable) or, when the library loads, that it predates `source`."""
    st = status()
    why = st["detail"] if not st["active"] else \
        f"{st['detail']} predates {source} (rebuild: `python -m tfpipe.native build --force`)"
    return RuntimeError(f"tfpipe.native {kernel} unavailable: {why}")


def resize_bilinear_u8(image: tf.Tensor, size: tuple[int, int],
                       flip: tf.Tensor | bool = False) -> tf.Tensor:
    """Native resize: uint8 [h,w,c] -> [H,W,c], = `round(tf.image.resize(bilinear))`
    saturated to uint8, then mirrored along width when `flip`. Requires `available()`."""
    module = load()
    if module is None:
        raise unavailable("resize", "ops.cc")
    return module.tfpipe_resize_bilinear_u8(
        image, tf.constant([int(size[0]), int(size[1])], tf.int32),
        tf.convert_to_tensor(flip, tf.bool), **isa_attrs())


def has_crop_window() -> bool:
    """Whether `crop_window` can run now (an older build predates window.cc)."""
    return available() and hasattr(load(), "tfpipe_crop_window")


def crop_window(draws: tf.Tensor, height: Any, width: Any,
                ratio: tuple[float, float]) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """Native `tfpipe.augment.crop_window_from_draws`: (offset_y, offset_x, crop_h,
    crop_w) int32 scalars from float32 draws [4, attempts] (row 1 = aspect) and the
    image size, bit-identical to the pure-TF reference. Requires `has_crop_window()`."""
    module = load()
    if module is None or not hasattr(module, "tfpipe_crop_window"):
        why = _state.get("reason") or ("the built library predates window.cc (rebuild: "
                                       "`python -m tfpipe.native build --force`)")
        raise RuntimeError(f"tfpipe.native crop window unavailable: {why}")
    import numpy as np

    # float32 attr values, the same constants TF makes of the Python floats in the
    # reference's `hf * r_hi`, `wf / r_lo` and `in_ratio < r_lo`
    lo, hi = (float(np.float32(r)) for r in ratio)
    window = module.tfpipe_crop_window(tf.convert_to_tensor(draws, tf.float32),
                                       tf.cast(height, tf.int32), tf.cast(width, tf.int32),
                                       ratio=[lo, hi])
    oy, ox, ch, cw = tf.unstack(window, num=4)
    return oy, ox, ch, cw
