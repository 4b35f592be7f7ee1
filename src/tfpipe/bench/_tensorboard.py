"""Throughput scalars and a profiler trace for TensorBoard.

Scalars are written with `tf.summary` (event files); the trace with
`tf.profiler.experimental.start/stop` (`plugins/profile/<run>/*.xplane.pb`).
Viewing the trace needs `tensorboard` plus the `tensorboard-plugin-profile`
package; writing it needs neither.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tfpipe.bench._measure import Result


def write_scalars(logdir: str | Path, result: Result, step: int = 0, prefix: str = "bench") -> None:
    import tensorflow as tf
    from tensorflow.core.framework import summary_pb2

    # `tf.summary.scalar` lives in the tensorboard package; `tf.summary.write` with
    # the scalars plugin's metadata writes the same event without it.
    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    writer = tf.summary.create_file_writer(str(logdir))
    with writer.as_default():
        for name in ("elements_per_s", "batches_per_s", "mb_per_s", "p50_ms", "p90_ms",
                     "p99_ms", "peak_rss_mb", "cpu_util"):
            tf.summary.write(f"{prefix}/{name}", tf.constant(getattr(result, name), tf.float32),
                             step=step, metadata=metadata)
    writer.flush()
    writer.close()


def trace_to_tensorboard(dataset: Any, logdir: str | Path, steps: int = 5) -> list[Path]:
    """Profile `steps` batches of a fresh iterator; returns the written *.xplane.pb files."""
    import tensorflow as tf

    logdir = Path(logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    it = iter(dataset)
    next(it)  # the first batch pays start-up costs the trace should not show
    tf.profiler.experimental.start(str(logdir))
    try:
        for i in range(steps):
            with tf.profiler.experimental.Trace("bench_step", step_num=i, _r=1):
                try:
                    next(it)
                except StopIteration:
                    break
    finally:
        tf.profiler.experimental.stop()
    time.sleep(0.05)
    return sorted(logdir.glob("plugins/profile/*/*.xplane.pb"))
