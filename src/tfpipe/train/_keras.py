"""Keras `fit` with exact mid-epoch resume.

Keras 3's `BackupAndRestore` restores the epoch and reruns the partial one.
`ResumeCheckpoint` saves model + optimizer + `PipelinePosition` every N steps
(and at each epoch end); `fit` restores the latest checkpoint and trains from
exactly that (epoch, step) on a positioned pipeline.

Why `fit` makes two `model.fit` calls when it resumes mid-epoch: with an
unknown dataset cardinality Keras learns the number of steps of an epoch from
the FIRST epoch it runs and then cuts every later epoch to it; with a known
cardinality it runs that many steps every epoch. A resumed first epoch is
shorter (the remainder), so it runs in its own `model.fit(initial_epoch=e,
epochs=e + 1)`, and the following epochs in a second call, on the same
dataset (its next iteration is the next epoch, whole).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import keras
import tensorflow as tf

from tfpipe.errors import ConfigError
from tfpipe.pipeline import build_pipeline, device_stage, set_epoch, settings
from tfpipe.train._epochs import log_resume
from tfpipe.train._position import PipelinePosition, restore


class ResumeCheckpoint(keras.callbacks.Callback):
    """Save model, optimizer and pipeline position every `save_every` steps.

    `position.step` is the number of batches of the current epoch trained on.
    `offset=(epoch, step)` tells the callback that Keras's batch 0 of that epoch
    is pipeline step `step` (a positioned, resumed epoch), which starts at stream
    position `start_offset` (-1: step x batch size). At each epoch end the
    position becomes (epoch + 1, 0) and, with `save_on_epoch_end`, is saved.
    `dataset`: the train dataset of this `fit` call, pinned to Keras's first
    epoch when training begins (Keras under a `tf.distribute` strategy peeks at
    one batch first, which would otherwise use up an epoch number); the
    position follows it (its stream offset: exact resume after skipped records).
    """

    def __init__(self, manager: tf.train.CheckpointManager, position: PipelinePosition,
                 save_every: int, save_on_epoch_end: bool = True,
                 offset: tuple[int, int] | None = None,
                 dataset: tf.data.Dataset | None = None, first_epoch: int | None = None,
                 start_offset: int = -1) -> None:
        super().__init__()
        if save_every < 1:
            raise ConfigError(f"save_every: must be >= 1 step, got {save_every}")
        self.manager, self.position, self.save_every = manager, position, int(save_every)
        self.save_on_epoch_end = save_on_epoch_end
        self.offset = offset
        self.dataset, self.first_epoch = dataset, first_epoch
        self.start_offset = int(start_offset)
        self._base = 0

    def on_train_begin(self, logs: Any = None) -> None:
        if self.dataset is not None and self.first_epoch is not None:
            set_epoch(self.dataset, self.first_epoch)
        self.position.follow(self.dataset)

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        resumed = bool(self.offset) and self.offset[0] == epoch
        self._base = self.offset[1] if resumed else 0
        self.position.set(epoch, self._base, self.start_offset if resumed else 0)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        step = self._base + int(batch) + 1
        self.position.at_step(step)
        if step % self.save_every == 0:
            self.manager.save()

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self.position.set(epoch + 1, 0)
        if self.save_on_epoch_end:
            self.manager.save()


class DeviceStageModel(keras.Model):
    """`model` trained on `augment.pixel_stage: device` batches: its train step first
    runs the device stage (`tfpipe.augment.OnDevice`: L3, L4, normalize on the
    device the step runs on), then `model`'s own train step on the result. The
    weights, optimizer and metrics are `model`'s (it is what gets checkpointed and
    exported); evaluate / predict are `model`'s own (eval batches are not split).
    Made by `device_model`; `fit` uses it by itself in device mode.
    """

    def __init__(self, model: keras.Model, stage: keras.layers.Layer, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inner, self.stage = model, stage
        self.built = True

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        return self.inner(inputs, training=training)

    def train_step(self, data: Any) -> Any:
        x, y, weight = keras.utils.unpack_x_y_sample_weight(data)
        x, y = self.stage(x, y)
        return self.inner.train_step((x, y) if weight is None else (x, y, weight))

    def test_step(self, data: Any) -> Any:
        return self.inner.test_step(data)

    def predict_step(self, data: Any) -> Any:
        return self.inner.predict_step(data)

    @property
    def metrics(self) -> list[Any]:
        return self.inner.metrics

    def reset_metrics(self) -> None:
        self.inner.reset_metrics()


def device_model(model: keras.Model, config: Any) -> keras.Model:
    """For `augment.pixel_stage: device`: a Keras model to `fit` on
    `build_pipeline(config, as_supervised=True)` that applies the device stage of
    `config` inside its train step, then trains `model` (compiled; its optimizer,
    `jit_compile`, `steps_per_execution` and metrics are used as they are).
    For any other config, `model` itself."""
    if settings(config).pixel_stage != "device":
        return model
    if model.optimizer is None:
        raise ConfigError("tfpipe.train.device_model: compile the model first (model.compile)")
    trainer = DeviceStageModel(model, device_stage(config))
    trainer.compile(optimizer=model.optimizer, run_eagerly=model.run_eagerly,
                    jit_compile=model.jit_compile,
                    steps_per_execution=model.steps_per_execution)
    return trainer


def _build_optimizer(model: keras.Model) -> None:
    """Create the optimizer's slots now, so a restore fills them (not a later build)."""
    if not model.built:
        raise ConfigError("tfpipe.train.fit: build the model first (keras.Input / model.build) "
                          "so its weights and optimizer state can be restored")
    opt = model.optimizer
    if opt is None:
        raise ConfigError("tfpipe.train.fit: compile the model first (model.compile)")
    if not opt.built:
        opt.build(model.trainable_variables)


