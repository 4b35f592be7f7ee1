"""Read stage: shard list -> per-worker assignment -> parallel interleave -> parse.

Every record travels with `(shard index, record index in shard)` so that a bad
record or image can be reported by name under `pipeline.on_error`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import tensorflow as tf

from tfpipe.errors import ConfigError, ManifestError
from tfpipe.records import open_source

IMAGE_KEY = "image/encoded"
LABEL_KEY = "image/class/label"
BOX_KEYS = tuple(f"image/object/bbox/{k}" for k in ("ymin", "xmin", "ymax", "xmax"))
BOX_LABEL_KEY = "image/object/class/label"

# A fixed interleave width when the config says autotune: tf.data's AUTOTUNE cycle
# length is the host's core count, which would make the sample order (and so every
# seed) machine-dependent. 4 open shards keep reads sequential and still mix shards.
DEFAULT_CYCLE = 4


@dataclass(frozen=True)
class Source:
    files: list[str]
    compression: str | None  # tf.data's compression_type: None or "GZIP"
    parse: Callable[[tf.Tensor], dict[str, tf.Tensor]]
    num_classes: int | None


def open_records(path: str | None, split: str, task: str) -> Source:
    """Shards of `split` under `path` via `tfpipe.records.open_source` (manifest-checked)."""
    if not path:
        raise ConfigError("data.path: not set; point it at a converted dataset directory "
                          "or a shard glob (tfpipe convert SRC OUT)")
    required = [IMAGE_KEY] + ([*BOX_KEYS] if task == "detection" else [])
    src = open_source(path, split=split, required=required)
    files = list(src.files)
    if not files:
        raise ManifestError(f"no {split!r} shards under {path!r}")
    names = list(src.class_names or [])
    return Source(files, src.tf_compression or None, src.parse, len(names) or None)


def worker_files(files: list[str], index: int, count: int) -> tuple[list[str], bool]:
    """Files for worker `index` of `count`, and whether elements must be sharded instead.

    Files are split when there are at least as many as workers (each worker then
    reads only its own shards); otherwise every worker reads all files and keeps
    every count-th element, which is still disjoint and complete.
    """
    if count <= 1:
        return files, False
    if len(files) >= count:
        return files[index::count], False
    return files, True


def read_records(files: list[str], compression: str | None, cycle: int,
                 skip_framing: bool = True) -> tf.data.Dataset:
    """Dataset of (shard_id int32, record_index int64, serialized) in a fixed order.

    Framing damage (bad length/CRC, truncation) is a `DataLossError` inside
    `TFRecordDataset`; nothing after it in that file can be trusted to be framed.
    With `skip_framing` the rest of THAT file is dropped with a logged warning
    (other shards go on); otherwise the error propagates. `tfpipe verify --salvage`
    recovers the records after the damage.
    """
    if cycle <= 0:
        cycle = DEFAULT_CYCLE
    cycle = max(1, min(cycle, len(files)))
    ids = tf.data.Dataset.from_tensor_slices(
        (tf.range(len(files), dtype=tf.int32), tf.constant(files)))

    def one_file(shard_id: tf.Tensor, path: tf.Tensor) -> tf.data.Dataset:
        records = tf.data.TFRecordDataset(path, compression_type=compression or "")
        if skip_framing:
            records = records.ignore_errors(log_warning=True)
        return records.enumerate().map(lambda i, r: (shard_id, i, r))

    # deterministic=True: the record order must not depend on thread timing,
    # since the sample index (and so the seed) comes from the position.
    if cycle == 1:
        return ids.interleave(one_file, cycle_length=1, block_length=1)
    return ids.interleave(one_file, cycle_length=cycle, block_length=1,
                          num_parallel_calls=cycle, deterministic=True)
