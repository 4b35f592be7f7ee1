"""Each epoch's dataset in turn, from ONE built pipeline (flat memory).

A train dataset from `build_pipeline` already runs epoch e + n on its n-th
iteration. `epochs` builds it once and, before every epoch, pins the epoch
explicitly (`tfpipe.pipeline.set_epoch`), so a loop that peeks at the data or
iterates a yielded dataset twice still gets the right epoch next time.
Rebuilding a pipeline per epoch instead grows the process by a new graph every
time (RSS, docs/performance-history.md "Epochs helper").
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import tensorflow as tf

from tfpipe.errors import ConfigError
from tfpipe.pipeline import build_pipeline, set_epoch
from tfpipe.train._distribute import distribute
from tfpipe.train._position import PipelinePosition

# WARNING: seen on stderr without any logging set-up (a run that did not start
# fresh is worth a line: an old checkpoint directory resumes silently otherwise)
_log = logging.getLogger("tfpipe.train")


def log_resume(position: PipelinePosition, num_epochs: int) -> None:
    """One line when `position` is not a fresh start: the (epoch, step) the run
    resumes at and the checkpoint it came from (`restore`)."""
    epoch, step = position.value()
    source = getattr(position, "_restored_from", None)
    if source is None and (epoch, step) == (0, 0):
        return
    where = (f"checkpoint {source}" if source is not None
             else "the position given (no checkpoint restored)")
    if epoch >= num_epochs:
        _log.warning("nothing left to train: %s is at epoch %d, step %d, and the run has "
                     "%d epochs", where, epoch, step, num_epochs)
    else:
        _log.warning("resuming training at epoch %d, step %d from %s", epoch, step, where)


def epochs(config: Any, num_epochs: int, *, position: PipelinePosition | None = None,
           start: int = 0, split: str = "train", worker: Any = None,
           as_supervised: bool = False, strategy: tf.distribute.Strategy | None = None,
           ) -> Iterator[tuple[int, Any]]:
    """Yield `(epoch, dataset)` for epochs `start .. num_epochs - 1`.

    position: resume from it (its epoch, step and stream offset; the first
    dataset is then the rest of that epoch, positioned before parse and decode)
    and keep it current: before yielding epoch e > the first, the position is
    set to (e, 0). The loop advances `position.step` itself (`position.advance()`
    per trained batch), which keeps the offset current without a strategy (the
    position follows the dataset; with `strategy=` the offset stays step x batch).
    strategy: yield `strategy.distribute_datasets_from_function` datasets, one
    input pipeline per replica (`tfpipe.train.distribute`); `as_supervised` is
    then on. Iterate each dataset once per epoch.
    """
    offset = None
    if position is not None:
        start, step = position.value()
        offset = position.resume_offset()
        if position.split != split:
            raise ConfigError(f"epochs: the position counts split {position.split!r}, "
                              f"not {split!r}")
        log_resume(position, num_epochs)
    else:
        step = 0
    if strategy is not None:
        dist, datasets = distribute(strategy, config, split, epoch=start, step=step,
                                    keep=True)
        for e in range(start, num_epochs):
            if e > start and position is not None:
                position.set(e, 0)
            if split == "train":
                for ds in datasets:  # one per input pipeline: all in the same epoch
                    set_epoch(ds, e)
            yield e, dist
        return
    ds = build_pipeline(config, split, epoch=start, step=step, worker=worker,
                        as_supervised=as_supervised, offset=offset)
    if position is not None and split == "train":
        position.follow(ds)
    for e in range(start, num_epochs):
        if e > start and position is not None:
            position.set(e, 0)
        if split == "train":  # eval splits have no epochs: the same data every time
            set_epoch(ds, e)  # positioned again only at epoch `start` (the first yield)
        yield e, ds
