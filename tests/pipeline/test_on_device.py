"""`augment.pixel_stage: device`: uint8 + draws from the host, L3/L4/normalize in the step.

The oracle is the all-host pipeline of the same config (`pixel_stage: host`):
the device stage (`tfpipe.augment.OnDevice`, run here on the CPU, traced in a
`tf.function` as a train step would) applied to the device-mode batches must
give the same bytes -- images as float32 bit patterns, labels too -- for every
preset with L3 or L4 ops, including mixup + cutmix + hue + gamma, enable_rate
with rows of one batch that disagree (skipped records), uint8 output and a
224x224 batch. The host half must do no pixel work beyond L2: its image is the
L2 output, equal to the host pipeline of the same config with L3/L4 removed
(and uint8 output).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe import augment
from tfpipe.errors import ConfigError
from tfpipe.pipeline import device_stage

from .bad_data import write_bad_dataset
from .conftest import CLASSES

MIX = {"augment.batch.mixup.enabled": True, "augment.batch.cutmix.enabled": True,
       "augment.pixel.hue": {"max_delta": 0.1, "p": 0.5},
       "augment.pixel.gamma": {"lower": 0.7, "upper": 1.4}}

CASES = {
    # the preset at its own 224x224 (where the native kernels run), with every L4 op
    # and the two colour ops the native chain does not have
    "imagenet-224-mixup-cutmix-hue-gamma": pytest.param(("imagenet", MIX), marks=pytest.mark.slow),
    "cifar": ("cifar", {}),
    "medical-ultrasound": ("medical-ultrasound", {"data.image_size": [32, 32]}),
    "remote-sensing": ("remote-sensing", {"data.image_size": [32, 32],
                                          "augment.geometry.elastic.p": 1.0}),
}


BAD_BATCHES = 2  # batch 1 has rows of two planned batches (3 records skipped before it)


def _bits(a) -> np.ndarray:
    a = np.ascontiguousarray(np.asarray(a))
    return a.view(np.uint8).reshape(-1)


def _configs(preset: str, path: str, over: dict) -> tuple:
    base = {"data.path": path, "data.num_classes": CLASSES, "pipeline.batch_size": 8,
            "pipeline.shuffle_buffer": 16, "pipeline.num_parallel_calls": 2, **over}
    return (tfpipe.load_config(preset, base),
            tfpipe.load_config(preset, {**base, "augment.pixel_stage": "device"}))


def _compare(host_cfg, dev_cfg, batches: int = 2) -> list[dict]:
    layer = device_stage(dev_cfg)
    step = tf.function(lambda f, y: layer(f, y))  # as inside a train step
    host = list(tfpipe.build_pipeline(host_cfg, "train").take(batches))
    dev = list(tfpipe.build_pipeline(dev_cfg, "train").take(batches))
    assert len(host) == len(dev) == batches
    for h, d in zip(host, dev):
        assert d["image"].dtype == tf.uint8
        x, y = step({k: v for k, v in d.items() if k != "label"}, d["label"])
        assert x.dtype == h["image"].dtype and x.shape == h["image"].shape
        assert np.array_equal(_bits(x), _bits(h["image"])), "images differ"
        assert y.dtype == h["label"].dtype
        assert np.array_equal(_bits(y), _bits(h["label"])), "labels differ"
    return dev


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_device_stage_is_bit_identical_to_the_host_pipeline(dataset, case):
    preset, over = case
    _compare(*_configs(preset, dataset, over), batches=1)


@pytest.mark.slow
def test_rows_of_one_batch_that_disagree_on_enable_rate(tmp_path, images):
    """Skipped records move samples into batches planned with another enable coin:
    the gated per-row path (L3 on some rows, L4 over all, plain rows restored);
    uint8 output (L3 and L4 on uint8)."""
    path = write_bad_dataset(tmp_path, images)
    host_cfg, dev_cfg = _configs("imagenet", path, {
        "data.image_size": [32, 32], "augment.enable_rate": 0.5, "data.output_dtype": "uint8",
        "augment.batch.mixup.enabled": True, "augment.batch.cutmix.enabled": True})
    dev = _compare(host_cfg, dev_cfg, batches=BAD_BATCHES)
    mixed = [b["augment_enabled"].numpy() for b in dev]
    assert any(m.any() and not m.all() for m in mixed), "no batch with disagreeing rows"


def test_host_half_stops_after_l2_and_the_layer(dataset):
    host_cfg, dev_cfg = _configs("imagenet", dataset, {
        "data.image_size": [32, 32], "augment.batch.mixup.enabled": True,
        "augment.batch.cutmix.enabled": True})
    ds = tfpipe.build_pipeline(dev_cfg, "train")
    spec = ds.element_spec
    assert sorted(spec) == sorted(["image", "label", "augment_enabled", "pixel_params",
                                   "pixel_apply", "mixup_perm", "mixup_lambda", "cutmix_perm",
                                   "cutmix_boxes", "cutmix_weight"])
    assert spec["pixel_params"].shape.as_list() == [8, 3]  # B x the preset's 3 colour ops
    features, label = tfpipe.build_pipeline(dev_cfg, "train", as_supervised=True).element_spec
    assert "label" not in features and features["image"].dtype == tf.uint8
    assert label.shape.as_list() == [8, CLASSES]
    # eval is not split: the eval pipeline's own float32 batches
    ev = tfpipe.build_pipeline(dev_cfg, "val").element_spec
    assert sorted(ev) == ["image", "label"] and ev["image"].dtype == tf.float32

    # no pixel work beyond L2 on the host: the images are the L2 output of the same
    # draws (the host pipeline without L3/L4, uint8 out)
    d = host_cfg.to_dict()
    d["data"]["output_dtype"] = "uint8"
    d["augment"]["pixel"], d["augment"]["batch"] = {}, {}
    batch = next(iter(ds))
    ref = next(iter(tfpipe.build_pipeline(tfpipe.load_config(d), "train")))
    assert np.array_equal(ref["image"].numpy(), batch["image"].numpy())

    layer = device_stage(dev_cfg)
    again = augment.OnDevice.from_config(layer.get_config())
    assert again.spec == layer.spec
    feats = {k: v for k, v in batch.items() if k != "label"}
    assert np.array_equal(again(feats, batch["label"])[0].numpy(),
                          layer(feats, batch["label"])[0].numpy())
    with pytest.raises(ValueError, match="mixup_lambda"):
        layer({k: v for k, v in feats.items() if k != "mixup_lambda"}, batch["label"])
    with pytest.raises(ValueError, match="pass labels"):
        layer(feats)


def test_config_switch_is_validated(dataset):
    with pytest.raises(ConfigError, match="augment.pixel_stage"):
        tfpipe.load_config("imagenet", {"augment.pixel_stage": "gpu"})
    with pytest.raises(ConfigError, match="augment.pixel_stage: 'device' needs data.task"):
        tfpipe.load_config("detection", {"augment.pixel_stage": "device"})
    host = tfpipe.load_config("imagenet", {"data.path": dataset})
    dev = tfpipe.load_config("imagenet", {"data.path": dataset, "augment.pixel_stage": "device"})
    assert tfpipe.load_config(dev.to_dict()) == dev
    assert tfpipe.pipeline.config_hash(tfpipe.pipeline.settings(host)) != \
        tfpipe.pipeline.config_hash(tfpipe.pipeline.settings(dev))
