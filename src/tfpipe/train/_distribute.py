"""Input for `tf.distribute`: one tfpipe pipeline per input pipeline.

`distributed_dataset_fn` is the `dataset_fn` of
`strategy.distribute_datasets_from_function`: from the `tf.distribute.InputContext`
it takes the per-replica batch (`get_per_replica_batch_size` of the config's
GLOBAL `pipeline.batch_size`) and the pipeline's part of the data
(`build_pipeline(worker=context)`: input pipeline `input_pipeline_id` of
`num_input_pipelines` reads a disjoint part, together all of it, with its own
sample and batch seeds).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import tensorflow as tf

from tfpipe.errors import ConfigError
from tfpipe.pipeline import build_pipeline, settings


def distributed_dataset_fn(config: Any, split: str = "train", epoch: int = 0, step: int = 0,
                           as_supervised: bool = True,
                           built: list[tf.data.Dataset] | None = None,
                           ) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
    """The `dataset_fn(input_context)` for `strategy.distribute_datasets_from_function`.

    `pipeline.batch_size` is the global batch: each replica gets
    `batch_size / num_replicas_in_sync` (it must divide). `step` counts global
    steps; a pipeline that feeds several replicas (PER_WORKER replication) is
    positioned at `step * replicas_per_pipeline` of its own batches. `built`
    (a list) collects every dataset made, e.g. to `set_epoch` them.
    """
    s = settings(config)

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        try:
            per_replica = context.get_per_replica_batch_size(s.batch_size)
        except ValueError:
            raise ConfigError(f"pipeline.batch_size: the global batch {s.batch_size} does not "
                              f"divide among {context.num_replicas_in_sync} replicas") from None
        per_pipeline = context.num_replicas_in_sync // context.num_input_pipelines
        local = dataclasses.replace(s, batch_size=per_replica)
        ds = build_pipeline(local, split, epoch=epoch, step=step * per_pipeline,
                            worker=context, as_supervised=as_supervised)
        if built is not None:
            built.append(ds)
        return ds

    return dataset_fn


def distribute(strategy: tf.distribute.Strategy, config: Any, split: str = "train",
               epoch: int = 0, step: int = 0, as_supervised: bool = True,
               keep: bool = False) -> Any:
    """`strategy.distribute_datasets_from_function` over `distributed_dataset_fn`,
    one input pipeline per replica (`InputReplicationMode.PER_REPLICA`), so each
    replica's batches come from its own disjoint part of the data. With
    `keep=True` returns `(distributed dataset, [per-pipeline datasets])`."""
    built: list[tf.data.Dataset] = []
    options = tf.distribute.InputOptions(
        experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA)
    dist = strategy.distribute_datasets_from_function(
        distributed_dataset_fn(config, split, epoch, step, as_supervised, built), options)
    return (dist, built) if keep else dist


def input_pipelines(strategy: tf.distribute.Strategy) -> int:
    """How many input pipelines `distribute` makes for `strategy` (one per replica):
    the `workers` of its `PipelinePosition`."""
    return int(strategy.num_replicas_in_sync)
