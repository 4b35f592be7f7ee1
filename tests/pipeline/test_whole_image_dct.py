"""The whole-image resize that presets without a crop op (cifar, medical,
remote-sensing) do first follows `data.dct_scaling` as the eval window does:
a JPEG is decoded at the largest DCT reduction r in {8, 4, 2} with
h >= r * out_h and w >= r * out_w, then resized. Oracle: TF's own
`decode_jpeg(ratio=r)` / `decode_png` + bilinear resize (round, saturate), with
r from the rule written out in Python (native kernels on and off give the same
bytes: test_host_independence's cifar run)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import sample_data

from .conftest import _example, write_shards

OUT = (32, 32)


def _ratio(h: int, w: int) -> int:
    return next((r for r in (8, 4, 2) if h >= r * OUT[0] and w >= r * OUT[1]), 1)


@pytest.fixture(scope="module")
def shard(tmp_path_factory) -> tuple[str, list[tuple[bytes, str]]]:
    photos = list(sample_data.source_photos().values())
    encs = []
    for i, (h, w) in enumerate([(300, 280), (140, 260), (70, 90), (40, 33), (200, 150)]):
        img = np.ascontiguousarray(photos[i % len(photos)][:h, 7:7 + w, :3])
        fmt = "png" if i == 4 else "jpeg"
        encs.append((sample_data.encode(img, fmt), fmt))
    out = tmp_path_factory.mktemp("whole")
    write_shards(out, "train", [_example(e, f, 0) for e, f in encs], 1)
    return str(out / "train-*.tfrecord"), encs


def _want(encs, dct: bool) -> np.ndarray:
    out = []
    for enc, fmt in encs:
        if fmt == "png":
            img = tf.io.decode_png(enc, channels=3)
        else:
            h, w = (int(v) for v in tf.io.extract_jpeg_shape(enc)[:2])
            img = tf.io.decode_jpeg(enc, channels=3, ratio=_ratio(h, w) if dct else 1)
        img = tf.image.resize(img, OUT, method="bilinear")
        out.append(tf.saturate_cast(tf.round(img), tf.uint8).numpy())
    return np.stack(out)


def test_cifar_whole_image_decode_follows_dct_scaling(shard) -> None:
    import tfpipe

    path, encs = shard
    ratios = [_ratio(*(int(v) for v in tf.io.extract_jpeg_shape(e)[:2]))
              for e, f in encs if f == "jpeg"]
    assert set(ratios) == {8, 4, 2, 1}

    def first_batch(dct: bool) -> np.ndarray:
        # padding 0: pad_and_crop is the identity, the train path (not eval's) runs
        cfg = tfpipe.load_config("cifar", {
            "data.path": path, "data.num_classes": 2, "data.output_dtype": "uint8",
            "augment.geometry": {"pad_and_crop": {"padding": 0}},
            "pipeline.batch_size": len(encs), "pipeline.shuffle_buffer": 0,
            "data.dct_scaling": dct})
        return next(iter(tfpipe.build_pipeline(cfg, split="train")))["image"].numpy()

    np.testing.assert_array_equal(first_batch(True), _want(encs, True))
    np.testing.assert_array_equal(first_batch(False), _want(encs, False))
