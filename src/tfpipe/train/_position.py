"""The pipeline's position `(config hash, seed, epoch, step)` as checkpointable state.

`PipelinePosition` holds the position as `tf.Variable`s, so it is saved and
restored by `tf.train.Checkpoint` together with the model and the optimizer.
Next to (epoch, step) it stores what the position means something for: the
hash of every setting that shapes the batches (plus those settings, to say
which changed), the seed, the worker count and a hash of the dataset's
manifest. `verify()` (called by `restore`) refuses a checkpoint written for
another config, seed, worker count or data, naming what changed.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from typing import Any

import tensorflow as tf

from tfpipe.errors import TfpipeError
from tfpipe.pipeline import build_pipeline, hashed_settings, settings, stream_offset

MANIFEST_NAME = "manifest.json"
TFDS_INFO = "dataset_info.json"
# The data's identity comes from the manifest hash: moving the dataset directory
# (another data.path) keeps a resume valid.
NOT_COMPARED = ("data_path",)


class ResumeError(TfpipeError):
    """A checkpoint cannot be resumed with this config / seed / data."""


def _identity_settings(s: Any) -> dict[str, Any]:
    return {k: v for k, v in hashed_settings(s).items() if k not in NOT_COMPARED}


def config_hash(config: Any) -> str:
    """sha256 (16 hex) of the settings that shape the batches (threads, buffers,
    cache and the data's location excluded: they never change a batch's bits)."""
    blob = json.dumps(_identity_settings(settings(config)), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _manifest_path(data_path: str) -> str | None:
    for d in (data_path, os.path.dirname(data_path)):
        if d and os.path.isfile(os.path.join(d, MANIFEST_NAME)):
            return os.path.join(d, MANIFEST_NAME)
    # a TFDS-prepared directory: its dataset_info.json (shardLengths, numBytes) is
    # the manifest tfpipe reads it by (docs/own-records.md)
    if os.path.isdir(data_path) and os.path.isfile(os.path.join(data_path, TFDS_INFO)):
        return os.path.join(data_path, TFDS_INFO)
    return None


def dataset_hash(config: Any, split: str = "train") -> str:
    """sha256 (16 hex) of the dataset's manifest.json; without a manifest (a shard
    glob), of the shard names and sizes, so added/removed/changed shards show."""
    s = settings(config)
    path = s.data_path or ""
    manifest = _manifest_path(path)
    h = hashlib.sha256()
    if manifest is not None:
        with open(manifest, "rb") as f:
            h.update(f.read())
        return "manifest:" + h.hexdigest()[:16]
    pattern = path if not os.path.isdir(path) else os.path.join(path, f"{split}-*")
    for f in sorted(glob.glob(pattern)):
        h.update(f"{os.path.basename(f)}\0{os.path.getsize(f)}\n".encode())
    return "files:" + h.hexdigest()[:16]


class PipelinePosition(tf.Module):
    """Where a training run is in its input: epoch, step (batches of that epoch
    already trained on), offset (the stream position those batches end at: step
    x batch size plus the records skipped before it under `on_error: skip`; -1:
    not known, counted as step x batch size), and the identity of the pipeline
    it counts in.

    Put it into the `tf.train.Checkpoint` beside the model and the optimizer;
    after restoring, `verify()` (or `tfpipe.train.restore`) checks it belongs to
    `config`. `dataset()` is the pipeline from this position on. Create it
    outside a `tf.distribute` strategy's scope (its variables are host state).

    workers: how many input pipelines share the data (a position counts per
    pipeline batches; another count gives other global indices).
    The offset is kept current while the position `follow`s the dataset it
    counts (`tfpipe.train.fit` and `epochs` do that; with one input pipeline).
    """

    def __init__(self, config: Any, split: str = "train", workers: int = 1,
                 epoch: int = 0, step: int = 0, offset: int | None = None) -> None:
        super().__init__(name="tfpipe_position")
        # a plain object: tf.Module would track a dataset attribute (checkpoint)
        self._following = _Following(None, (int(step), _offset(step, offset)))
        # the flattened settings, not `config`: tf.Module would wrap a dict config's
        # lists into trackable ListWrappers
        s = settings(config)
        self._config = s
        self._split = split
        ident = _identity_settings(s)
        self._expected = {"config_hash": config_hash(s), "seed": int(s.seed),
                          "workers": int(workers), "dataset": dataset_hash(s, split),
                          "settings": json.dumps(ident, sort_keys=True)}
        with tf.init_scope():
            self.epoch = tf.Variable(epoch, dtype=tf.int64, trainable=False, name="epoch")
            self.step = tf.Variable(step, dtype=tf.int64, trainable=False, name="step")
            self.offset_var = tf.Variable(_offset(step, offset), dtype=tf.int64,
                                          trainable=False, name="offset")
            self.seed = tf.Variable(int(s.seed), dtype=tf.int64, trainable=False, name="seed")
            self.workers = tf.Variable(int(workers), dtype=tf.int64, trainable=False,
                                       name="workers")
            self.config_hash = tf.Variable(self._expected["config_hash"], dtype=tf.string,
                                           trainable=False, name="config_hash")
            self.dataset_hash = tf.Variable(self._expected["dataset"], dtype=tf.string,
                                            trainable=False, name="dataset_hash")
            self.settings = tf.Variable(self._expected["settings"], dtype=tf.string,
                                        trainable=False, name="settings")

    # ------------------------------------------------------------------ reading
    @property
    def config(self) -> Any:
        """The pipeline settings (`tfpipe.pipeline.settings(config)`) it counts in."""
        return self._config

    @property
    def split(self) -> str:
        return self._split

    def value(self) -> tuple[int, int]:
        """(epoch, step) as Python ints."""
        return int(self.epoch.numpy()), int(self.step.numpy())

    @property
    def offset(self) -> int:
        """The stream position batch `step` begins at (-1: step x batch size)."""
        return int(self.offset_var.numpy())

    def __repr__(self) -> str:
        e, k = self.value()
        return f"PipelinePosition(epoch={e}, step={k}, config_hash={self._expected['config_hash']})"

    # ------------------------------------------------------------------ moving
    def set(self, epoch: int, step: int = 0, offset: int | None = None) -> None:
        """Move to (epoch, step); `offset` as `stream_offset` gives it (None: 0 at
        step 0, else unknown)."""
        self.epoch.assign(int(epoch))
        self.step.assign(int(step))
        self.offset_var.assign(_offset(step, offset))
        self._following.base = (int(step), _offset(step, offset))

    def follow(self, dataset: tf.data.Dataset | None) -> None:
        """Keep the offset current from `dataset` (the train dataset from
        `build_pipeline` this run iterates; None stops): from now on the position
        (epoch, step) is the dataset's, counted from the current one."""
        self._following.dataset = dataset if dataset is not None and hasattr(
            dataset, "_tfpipe_failures") else None
        self._following.base = (int(self.step.numpy()), self.offset)

    def at_step(self, step: int) -> None:
        """`step` batches of the current epoch are trained on (offset kept current
        while following a dataset)."""
        self.step.assign(int(step))
        dataset, base = self._following.dataset, self._following.base
        if dataset is None or base[1] < 0:
            self.offset_var.assign(_offset(step, None))  # unknown: counted in batches
            return
        self.offset_var.assign(stream_offset(dataset, int(self.epoch.numpy()), int(step),
                                             start=base))

    def advance(self, steps: int = 1) -> None:
        """`steps` more batches of the current epoch were trained on."""
        self.at_step(int(self.step.numpy()) + int(steps))

    def next_epoch(self) -> None:
        """The current epoch is done: (epoch + 1, 0)."""
        self.set(int(self.epoch.numpy()) + 1, 0)

    # ------------------------------------------------------------------ checking
    def verify(self, where: str = "the checkpoint") -> None:
        """Raise ResumeError when the stored identity is not this config's."""
        saved = {"config_hash": self.config_hash.numpy().decode(),
                 "seed": int(self.seed.numpy()), "workers": int(self.workers.numpy()),
                 "dataset": self.dataset_hash.numpy().decode(),
                 "settings": self.settings.numpy().decode()}
        exp = self._expected
        problems = []
        if saved["seed"] != exp["seed"]:
            problems.append(f"seed: {where} has {saved['seed']}, the config {exp['seed']}")
        if saved["config_hash"] != exp["config_hash"]:
            old, new = json.loads(saved["settings"]), json.loads(exp["settings"])
            keys = [k for k in sorted(set(old) | set(new)) if k != "seed" and
                    old.get(k) != new.get(k)]
            what = "; ".join(f"{k}: {where} has {json.dumps(old.get(k))}, the config "
                             f"{json.dumps(new.get(k))}" for k in keys)
            problems.append(f"config hash {saved['config_hash']} -> {exp['config_hash']}"
                            + (f" ({what})" if what else ""))
        if saved["workers"] != exp["workers"]:
            problems.append(f"input pipelines: {where} counted {saved['workers']}, now "
                            f"{exp['workers']}")
        if saved["dataset"] != exp["dataset"]:
            problems.append(f"dataset {settings(self._config).data_path!r} changed since "
                            f"{where} (hash {saved['dataset']} -> {exp['dataset']})")
        if problems:
            e, k = self.value()
            raise ResumeError(f"cannot resume at epoch {e}, step {k} from {where}: "
                              + "; ".join(problems) + ". Resume with the config and data "
                              "it was written for, or start a new run in another directory")

    # ------------------------------------------------------------------ data
    def dataset(self, worker: Any = None, as_supervised: bool = False,
                **kwargs: Any) -> tf.data.Dataset:
        """`build_pipeline(config, split, epoch, step=step, offset=offset)`: from
        this position on (first iteration: the rest of the epoch; then the next
        epochs, whole)."""
        e, k = self.value()
        return build_pipeline(self._config, self._split, epoch=e, step=k, worker=worker,
                              as_supervised=as_supervised, offset=self.resume_offset(),
                              **kwargs)

    def resume_offset(self) -> int | None:
        """The `offset=` for `build_pipeline` at this position (None: step x batch size)."""
        k, off = int(self.step.numpy()), self.offset
        return off if k and off >= 0 else None


