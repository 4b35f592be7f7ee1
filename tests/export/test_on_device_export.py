"""`augment.pixel_stage: device` leaves serving alone: the export of a device-mode
config has the same signatures and the same preprocess bytes as the host-mode
export (the device stage is train-only; serving runs the eval preprocessing)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.xdist_group("export")


def test_device_mode_export_equals_the_host_export(config, keras_model, exported, loaded,
                                                   records, tmp_path):
    from tfpipe.export import export_serving

    dev = {**config, "augment": {"pixel_stage": "device",
                                 "pixel": {"brightness": {"max_delta": 0.3}},
                                 "batch": {"mixup": {"alpha": 0.2}}},
           "data": {**config["data"], "num_classes": 2}}
    res = export_serving(dev, keras_model, tmp_path, version=3, model_name="tiny", warmup=0,
                         serving_config=False, top_k=2)
    assert res.signatures == exported.signatures
    again = tf.saved_model.load(res.version_dir)
    blobs = tf.constant(records[1])
    a = loaded.signatures["preprocess"](image_bytes=blobs)["image"].numpy()
    b = again.signatures["preprocess"](image_bytes=blobs)["image"].numpy()
    assert a.dtype == b.dtype == np.float32 and np.array_equal(a.view(np.uint32), b.view(np.uint32))
