"""Shared fixtures for tfpipe.records tests: small JPEGs and encoded examples."""

from __future__ import annotations

import pytest

from tfpipe.records import (
    Manifest,
    ShardedWriter,
    ShardEntry,
    SkippedInput,
    SplitInfo,
    classification_schema,
    detection_schema,
    encode_example,
)


@pytest.fixture(scope="session")
def jpegs() -> list[bytes]:
    from tfpipe.sample_data import make_jpeg_bytes

    return make_jpeg_bytes(8, seed=1, size_range=(32, 64))


@pytest.fixture(scope="session")
def image_sizes(jpegs: list[bytes]) -> list[tuple[int, int]]:
    import io

    from PIL import Image

    return [Image.open(io.BytesIO(b)).size[::-1] for b in jpegs]  # (h, w)


def make_cls_records(jpegs: list[bytes], sizes: list[tuple[int, int]], n: int) -> list[bytes]:
    schema = classification_schema()
    out = []
    for i in range(n):
        h, w = sizes[i % len(jpegs)]
        out.append(encode_example({
            "image/encoded": jpegs[i % len(jpegs)], "image/format": "jpeg",
            "image/height": h, "image/width": w, "image/filename": f"img{i}.jpg",
            "image/class/label": i % 3, "image/class/text": f"c{i % 3}",
        }, schema))
    return out


@pytest.fixture(scope="session")
def cls_records(jpegs: list[bytes], image_sizes: list[tuple[int, int]]) -> list[bytes]:
    return make_cls_records(jpegs, image_sizes, 12)


@pytest.fixture(scope="session")
def det_records(jpegs: list[bytes], image_sizes: list[tuple[int, int]]) -> list[bytes]:
    schema = detection_schema()
    out = []
    for i in range(4):
        h, w = image_sizes[i]
        k = i + 1
        out.append(encode_example({
            "image/encoded": jpegs[i], "image/format": "jpeg", "image/height": h,
            "image/width": w,
            "image/object/bbox/ymin": [0.1 * j for j in range(k)],
            "image/object/bbox/xmin": [0.05] * k,
            "image/object/bbox/ymax": [0.1 * j + 0.1 for j in range(k)],
            "image/object/bbox/xmax": [0.5] * k,
            "image/object/class/label": list(range(k)),
            "image/object/class/text": [f"o{j}" for j in range(k)],
        }, schema))
    return out


def make_dataset(root, records, schema=None, splits=("train", "val"), shard_size=3000,
                 compression=None):
    schema = schema or classification_schema()
    m = Manifest(schema=schema, class_names=["c0", "c1", "c2"], compression=compression,
                 source={"kind": "test"}, settings={"shard_size": shard_size})
    for k, split in enumerate(splits):
        with ShardedWriter(root, split, shard_size, compression) as w:
            for r in records[k::len(splits)]:
                w.write(r)
        m.splits[split] = SplitInfo([ShardEntry.from_info(i, root) for i in w.infos],
                                    [SkippedInput("bad.jpg", "not an image")])
    m.save(root)
    return m


@pytest.fixture(name="make_dataset")
def make_dataset_fixture():
    """Writes a dataset dir (shards + manifest.json) with the real writer."""
    return make_dataset


def convert_photos(root, per_class: int = 10, shard_size: int = 20000):
    """A photo folder converted the way users do it (`tfpipe.convert`): 4 classes,
    train/val 0.8/0.2, several small shards per split; returns the dataset dir."""
    from tfpipe import sample_data
    from tfpipe.convert import convert

    sample_data.make_image_folder(root / "raw", num_classes=4, per_class=per_class,
                                  size_range=(40, 64), seed=0)
    convert(root / "raw", root / "data", split="train=0.8,val=0.2", shard_size=shard_size,
            workers=1)
    return root / "data"


@pytest.fixture(scope="session")
def _converted_once(tmp_path_factory):
    return convert_photos(tmp_path_factory.mktemp("converted"))


@pytest.fixture()
def converted(_converted_once, tmp_path):
    """A fresh copy of one converted photo folder (tests damage it)."""
    import shutil

    dst = tmp_path / "data"
    shutil.copytree(_converted_once, dst)
    return dst
