"""Helpers of tests/pipeline/test_epochs.py, and its child process.

`python epochs_child.py DATASET_GLOB` prints, as JSON, the digests of epoch 0
built with and without a global seed, and of the three epochs Keras
`fit(epochs=3)` trains on: test_epochs compares them with its own process.
"""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np
import tensorflow as tf

try:
    from .conftest import CLASSES, base_config
except ImportError:  # run as a script: its folder is on sys.path
    from conftest import CLASSES, base_config  # type: ignore[no-redef]


def _cfg(path: str, **over) -> dict:
    # uint8 output: the batches a model sees can be hashed exactly
    return base_config(path, **{"data.output_dtype": "uint8", **over})


def _digest(batches) -> str:
    h = hashlib.sha256()
    for x, y in batches:
        h.update(np.asarray(x).tobytes())
        h.update(np.asarray(y).tobytes())
    return h.hexdigest()


def _pass(ds) -> list[tuple[np.ndarray, np.ndarray]]:
    """One iteration of a dict dataset: [(image, label)] per batch."""
    return [(b["image"].numpy(), b["label"].numpy()) for b in ds]


class _Recorder(tf.keras.Model):
    """A tiny classifier that records every (x, y) batch it trains on."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[np.ndarray, np.ndarray]] = []
        self.pool = tf.keras.layers.GlobalAveragePooling2D()
        self.dense = tf.keras.layers.Dense(CLASSES)

    def call(self, x):
        return self.dense(self.pool(tf.cast(x, tf.float32) / 255.0))

    def train_step(self, data):
        x, y = data
        self.seen.append((x.numpy(), y.numpy()))  # run_eagerly: concrete batches
        return super().train_step(data)


class _EpochMarks(tf.keras.callbacks.Callback):
    def __init__(self, model: _Recorder) -> None:
        super().__init__()
        self.recorder, self.starts = model, []

    def on_epoch_begin(self, epoch, logs=None):
        self.starts.append(len(self.recorder.seen))


def fit_digests(ds: tf.data.Dataset, epochs: int) -> list[str]:
    """Keras fit(ds, epochs): the digest of the batches each epoch trained on."""
    model = _Recorder()
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    marks = _EpochMarks(model)
    model.fit(ds, epochs=epochs, verbose=0, callbacks=[marks])
    bounds = marks.starts + [len(model.seen)]
    return [_digest(model.seen[a:b]) for a, b in zip(bounds, bounds[1:])]



def main(path: str) -> None:
    from tfpipe.pipeline import build_pipeline

    cfg = _cfg(path)
    unseeded = _digest(_pass(build_pipeline(cfg, epoch=0)))
    tf.keras.utils.set_random_seed(1234)  # the user's global seed must not matter
    seeded = _digest(_pass(build_pipeline(cfg, epoch=0)))
    fit = fit_digests(build_pipeline(cfg, as_supervised=True), 3)
    print(json.dumps({"unseeded": unseeded, "seeded": seeded, "fit": fit}))


if __name__ == "__main__":
    main(sys.argv[1])