def checkpoint(model: keras.Model, position: PipelinePosition, directory: str | os.PathLike,
               max_to_keep: int = 2) -> tf.train.CheckpointManager:
    """A CheckpointManager in `directory` over model, optimizer and position."""
    _build_optimizer(model)
    ckpt = tf.train.Checkpoint(model=model, optimizer=model.optimizer, position=position)
    return tf.train.CheckpointManager(ckpt, os.fspath(directory), max_to_keep=max_to_keep)


def fit(model: keras.Model, config: Any, epochs: int, directory: str | os.PathLike, *,
        save_every: int = 100, max_to_keep: int = 2, split: str = "train",
        callbacks: list[keras.callbacks.Callback] | None = None,
        position: PipelinePosition | None = None,
        **fit_kwargs: Any) -> list[keras.callbacks.History]:
    """`model.fit` on `build_pipeline(config, as_supervised=True)` for `epochs`
    epochs, checkpointing every `save_every` steps into `directory`, and
    resuming from its latest checkpoint at the exact (epoch, step): the batches
    from there are the ones the uninterrupted run would have seen.

    Raises ResumeError when the checkpoint is of another config, seed or
    dataset. Returns the History of each `model.fit` call (two when resuming
    mid-epoch, see the module docstring). `position`: the `PipelinePosition` of
    `config` to keep current (to read (epoch, step) from your callbacks, which
    run after the checkpoint callback and so see the step just trained).
    """
    if "steps_per_epoch" in fit_kwargs:
        from tfpipe.pipeline import batches_per_pass

        per_pass = batches_per_pass(config, split)
        raise ConfigError(
            f"tfpipe.train.fit: steps_per_epoch={fit_kwargs['steps_per_epoch']!r} is not "
            "supported: Keras then keeps one iterator across its epochs, so a Keras epoch is "
            "no longer a pipeline epoch and the saved (epoch, step) would resume other "
            "batches. Leave it out: each epoch is one pass of the data (tfpipe.pipeline."
            f"batches_per_pass(config) = {per_pass} steps here). For shorter epochs, train on "
            "a smaller split or with a larger pipeline.batch_size. (fit reads one input "
            "pipeline; docs/scale.md's steps_per_epoch for uneven workers is for your own "
            "model.fit on per-worker datasets, without exact resume)")
    # tfpipe shuffles per epoch itself; Keras's default shuffle=True only warns
    # that it ignores itself on a tf.data input
    fit_kwargs.setdefault("shuffle", False)
    position = position if position is not None else PipelinePosition(config, split)
    manager = checkpoint(model, position, directory, max_to_keep)
    restore(manager, position)
    log_resume(position, epochs)
    epoch, step = position.value()
    start_offset = position.offset
    ds = build_pipeline(config, split, epoch=epoch, step=step, as_supervised=True,
                        offset=position.resume_offset())
    # pixel_stage device: the train step runs the device stage first (checkpoint,
    # position and optimizer stay `model`'s, so resume is unchanged)
    trainer = device_model(model, config) if split == "train" else model
    extra = list(callbacks or [])
    histories = []
    if step and epoch < epochs:  # the rest of the interrupted epoch, on its own
        cb = ResumeCheckpoint(manager, position, save_every, offset=(epoch, step),
                              dataset=ds, first_epoch=epoch, start_offset=start_offset)
        with warnings.catch_warnings():
            # the positioned first pass has no declared length (it is shorter than
            # the rest), so Keras calls its end "ran out of data": expected here
            warnings.filterwarnings("ignore", message=".*ran out of data.*")
            histories.append(trainer.fit(ds, initial_epoch=epoch, epochs=epoch + 1,
                                         callbacks=[cb, *extra], **fit_kwargs))
        epoch += 1
    if epoch < epochs:
        cb = ResumeCheckpoint(manager, position, save_every, dataset=ds, first_epoch=epoch)
        histories.append(trainer.fit(ds, initial_epoch=epoch, epochs=epochs,
                                   callbacks=[cb, *extra], **fit_kwargs))
    return histories
