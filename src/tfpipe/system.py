"""What this process may use: CPUs and RAM, honouring cgroup quotas.

`os.cpu_count()` reports the host's cores, not a container's quota; sizing
thread pools or worker counts from it oversubscribes CPU-limited containers.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

_CGROUP_ROOT = Path("/sys/fs/cgroup")


def _cgroup_cpu_quota(root: Path = _CGROUP_ROOT) -> float | None:
    """CPUs allowed by the cgroup CPU quota, or None when unlimited/unknown."""
    v2 = root / "cpu.max"
    try:
        quota, period = v2.read_text().split()[:2]
        if quota != "max":
            return int(quota) / int(period)
        return None
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        if quota > 0 and period > 0:
            return quota / period
    except (OSError, ValueError):
        pass
    return None


def available_cpus(root: Path = _CGROUP_ROOT) -> int:
    """CPUs this process may use: affinity mask capped by the cgroup quota (>= 1)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cgroup_cpu_quota(root)
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return max(1, cpus)


def _cgroup_memory_limit(root: Path = _CGROUP_ROOT) -> int | None:
    for path in (root / "memory.max", root / "memory" / "memory.limit_in_bytes"):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text == "max":
            return None
        try:
            value = int(text)
        except ValueError:
            continue
        # cgroup v1 reports "unlimited" as a huge page-aligned number.
        if value < 1 << 60:
            return value
    return None


def available_memory_bytes(root: Path = _CGROUP_ROOT) -> int:
    """RAM this process may use: physical RAM capped by the cgroup memory limit."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        import psutil

        total = psutil.virtual_memory().total
    limit = _cgroup_memory_limit(root)
    return min(total, limit) if limit else total
