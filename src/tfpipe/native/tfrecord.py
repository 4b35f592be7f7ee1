"""Native TFRecord walk past damage (`TfpipeTfrecordWalk`, tfrecord_walk.cc).

`tf.data.TFRecordDataset` ends a file at its first bad frame. `walk(path,
offset, index)` walks the rest of an uncompressed TFRecord file exactly as
`tfpipe.records.framing.walk` (and so `tfpipe verify --salvage`) does: the runs
of intact records after the damage, as (start offset, count, first index) for
``TFRecordDataset(byte_offsets=start).take(count)``, and one finding per
damaged range. `tfpipe.pipeline` calls it only when a shard's reader stopped
before the end of the file. Without the native library (TFPIPE_NATIVE=0, not
built) the pipeline reports the loss but cannot read past it.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from tfpipe import native


class Walk(NamedTuple):
    segment_starts: tf.Tensor  # int64 [k]
    segment_counts: tf.Tensor  # int64 [k]
    segment_indices: tf.Tensor  # int64 [k]: record ordinal of each run's first record
    finding_offsets: tf.Tensor  # int64 [m]
    finding_ends: tf.Tensor  # int64 [m]: where readable data resumes
    finding_records_lost: tf.Tensor  # int64 [m]: -1 when unknowable (garbage skipped)
    finding_kinds: tf.Tensor  # string [m]: corrupted-length | truncated | corrupted-data | ...
    file_size: tf.Tensor  # int64 scalar


def available() -> bool:
    """Native ops enabled and the built library has the TFRecord walk kernel."""
    return native.available() and hasattr(native.load(), "tfpipe_tfrecord_walk")


def walk(path: tf.Tensor | str, offset: tf.Tensor | int, index: tf.Tensor | int = 0) -> Walk:
    """Walk `path` from the frame start `offset` (record ordinal `index`) to its end."""
    if not available():
        raise native.unavailable("TFRecord walk", "tfrecord_walk.cc")
    out = native.load().tfpipe_tfrecord_walk(
        tf.convert_to_tensor(path, tf.string), tf.cast(offset, tf.int64),
        tf.cast(index, tf.int64))
    return Walk(*out)
