"""Throughput of any `tf.data.Dataset`, measured the way a training loop sees it.

A fresh iterator is created for every measurement, the first `warmup` steps
(thread pools starting, shuffle buffers filling, autotune settling) are timed
separately and excluded, and each later `next()` is timed on its own. Nothing
is cached or pre-fetched beyond what the dataset itself does.
"""

from __future__ import annotations

import dataclasses
import resource
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfpipe.system import available_cpus


@dataclass(frozen=True)
class Result:
    """What one measurement saw. Rates are over the timed steps only."""

    steps: int                 # timed steps (batches) actually run
    warmup: int                # steps run before timing started
    elements: int              # elements in the timed steps
    wall_s: float              # wall time of the timed steps
    warmup_s: float            # wall time of the warm-up steps (iterator creation included)
    elements_per_s: float
    batches_per_s: float
    bytes_per_s: float         # from the tensors' nbytes (or element_bytes)
    p50_ms: float              # per-next() latency percentiles
    p90_ms: float
    p99_ms: float
    mean_ms: float
    rss_start_mb: float        # RSS before the iterator was created
    peak_rss_mb: float         # highest RSS seen from iterator creation to the end
    rss_delta_mb: float        # peak_rss_mb - rss_start_mb
    cpu_util: float            # process CPU time / wall / available_cpus, in [0, 1]
    available_cpus: int

    @property
    def mb_per_s(self) -> float:
        return self.bytes_per_s / 1e6

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["mb_per_s"] = self.mb_per_s
        return d


class _RssSampler:
    """Samples this process's RSS in a background thread (peak over a run)."""

    def __init__(self, interval_s: float = 0.005) -> None:
        import psutil

        self._proc = psutil.Process()
        self._interval = interval_s
        self._stop = threading.Event()
        self.start_bytes = self._proc.memory_info().rss
        self.peak_bytes = self.start_bytes
        # ru_maxrss is the lifetime peak (KiB on Linux); if it grows during the run,
        # the run set a new peak that sampling may have missed between samples.
        self._maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = self._proc.memory_info().rss
            if rss > self.peak_bytes:
                self.peak_bytes = rss
            self._stop.wait(self._interval)

    def __enter__(self) -> _RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, self._proc.memory_info().rss)
        maxrss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        if maxrss_after > self._maxrss_before:
            self.peak_bytes = max(self.peak_bytes, maxrss_after)


def _flat(element: Any) -> list[Any]:
    import tensorflow as tf

    return tf.nest.flatten(element)


def element_nbytes(element: Any) -> int:
    """Bytes held by the tensors of one dataset element (strings: their lengths)."""
    import tensorflow as tf

    total = 0
    for t in _flat(element):
        if isinstance(t, tf.RaggedTensor):
            t = t.flat_values
        if isinstance(t, tf.SparseTensor):
            t = t.values
        if t.dtype == tf.string:
            value = t.numpy()
            total += len(value) if isinstance(value, bytes) else sum(len(b) for b in value.ravel())
        else:
            total += int(t.shape.num_elements() or 0) * t.dtype.size
    return total


def elements_in(element: Any, batched: bool) -> int:
    """Elements in one step: the leading dimension of the first tensor when batched."""
    if not batched:
        return 1
    first = _flat(element)[0]
    if len(first.shape) == 0:
        return 1
    return int(first.shape[0])


def measure(dataset: Any, warmup: int = 5, steps: int = 50, *,
            element_bytes: int | None = None, batched: bool = True,
            repeat: bool = True) -> Result:
    """Iterate `dataset` for `warmup` + `steps` steps and time each `next()`.

    `batched`: elements per step are the leading dimension of the first tensor
    (False: one element per step). `element_bytes`: bytes per element, when
    known; otherwise bytes are summed from the tensors actually produced.
    `repeat`: iterate `dataset.repeat()`, as a training loop with
    `steps_per_epoch` does, so a dataset smaller than `warmup + steps` keeps
    going (each new epoch re-fills its buffers inside the timed window, but the
    iterator and its graph are built once, in the warm-up). With `repeat=False`
    the measurement stops when the dataset ends; `Result.steps` says how many
    steps were timed.
    """
    if steps < 1 or warmup < 0:
        raise ValueError(f"steps must be >= 1 and warmup >= 0, got steps={steps}, warmup={warmup}")
    source = dataset.repeat() if repeat else dataset
    latencies: list[float] = []
    n_elements = 0
    n_bytes = 0
    bookkeeping = 0.0  # time spent counting bytes, removed from the wall time
    with _RssSampler() as rss:
        t0 = time.perf_counter()
        it = iter(source)
        step = 0
        t_start = t0
        cpu_start = time.process_time()
        total = warmup + steps
        while step < total:
            if step == warmup:
                t_start = time.perf_counter()
                cpu_start = time.process_time()
            t = time.perf_counter()
            try:
                element = next(it)
            except StopIteration:
                break
            dt = time.perf_counter() - t
            if step >= warmup:
                tb = time.perf_counter()
                latencies.append(dt)
                n_elements += elements_in(element, batched)
                if element_bytes is None:
                    n_bytes += element_nbytes(element)
                bookkeeping += time.perf_counter() - tb
            step += 1
        t_end = time.perf_counter()
        cpu_end = time.process_time()
    timed = len(latencies)
    warmup_s = t_start - t0
    if step == 0:  # not even repeated: the epoch itself is empty
        raise ValueError("the dataset produced no batch: a train split with "
                         "pipeline.drop_remainder: true and fewer records than "
                         "pipeline.batch_size gives none; set a smaller pipeline.batch_size "
                         "or pipeline.drop_remainder: false (or see `tfpipe verify`: every "
                         "record skipped as bad)")
    if timed == 0:
        raise ValueError(f"the dataset produced only {step} steps, fewer than warmup={warmup} + 1")
    wall = max(t_end - t_start - bookkeeping, 1e-9)
    if element_bytes is not None:
        n_bytes = n_elements * element_bytes
    lat_ms = np.asarray(latencies) * 1e3
    cpus = available_cpus()
    return Result(
        steps=timed, warmup=min(warmup, step), elements=n_elements, wall_s=wall,
        warmup_s=warmup_s,
        elements_per_s=n_elements / wall, batches_per_s=timed / wall,
        bytes_per_s=n_bytes / wall,
        p50_ms=float(np.percentile(lat_ms, 50)), p90_ms=float(np.percentile(lat_ms, 90)),
        p99_ms=float(np.percentile(lat_ms, 99)), mean_ms=float(lat_ms.mean()),
        rss_start_mb=rss.start_bytes / 2**20, peak_rss_mb=rss.peak_bytes / 2**20,
        rss_delta_mb=(rss.peak_bytes - rss.start_bytes) / 2**20,
        cpu_util=min(1.0, (cpu_end - cpu_start) / wall / cpus), available_cpus=cpus,
    )
