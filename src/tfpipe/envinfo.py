"""What this process runs on: TensorFlow build, devices, XLA, CPUs and RAM, and
tfpipe's environment switches.

`os.cpu_count()` is shown next to `available_cpus()` on purpose: in a
CPU-limited container they differ, and pipelines sized from the former
oversubscribe the machine.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

from tfpipe import switches
from tfpipe._version import __version__
from tfpipe.system import available_cpus, available_memory_bytes

# Build-info keys worth showing (others, e.g. msvcp_dll_names, are noise).
_BUILD_KEYS = ("is_cuda_build", "is_rocm_build", "is_tensorrt_build", "cuda_version",
               "cudnn_version", "rocm_version", "cuda_compute_capabilities")


def _xla_available(tf: Any) -> tuple[bool, str]:
    """Compile a tiny function with jit_compile=True: the only reliable check."""
    try:
        fn = tf.function(lambda x: x * 2.0 + 1.0, jit_compile=True)
        value = float(fn(tf.constant(1.0)).numpy())
        return value == 3.0, "ok" if value == 3.0 else f"wrong result {value}"
    except Exception as exc:  # noqa: BLE001 - any failure means "not usable here"
        return False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"


def _native_status() -> dict[str, Any]:
    """tfpipe.native: whether the C++ kernels run (and from which library) or the
    pure-TF fallback does, and why. The first ask may build the library."""
    try:
        from tfpipe import native

        return native.status()
    except Exception as exc:  # noqa: BLE001 - never let env reporting fail
        reason = f"{type(exc).__name__}: {exc}"
        return {"active": False, "path": None, "reason": reason,
                "detail": f"{reason} (pure-TF fallback)"}


def collect() -> dict[str, Any]:
    """A JSON-ready report of the environment (imports TensorFlow)."""
    info: dict[str, Any] = {
        "tfpipe_version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": {"available": available_cpus(), "os_cpu_count": os.cpu_count()},
        "memory_bytes": {"available": available_memory_bytes()},
        # tfpipe's environment switches (tfpipe.switches; docs/config.md)
        "switches": {r["name"]: {k: v for k, v in r.items() if k != "name"}
                     for r in switches.describe()},
    }
    try:
        import psutil

        info["memory_bytes"]["host_total"] = int(psutil.virtual_memory().total)
    except ImportError:  # pragma: no cover - psutil is a dependency
        pass
    try:
        import tensorflow as tf
    except ImportError as exc:
        info["tensorflow"] = {"installed": False, "error": str(exc)}
        return info
    build = {}
    try:
        raw = dict(tf.sysconfig.get_build_info())
        build = {k: raw[k] for k in _BUILD_KEYS if k in raw}
    except Exception as exc:  # noqa: BLE001 - older builds lack get_build_info
        build = {"error": str(exc)}
    devices = [{"name": d.name, "type": d.device_type}
               for d in tf.config.list_physical_devices()]
    xla_ok, xla_detail = _xla_available(tf)
    info["tensorflow"] = {
        "installed": True,
        "version": tf.__version__,
        "git_version": getattr(tf.version, "GIT_VERSION", ""),
        "build": build,
        "built_with_cuda": bool(tf.test.is_built_with_cuda()),
        "devices": devices,
        "gpus": sum(d["type"] == "GPU" for d in devices),
        "xla": {"available": xla_ok, "detail": xla_detail},
        "native_ops": _native_status(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
    }
    return info
