"""Labels against `[0, num_classes)`: `data.label_offset` applied, range checked.

A label outside the range used to become an all-zero one-hot row (or an index a
loss reads out of bounds) without a word; a 1-based label set (1..6 with
`num_classes: 6`) is the common case. Two checks, both naming the range found
and the fix (`data.label_offset`, `data.num_classes`):
- at build time, from the label range a manifest records (`tfpipe adopt`
  stores it): free, before a single record is read;
- in the graph, per batch (one compare over `[B]` labels, no per-sample work):
  the first label out of range fails the iteration with its value and sample
  index. It runs after the bad-record isolation, so `on_error: skip` never
  swallows it: a wrong label range is a config error, not a damaged record.
`tfpipe check` scans the records and names shard and record (bench/check.py).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe.errors import ConfigError


def fix_text(lo: int, hi: int, num_classes: int, offset: int) -> str:
    """The way on for stored labels in [lo, hi] (before the offset)."""
    if lo - offset == 1 and hi - offset == num_classes and offset == 0:
        return "the labels are 1-based: set data.label_offset: 1"
    if hi - offset >= num_classes and lo - offset >= 0:
        return (f"set data.num_classes: {hi - offset + 1} (or more), or data.label_offset "
                "if the labels do not start at 0")
    return f"set data.label_offset: {lo} if the labels start at {lo}, and data.num_classes"


def check_range(lo: int, hi: int, num_classes: int | None, offset: int, where: str) -> None:
    """Raise `ConfigError` when stored labels in [lo, hi] minus `offset` leave
    [0, num_classes) (num_classes None: only negatives are wrong)."""
    a, b = lo - offset, hi - offset
    if a >= 0 and (num_classes is None or b < num_classes):
        return
    n = "?" if num_classes is None else num_classes
    raise ConfigError(
        f"{where}: labels range over [{lo}, {hi}]"
        + (f" (minus data.label_offset {offset}: [{a}, {b}])" if offset else "")
        + f", outside [0, {n}) (data.num_classes {n}): {fix_text(lo, hi, num_classes or hi + 1, offset)}")


def check_manifest_labels(stats: Any, num_classes: int | None, offset: int, where: str) -> None:
    """The build-time check from a manifest's `source.labels` ({key, min, max}),
    when the manifest has one; nothing otherwise."""
    if not isinstance(stats, dict) or not all(isinstance(stats.get(k), int)
                                              for k in ("min", "max")):
        return
    check_range(stats["min"], stats["max"], num_classes, offset,
                f"{where} (label key {stats.get('key')!r}, from its manifest)")


def offset_and_check(labels: tf.Tensor, index: tf.Tensor | None, num_classes: int | None,
                     offset: int) -> tf.Tensor:
    """`labels - offset`, failing the iteration on the first label of the batch
    outside [0, num_classes) (num_classes None: below 0) with its value, sample
    index and the fix. Values are unchanged, so outputs stay bit-identical."""
    if offset:
        labels = labels - tf.constant(offset, labels.dtype)
    bad = labels < 0
    if num_classes:
        bad = tf.logical_or(bad, labels >= num_classes)
    first = tf.argmax(tf.cast(bad, tf.int32))  # 0 when none: only read on failure
    value = tf.gather(labels, first)
    where = tf.gather(index, first) if index is not None else first
    n = num_classes if num_classes else "?"
    msg = tf.strings.format(
        "label {} (stored value {}) of sample {} is outside [0, " + str(n) + "): "
        "data.label_offset is " + str(offset) + ", data.num_classes " + str(n)
        + ". For 1-based labels set data.label_offset: 1; else set data.num_classes to "
        "cover the labels (`tfpipe check CONFIG` names the shard and record of each)",
        (value, value + offset, where))
    ok = tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [msg])
    with tf.control_dependencies([ok]):
        return tf.identity(labels)
