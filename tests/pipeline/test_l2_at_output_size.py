"""Without a crop op first, the decoded image is resized to `image_size` BEFORE the
L2 ops, so their pixel parameters are output pixels (docs/pipeline.md, "L2 at the
output size"). Oracle: TF's own decode_jpeg + tf.image.resize (bilinear, rounded),
then an integer shift of at most `padding` output pixels with zero fill."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import sample_data
from tfpipe.pipeline import build_pipeline

from .conftest import _example, base_config, write_shards

PAD = 3


@pytest.mark.slow  # one pipeline build: ~5 s alone, 16-24 s on the loaded 2-core box
def test_pad_and_crop_shifts_by_output_pixels(tmp_path) -> None:
    photo = list(sample_data.source_photos().values())[0]
    src = np.ascontiguousarray(photo[:70, :90])  # 70x90 source, 32x32 output
    enc = sample_data.encode(src, "jpeg")
    write_shards(tmp_path, "train", [_example(enc, "jpeg", i % 4) for i in range(8)], 1)
    cfg = base_config(str(tmp_path / "train-*.tfrecord"), **{
        # full-size decode, as the reference below (70x90 for 32x32 would be
        # DCT-scaled by 1/2: tests/pipeline/test_whole_image_dct.py)
        "data.dct_scaling": False,
        "data.output_dtype": "uint8", "pipeline.batch_size": 8, "pipeline.shuffle_buffer": 8,
        "augment.geometry": {"pad_and_crop": {"padding": PAD, "fill_mode": "constant"}},
        "augment.pixel": {}})
    images = next(iter(build_pipeline(cfg)))["image"].numpy()
    decoded = tf.io.decode_jpeg(enc, channels=3)
    ref = tf.cast(tf.clip_by_value(tf.round(tf.image.resize(decoded, (32, 32))), 0, 255),
                  tf.uint8).numpy()
    padded = np.pad(ref, [(PAD, PAD), (PAD, PAD), (0, 0)])
    shifts = []
    for out in images:
        found = [(dy, dx) for dy in range(-PAD, PAD + 1) for dx in range(-PAD, PAD + 1)
                 if np.array_equal(out, padded[PAD - dy:PAD - dy + 32, PAD - dx:PAD - dx + 32])]
        assert found, "output is not an integer shift of the resized image"
        shifts.append(found[0])
    assert len(set(shifts)) > 1  # the shifts are drawn, not all zero
