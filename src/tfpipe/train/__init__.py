"""Training on tfpipe: epochs, `tf.distribute` input, exact mid-epoch resume.

docs/training.md. The position of a run is `(config hash, seed, epoch, step)`
(`PipelinePosition`, saved by `tf.train.Checkpoint` with the model and the
optimizer); resuming positions the record stream before parse and decode
(`build_pipeline(config, epoch=e, step=k)`), so the skipped batches cost
reading, not decoding and augmenting.
"""

from tfpipe.train._distribute import distribute, distributed_dataset_fn, input_pipelines
from tfpipe.train._epochs import epochs
from tfpipe.train._keras import DeviceStageModel, ResumeCheckpoint, checkpoint, device_model, fit
from tfpipe.train._position import (
    PipelinePosition,
    ResumeError,
    config_hash,
    dataset_hash,
    restore,
)

__all__ = [
    "DeviceStageModel",
    "PipelinePosition",
    "ResumeCheckpoint",
    "ResumeError",
    "checkpoint",
    "config_hash",
    "dataset_hash",
    "device_model",
    "distribute",
    "distributed_dataset_fn",
    "epochs",
    "fit",
    "input_pipelines",
    "restore",
]
