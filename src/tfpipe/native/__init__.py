"""Optional native (C++ custom op) kernels, with a pure-TF fallback everywhere.

Build once with `python -m tfpipe.native build` (the Makefile's venv target
does). `available()` loads the library lazily; when it is missing, fails to
load, or `TFPIPE_NATIVE=0` is set, it returns False and callers use the pure-TF
path. The native kernels are bit-identical to that path (tests/native), so
switching only changes speed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

import tensorflow as tf

log = logging.getLogger("tfpipe.native")

ENV = "TFPIPE_NATIVE"
_lock = threading.Lock()
_state: dict[str, Any] = {}  # "module" or "reason", once loaded/failed
_local = threading.local()  # `pure_tf()` depth of this thread


def disabled() -> bool:
    """True when `TFPIPE_NATIVE` is set to 0/false/off/no (read on every call), or
    inside `pure_tf()` on this thread."""
    if getattr(_local, "pure", 0):
        return True
    return os.environ.get(ENV, "").strip().lower() in ("0", "false", "off", "no")


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


def load() -> Any | None:
    """The loaded op module, or None (the reason is in `status()`). Logs once."""
    with _lock:
        if not _state:
            from tfpipe.native.build import library_path

            path = library_path()
            if not path.exists():
                _state["reason"] = (f"{path.name} not built (run `python -m tfpipe.native "
                                    "build`)")
            else:
                try:
                    _state["module"] = tf.load_op_library(str(path))
                    _state["path"] = str(path)
                except Exception as exc:  # noqa: BLE001 - any load failure -> fallback
                    _state["reason"] = f"{path.name} failed to load: {exc}"
            if "reason" in _state:
                log.info("tfpipe.native: %s; using the pure-TF fallback", _state["reason"])
        return _state.get("module")


def available() -> bool:
    """Whether the native ops will be used (built, loadable, not disabled)."""
    return not disabled() and load() is not None


def status() -> dict[str, Any]:
    """For `tfpipe env`: {"active": bool, "detail": str}."""
    if disabled():
        why = "off on this thread (native.pure_tf())" if getattr(_local, "pure", 0) \
            else f"disabled by {ENV}=0"
        return {"active": False, "detail": f"{why} (pure-TF fallback)"}
    if load() is None:
        return {"active": False, "detail": _state["reason"] + " (pure-TF fallback)"}
    return {"active": True, "detail": _state["path"]}


def unavailable(kernel: str, source: str) -> RuntimeError:
    """The error a wrapper raises when its kernel cannot run: why (disabled, not
    built, not loadable) or, when the library loads, that it predates `source`."""
    st = status()
    why = st["detail"] if not st["active"] else \
        f"{st['detail']} predates {source} (rebuild: `python -m tfpipe.native build`)"
    return RuntimeError(f"tfpipe.native {kernel} unavailable: {why}")


def resize_bilinear_u8(image: tf.Tensor, size: tuple[int, int],
                       flip: tf.Tensor | bool = False) -> tf.Tensor:
    """Native resize: uint8 [h,w,c] -> [H,W,c], = `round(tf.image.resize(bilinear))`
    saturated to uint8, then mirrored along width when `flip`. Requires `available()`."""
    module = load()
    if module is None:
        raise RuntimeError(f"tfpipe.native unavailable: {_state.get('reason')}")
    return module.tfpipe_resize_bilinear_u8(
        image, tf.constant([int(size[0]), int(size[1])], tf.int32),
        tf.convert_to_tensor(flip, tf.bool))


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
                                       "`python -m tfpipe.native build`)")
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