class _Following:
    """The dataset a position follows and the (step, offset) it counts from."""

    def __init__(self, dataset: tf.data.Dataset | None, base: tuple[int, int]) -> None:
        self.dataset, self.base = dataset, base


def _offset(step: int, offset: int | None) -> int:
    if offset is not None:
        return int(offset)
    return 0 if int(step) == 0 else -1


def restore(manager: tf.train.CheckpointManager | tf.train.Checkpoint,
            position: PipelinePosition, path: str | None = None) -> bool:
    """Restore the latest checkpoint of `manager` (or `path`), then `verify` the
    position; True when something was restored, False for a fresh start.

    Raises ResumeError when the checkpoint was written for another config,
    seed, worker count or dataset, or when it holds no tfpipe position.
    """
    if isinstance(manager, tf.train.CheckpointManager):
        ckpt, path = manager.checkpoint, path or manager.latest_checkpoint
    else:
        ckpt = manager
    if not path:
        return False
    names = {n for n, _ in tf.train.list_variables(path)}
    if not any("settings/.ATTRIBUTES" in n for n in names):
        raise ResumeError(f"{path}: holds no tfpipe.train.PipelinePosition; put the position "
                          "into the checkpoint (tf.train.Checkpoint(..., position=position))")
    ckpt.restore(path).expect_partial()
    position.verify(where=f"checkpoint {path}")
    position._restored_from = path  # noqa: SLF001 - `fit` / `epochs` say where a run resumed
    return True
