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
    """Glob of the shards (train, and validation links to them); record i goes to
    shard i % 3 as record i // 3."""
    recs = []
    for i, (enc, fmt, _) in enumerate(images):
        enc = BAD.get((i % SHARDS, i // SHARDS), enc)
        recs.append(_example(enc, fmt, i % CLASSES))
    write_shards(out, "train", recs, SHARDS, eval_links=True)
    return str(out / "*.tfrecord")


# ------------------------------------------------------------ converted data
def converted_dataset(out: Path, per_class: int = 12, shard_size: int = 30_000) -> Path:
    """A photo folder (4 classes, small images) through `tfpipe.convert` (the
    README's path): train/val shards + manifest.json under `out/data`."""
    from tfpipe import sample_data
    from tfpipe.convert import convert

    sample_data.make_image_folder(out / "raw", num_classes=CLASSES, per_class=per_class,
                                  size_range=(40, 72), seed=0)
    convert(out / "raw", out / "data", split="train=0.8,val=0.2", shard_size=shard_size,
            workers=1)
    return out / "data"


def _manifest(data: Path) -> dict:
    import json

    return json.loads((data / "manifest.json").read_text())


def shard_paths(data: Path, split: str) -> list[str]:
    """The split's shards, in the manifest's order (absolute paths)."""
    return [str(data / s["path"]) for s in _manifest(data)["splits"][split]["shards"]]


def corrupt_records(data: Path, split: str, bad: list[tuple[int, int]]) -> None:
    """Replace the image bytes of record r of shard k (each (k, r) of `bad`) with
    bytes that are no image; the record counts stay, and the manifest's sizes and
    sha256 follow the rewritten shards (the data stays "valid", only undecodable)."""
    import hashlib
    import json
    import os

    import tensorflow as tf

    manifest = _manifest(data)
    entries = manifest["splits"][split]["shards"]
    for k in sorted({k for k, _ in bad}):
        path = data / entries[k]["path"]
        records = list(tf.data.TFRecordDataset(str(path)).as_numpy_iterator())
        for kk, r in bad:
            if kk == k:
                ex = tf.train.Example.FromString(records[r])
                ex.features.feature["image/encoded"].bytes_list.value[:] = [
                    b"\xff\xd8\xff\xe0 this is no jpeg"]
                records[r] = ex.SerializeToString()
        with tf.io.TFRecordWriter(str(path)) as w:
            for rec in records:
                w.write(rec)
        entries[k]["num_bytes"] = os.path.getsize(path)
        entries[k]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (data / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))


def edit_count(data: Path, split: str, shard: int, add: int) -> None:
    """Raise the manifest's record count of one shard by `add` (a stale or edited
    manifest: the shards hold fewer records than it lists)."""
    import json

    manifest = _manifest(data)
    manifest["splits"][split]["shards"][shard]["num_records"] += add
    (data / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
