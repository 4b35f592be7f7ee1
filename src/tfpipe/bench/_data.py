"""A small classification dataset written straight through `tfpipe.records`.

For the bench tests, the check's temp copies and the benchmark when
`tfpipe.convert` is not wanted: JPEG crops of the bundled sample photos, class
k from photo k, split over `shards` shards, with a manifest.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_sample_dataset(out: str | Path, *, n: int = 32, num_classes: int = 4, shards: int = 2,
                         size_range: tuple[int, int] = (48, 64), seed: int = 0,
                         split: str = "train") -> Path:
    from tfpipe.records import (Manifest, ShardEntry, SplitInfo, classification_schema,
                                encode_example)
    from tfpipe.records.writer import shard_name, write_shard
    from tfpipe.sample_data import encode, random_crop, source_photos

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    photos = list(source_photos().items())[:num_classes]
    schema = classification_schema()
    records: list[bytes] = []
    for i in range(n):
        label = i % num_classes
        name, photo = photos[label]
        img = random_crop(photo, rng, size_range)
        records.append(encode_example({
            "image/encoded": encode(img, "jpeg"), "image/format": b"jpeg",
            "image/height": img.shape[0], "image/width": img.shape[1],
            "image/filename": f"{name}/{i:05d}.jpg".encode(),
            "image/source_id": str(i).encode(),
            "image/class/label": label, "image/class/text": name.encode(),
        }, schema))
    entries = []
    for s in range(shards):
        path = out / shard_name(split, s, shards, None)
        info = write_shard(str(path), records[s::shards])
        entries.append(ShardEntry.from_info(info, out))
    manifest = Manifest(schema=schema, splits={split: SplitInfo(shards=entries)},
                        class_names=[name for name, _ in photos])
    manifest.save(out)
    return out
