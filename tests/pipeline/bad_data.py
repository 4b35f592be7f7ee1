"""A 56-record, 3-shard dataset with undecodable images at known records.

Shared by the tests that need skipped records in the middle of the stream
(reproducibility, enable_rate gating): each skip shifts every later sample into
another batch than the one it was planned in.
"""

from __future__ import annotations

from pathlib import Path

try:
    from .conftest import CLASSES, _example, write_shards
except ImportError:  # imported by path
    from conftest import CLASSES, _example, write_shards  # type: ignore[no-redef]

# (shard, record in shard) -> bytes that are no image
BAD = {(0, 3): b"\xff\xd8\xff\xe0 not really a jpeg", (0, 7): b"hello, I am text",
       (2, 5): b"\x89PNG\r\n\x1a\n broken"}
SHARDS = 3


def write_bad_dataset(out: Path, images) -> str:
    """Glob of the shards; record i goes to shard i % 3 as record i // 3."""
    recs = []
    for i, (enc, fmt, _) in enumerate(images):
        enc = BAD.get((i % SHARDS, i // SHARDS), enc)
        recs.append(_example(enc, fmt, i % CLASSES))
    write_shards(out, "train", recs, SHARDS)
    return str(out / "train-*.tfrecord")
