"""`tfpipe.train.fit` with `augment.pixel_stage: device`: same weights, exact resume.

Two runs of the same model (same initial weights) over one epoch of 4 steps
with mixup + cutmix (labels mixed on the device): the all-host pipeline,
uninterrupted; and the device mode interrupted mid-epoch (an exception after
step 3, the last checkpoint at step 2) then resumed by a second `fit` from the
checkpoint. On CPU both end with bit-identical weights: the device stage gives
the host pipeline's batches, and resume positions the same pipeline as before.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe.train
from train_data import config

OVER = {"augment.batch": {"mixup": {"alpha": 0.2, "p": 0.5}, "cutmix": {"alpha": 1.0, "p": 0.5}},
        "pipeline.batch_size": 16}
EPOCHS = 1


def _model() -> keras.Model:
    keras.utils.set_random_seed(1)
    m = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Flatten(), keras.layers.Dense(64)])
    m.compile(keras.optimizers.SGD(0.05, momentum=0.9),
              keras.losses.CategoricalCrossentropy(from_logits=True))
    return m


class _Crash(keras.callbacks.Callback):
    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.seen = at, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.at:
            raise RuntimeError("crash")


def _weights(m: keras.Model) -> list[np.ndarray]:
    return [w.numpy() for w in m.weights]


@pytest.mark.slow
def test_device_mode_trains_the_same_weights_and_resumes_exactly(train_dataset, tmp_path):
    host_cfg = config(train_dataset, **OVER)
    dev_cfg = config(train_dataset, **OVER, **{"augment.pixel_stage": "device"})
    m = _model()
    tfpipe.train.fit(m, host_cfg, EPOCHS, tmp_path / "host", save_every=2, verbose=0)
    runs = {"host": _weights(m)}
    # 4 steps per epoch (64 records / 16): crash after step 3, the last checkpoint
    # the one of step 2: the resume is mid-epoch
    m = _model()
    with pytest.raises(RuntimeError, match="crash"):
        tfpipe.train.fit(m, dev_cfg, EPOCHS, tmp_path / "resume", save_every=2, verbose=0,
                         callbacks=[_Crash(3)])
    last = tf.train.latest_checkpoint(str(tmp_path / "resume"))
    saved = [int(tf.train.load_variable(last, f"position/{k}/.ATTRIBUTES/VARIABLE_VALUE"))
             for k in ("epoch", "step")]
    assert saved == [0, 2]
    position = tfpipe.train.PipelinePosition(dev_cfg)
    m = _model()  # a fresh process would start from fresh weights
    tfpipe.train.fit(m, dev_cfg, EPOCHS, tmp_path / "resume", save_every=2, verbose=0,
                     position=position)
    assert position.value() == (EPOCHS, 0)
    runs["resumed"] = _weights(m)
    assert all(np.array_equal(a, b) for a, b in zip(runs["host"], runs["resumed"]))
    # the run trained at all (mixup labels were a valid target)
    assert not all(np.array_equal(a, b) for a, b in zip(runs["host"], _weights(_model())))


def test_device_model_wraps_only_device_configs(train_dataset):
    m = _model()
    assert tfpipe.train.device_model(m, config(train_dataset)) is m
    wrapped = tfpipe.train.device_model(m, config(train_dataset,
                                                  **{"augment.pixel_stage": "device"}))
    assert isinstance(wrapped, tfpipe.train.DeviceStageModel)
    assert wrapped.optimizer is m.optimizer and wrapped.inner is m
