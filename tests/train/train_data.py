"""The small dataset and configs of tests/train (also imported by train_child.py).

64 photos (JPEG, some PNG, some grayscale) written the way users write data: a
class-folder tree converted by `tfpipe.convert` (4 shards of 16 records and a
manifest.json; `data.path` is the output directory). Each image is alone in
its class folder `c00` .. `c63`, so the label of a record names the record (64
classes): "disjoint parts that together are the epoch" is checked on labels.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

NUM = 64
SHARDS = 4


def write_raw(out: Path, num: int = NUM) -> Path:
    """`out/c<i>/<i>.jpg|png`: one small image per class folder (record i -> label i)."""
    from tfpipe import sample_data

    rng = np.random.default_rng(7)
    photos = list(sample_data.source_photos().values())
    for i in range(num):
        img = sample_data.random_crop(photos[i % len(photos)], rng, (40, 72))
        fmt = "png" if i % 7 == 3 else "jpeg"
        if i % 11 == 5:
            img = img.mean(axis=2).astype(np.uint8)
        (out / f"c{i:02d}").mkdir(parents=True, exist_ok=True)
        (out / f"c{i:02d}" / f"{i}.{'png' if fmt == 'png' else 'jpg'}").write_bytes(
            sample_data.encode(img, fmt))
    return out


def convert_raw(raw: Path, out: Path, shards: int = SHARDS,
                split: dict[str, float] | None = None) -> str:
    """`tfpipe.convert` of `raw` into `out` (default all in train, `shards` shards
    per split of it all); -> `out`."""
    from tfpipe.convert import convert

    total = sum(f.stat().st_size + 200 for f in raw.rglob("*") if f.is_file())
    # the plan's shard count is ceil(bytes (+ 200 per record) / shard_size)
    convert(str(raw), str(out), split=split or {"train": 1.0},
            shard_size=-(-total // shards), workers=1, seed=0)
    return str(out)


def write_dataset(out: Path) -> str:
    """The converted dataset under `out/data` (raw images under `out/raw`); -> data.path."""
    data = convert_raw(write_raw(out / "raw"), out / "data")
    assert len(list(Path(data).glob("train-*.tfrecord"))) == SHARDS
    assert (Path(data) / "manifest.json").is_file()
    return data


def config(path: str, **over) -> dict:
    """32x32 train config (crop + flip + two pixel ops); `over` = {"a.b": value}."""
    cfg = {
        "seed": 5,
        "data": {"path": path, "image_size": [32, 32], "num_classes": NUM},
        "pipeline": {"batch_size": 8, "shuffle_buffer": 64, "num_parallel_calls": 2},
        "augment": {
            "geometry": {"random_resized_crop": {"scale": [0.2, 1.0]},
                         "flip": {"horizontal": True, "p": 0.5}},
            "pixel": {"brightness": {"max_delta": 0.3}, "contrast": {"lower": 0.7, "upper": 1.3}},
        },
    }
    for key, value in over.items():
        *parents, leaf = key.split(".")
        node = cfg
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return cfg


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.asarray(a)
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def batches(ds) -> list[tuple[np.ndarray, np.ndarray]]:
    """One iteration of a dict dataset: [(image, label)] per batch."""
    return [(b["image"].numpy(), b["label"].numpy()) for b in ds]
