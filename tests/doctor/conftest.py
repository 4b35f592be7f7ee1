"""Tiny TFRecord shards shared by the doctor tests."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="session")
def record_files(tmp_path_factory) -> list[str]:
    import tensorflow as tf

    out = tmp_path_factory.mktemp("doctor-records")
    paths = []
    for s in range(3):
        path = out / f"train-{s:05d}-of-00003.tfrecord"
        with tf.io.TFRecordWriter(str(path)) as w:
            for i in range(4):
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i, s, 0, 1]))}))
                w.write(ex.SerializeToString())
        paths.append(str(path))
    return paths


@pytest.fixture(scope="session")
def converted(tmp_path_factory) -> dict[str, str]:
    """Classification (image folder), detection (COCO JSON), pose (COCO JSON with
    keypoints), segmentation (images + masks) and tabular (the CTR
    table, for the ctr preset) datasets, converted;
    each train split holds at least one batch of every preset (cifar: 128, detection:
    16), or the train build refuses the config (an epoch of 0 batches)."""
    from tfpipe import sample_data
    from tfpipe.convert import convert

    root = tmp_path_factory.mktemp("doctor-presets")
    sample_data.make_image_folder(root / "folder", num_classes=2, per_class=140,
                                  size_range=(40, 60))
    convert(root / "folder", root / "cls", split="train=0.5,val=0.5", workers=1)

    coco = root / "coco"
    coco.mkdir()
    images, annotations = [], []
    for i, jpeg in enumerate(sample_data.make_jpeg_bytes(48, seed=1)):
        name = f"{i}.jpg"
        (coco / name).write_bytes(jpeg)
        images.append({"id": i, "file_name": name})
        annotations.append({"id": i, "image_id": i, "category_id": 1 + i % 2,
                            "bbox": [2.0, 3.0, 10.0, 12.0]})
    (coco / "ann.json").write_text(json.dumps({
        "images": images, "annotations": annotations,
        "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]}))
    convert(coco / "ann.json", root / "det", format="coco", split="train=0.5,val=0.5",
            workers=1)
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "features"))
    from tabular_oracle import make_ctr_dataset

    # the ctr preset (batch 1024): a synthetic CTR table converted with --stats
    _, table = make_ctr_dataset(root, rows=1500)
    # the segmentation presets (batch 16 at most): images + masks, converted
    seg = sample_data.make_segmentation_folder(root / "segsrc", num_images=20,
                                               size_range=(40, 60))
    convert(seg / "images", root / "seg", masks=seg / "masks", classes=seg / "classes.txt",
            workers=1)
    # the pose preset (batch 16, keypoints): the pose sample's COCO, converted
    from tfpipe.convert.samples import make_pose_coco

    pose = make_pose_coco(root / "posesrc", num_images=16)
    convert(pose, root / "pose", workers=1)
    return {"classification": str(root / "cls"), "detection": str(root / "det"),
            "segmentation": str(root / "seg"), "pose": str(root / "pose"), "tabular": table}
