"""Small datasets for the CLI tests: intact, a shard with damaged framing, a
record whose image does not decode, and a split smaller than one batch."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tfpipe.records import (Manifest, ShardEntry, classification_schema, decode_example,
                            encode_example, iter_frames, write_shard)

DAMAGED_SHARD = "train-00001-of-00002.tfrecord"
BAD_IMAGE_NAME = "astronaut/00006.jpg"  # record 3 of shard 0 (records alternate shards)


def _write(root: Path, n: int, shards: int) -> Path:
    from tfpipe.bench._data import write_sample_dataset

    return write_sample_dataset(root, n=n, num_classes=4, shards=shards, size_range=(32, 40))


@pytest.fixture(scope="session")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli-data")
    good = _write(root / "good", 16, 2)
    # framing damage: 8 bytes flipped in the middle of shard 1
    shutil.copytree(good, root / "dmgshard")
    shard = root / "dmgshard" / DAMAGED_SHARD
    data = bytearray(shard.read_bytes())
    mid = len(data) // 2
    data[mid:mid + 8] = bytes(b ^ 0xFF for b in data[mid:mid + 8])
    shard.write_bytes(bytes(data))
    # framing intact, manifest consistent, one image that is not an image at all
    shutil.copytree(good, root / "dmgimg")
    f = root / "dmgimg" / "train-00000-of-00002.tfrecord"
    schema = classification_schema()
    records = []
    for i, (_, _, raw) in enumerate(iter_frames(str(f))):
        ex = {k: v[0] for k, v in decode_example(raw).items()}
        if i == 3:
            assert ex["image/filename"].decode() == BAD_IMAGE_NAME
            ex["image/encoded"] = b"this is not an image"
        records.append(encode_example(ex, schema))
    info = write_shard(str(f), records)
    m = Manifest.load(root / "dmgimg")
    m.splits["train"].shards[0] = ShardEntry.from_info(info, root / "dmgimg")
    m.save(root / "dmgimg")
    small = _write(root / "small", 3, 1)
    return {"good": good, "dmgshard": root / "dmgshard", "dmgimg": root / "dmgimg",
            "small": small}


def pipeline_args(data: Path, *extra: str) -> list[str]:
    """--set options for a preset on a tiny dataset (32x32, batch 4)."""
    sets = [f"data.path={data}", "data.image_size=[32,32]", "pipeline.batch_size=4",
            "pipeline.shuffle_buffer=16", *extra]
    return [a for s in sets for a in ("--set", s)]
