"""Tiny TFRecord shards shared by the doctor tests."""

from __future__ import annotations

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
