"""One small dataset per session: 56 images (JPEG RGB, PNG, grayscale JPEG), 3 shards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

NUM = 56
CLASSES = 4


def _example(enc: bytes, fmt: str, label: int, boxes=None, classes=None) -> bytes:
    import tensorflow as tf

    def b(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=v))

    def i(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    def f(v):
        return tf.train.Feature(float_list=tf.train.FloatList(value=v))

    feat = {"image/encoded": b([enc]), "image/format": b([fmt.encode()]),
            "image/class/label": i([label])}
    if boxes is not None:
        boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
        for k, key in enumerate(("ymin", "xmin", "ymax", "xmax")):
            feat[f"image/object/bbox/{key}"] = f(boxes[:, k].tolist())
        feat["image/object/class/label"] = i(list(classes))
    return tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString()


def write_shards(out: Path, split: str, records: list[bytes], shards: int,
                 eval_links: bool = False) -> list[str]:
    """`{split}-SSSSS-of-NNNNN.tfrecord` shards; `eval_links`: also
    `validation-*` symlinks to them, so that a glob `out/*.tfrecord` reads the same
    records for train and validation (a glob honours the split: records/splits.py)."""
    import tensorflow as tf

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(shards):
        path = out / f"{split}-{s:05d}-of-{shards:05d}.tfrecord"
        with tf.io.TFRecordWriter(str(path)) as w:
            for r in records[s::shards]:
                w.write(r)
        paths.append(str(path))
        if eval_links:
            (out / f"validation-{s:05d}-of-{shards:05d}.tfrecord").symlink_to(path)
    return paths


def make_images(n: int, seed: int = 0) -> list[tuple[bytes, str, np.ndarray]]:
    from tfpipe import sample_data

    rng = np.random.default_rng(seed)
    photos = list(sample_data.source_photos().values())
    out = []
    for i in range(n):
        img = sample_data.random_crop(photos[i % len(photos)], rng, (60, 110))
        fmt = "png" if i % 7 == 3 else "jpeg"
        if i % 11 == 5:
            img = img.mean(axis=2).astype(np.uint8)  # single-channel JPEG
            fmt = "jpeg"
        out.append((sample_data.encode(img, fmt), fmt, img))
    return out


@pytest.fixture(scope="session")
def images():
    return make_images(NUM)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory, images) -> str:
    """Glob of 3 train shards and their 3 validation links: train and eval read
    the same records."""
    out = tmp_path_factory.mktemp("cls")
    recs = [_example(enc, fmt, i % CLASSES) for i, (enc, fmt, _) in enumerate(images)]
    write_shards(out, "train", recs, 3, eval_links=True)
    return str(out / "*.tfrecord")


def base_config(path: str, **over) -> dict:
    """Plain-dict config (same shape as the YAML); `over` = {"section.key": value}."""
    cfg = {
        "seed": 3,
        "data": {"path": path, "image_size": [32, 32],
                 "num_classes": CLASSES},
        "pipeline": {"batch_size": 8, "shuffle_buffer": 64, "num_parallel_calls": 2},
        "augment": {
            "geometry": {"random_resized_crop": {"scale": [0.08, 1.0], "ratio": [0.75, 1.3333]},
                         "flip": {"horizontal": True, "p": 0.5}},
            "pixel": {"brightness": {"max_delta": 0.4},
                      "contrast": {"lower": 0.6, "upper": 1.4}},
        },
    }
    for key, value in over.items():
        *parents, leaf = key.split(".")
        node = cfg
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return cfg
