"""The small dataset and configs of tests/train (also imported by train_child.py).

64 photos (JPEG, some PNG, some grayscale), 4 shards of 16. The label of record
i is i itself (64 classes), so a batch's labels say exactly which records it
holds: "disjoint parts that together are the epoch" is checked on them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

NUM = 64
SHARDS = 4


def write_dataset(out: Path) -> str:
    import tensorflow as tf

    from tfpipe import sample_data

    rng = np.random.default_rng(7)
    photos = list(sample_data.source_photos().values())
    out.mkdir(parents=True, exist_ok=True)
    writers = [tf.io.TFRecordWriter(str(out / f"train-{s:05d}-of-{SHARDS:05d}.tfrecord"))
               for s in range(SHARDS)]
    for i in range(NUM):
        img = sample_data.random_crop(photos[i % len(photos)], rng, (40, 72))
        fmt = "png" if i % 7 == 3 else "jpeg"
        if i % 11 == 5:
            img = img.mean(axis=2).astype(np.uint8)
        feat = {
            "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[sample_data.encode(img, fmt)])),
            "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[fmt.encode()])),
            "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        }
        ex = tf.train.Example(features=tf.train.Features(feature=feat))
        writers[i % SHARDS].write(ex.SerializeToString())
    for w in writers:
        w.close()
    return str(out / "train-*.tfrecord")


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
