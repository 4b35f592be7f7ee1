"""`tfpipe.train` on what `tfpipe convert` writes, with the imagenet preset.

The preset as a user loads it (`load_config("imagenet", ...)`: shuffle, crop,
flip, colour jitter, normalize; only image_size and batch_size made small) on
the session's converted directory (4 shards + manifest.json: the dataset
declares its cardinality, 8 batches per epoch). Oracle: the batches of epoch e
are those of a fresh `build_pipeline(cfg, epoch=e)`, bit for bit, whether
`tfpipe.train.fit` trains on them (Keras, run eagerly to see each batch) or
`tfpipe.train.epochs` yields them; every record once per epoch (labels are
record ids). And `import tfpipe; tfpipe.train.fit(...)`, as docs/training.md
writes it, in a fresh process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
import tfpipe.train
from tfpipe.config import load_config
from train_data import NUM, batches, digest

STEPS = NUM // 8  # per epoch: 64 records, batch_size 8, drop_remainder


def imagenet(path: str) -> Any:
    """The imagenet preset on `path`, 32x32, batch_size 8 (everything else the preset's)."""
    return load_config("imagenet", {"data.path": path, "data.image_size": [32, 32],
                                    "pipeline.batch_size": 8})


def _model() -> keras.Model:
    keras.utils.set_random_seed(1)
    m = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Conv2D(2, 3, strides=4),
                          keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(NUM)])
    m.compile(keras.optimizers.SGD(0.01),
              keras.losses.SparseCategoricalCrossentropy(from_logits=True), run_eagerly=True)
    return m


def _want(cfg: Any, epoch: int) -> list[str]:
    return [digest(x, y) for x, y in batches(tfpipe.build_pipeline(cfg, epoch=epoch))]


def test_fit_trains_every_epoch_on_converted_data(train_dataset, tmp_path):
    cfg = imagenet(train_dataset)
    assert tfpipe.pipeline.batches_per_pass(cfg) == STEPS  # the manifest's count
    model = _model()
    seen: list[tuple[int, str, list[int]]] = []
    base_step = model.train_step

    def train_step(batch):  # run_eagerly: the concrete batch Keras trains on
        x, y = batch
        seen.append((epoch[0], digest(x.numpy(), y.numpy()), y.numpy().tolist()))
        return base_step(batch)

    model.train_step = train_step
    epoch = [0]

    class Epoch(keras.callbacks.Callback):
        def on_epoch_begin(self, e, logs=None):
            epoch[0] = e

    position = tfpipe.train.PipelinePosition(cfg)
    hist = tfpipe.train.fit(model, cfg, 2, tmp_path / "ckpt", save_every=3,
                            callbacks=[Epoch()], position=position, verbose=0)
    assert len(hist) == 1 and len(hist[0].history["loss"]) == 2
    assert position.value() == (2, 0)
    for e in (0, 1):
        got = [d for ep, d, _ in seen if ep == e]
        assert got == _want(cfg, e), e
        labels = sorted(v for ep, _, y in seen if ep == e for v in y)
        assert labels == list(range(NUM)), e
    last = tf.train.latest_checkpoint(str(tmp_path / "ckpt"))
    assert [int(tf.train.load_variable(last, f"position/{k}/.ATTRIBUTES/VARIABLE_VALUE"))
            for k in ("epoch", "step")] == [2, 0]


def test_epochs_yields_each_epoch_of_converted_data(train_dataset):
    cfg = imagenet(train_dataset)
    got = {e: [digest(x, y) for x, y in batches(ds)] for e, ds in tfpipe.train.epochs(cfg, 2)}
    want = {0: _want(cfg, 0), 1: _want(cfg, 1)}
    assert got == want
    assert len(got[0]) == STEPS and got[0] != got[1]
    # resumed at (1, 5): the rest of epoch 1
    position = tfpipe.train.PipelinePosition(cfg, epoch=1, step=5)
    rest = [[digest(x, y) for x, y in batches(ds)]
            for _, ds in tfpipe.train.epochs(cfg, 2, position=position)]
    assert rest == [want[1][5:]]


class _Crash(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 2:
            raise RuntimeError("crash")


def test_a_resumed_run_says_where_it_resumed(train_dataset, tmp_path, caplog):
    """fit, crashed after step 3 (checkpoint at step 2), then fit again; then a
    custom loop: restore + epochs. Each resumed run: one line naming (epoch,
    step) and the checkpoint; a fresh start: none."""
    cfg = imagenet(train_dataset)
    caplog.set_level("INFO", logger="tfpipe")
    with pytest.raises(RuntimeError, match="crash"):
        tfpipe.train.fit(_model(), cfg, 1, tmp_path / "ckpt", save_every=2, verbose=0,
                         callbacks=[_Crash()])
    assert not [r for r in caplog.records if r.name.startswith("tfpipe")]
    last = tf.train.latest_checkpoint(str(tmp_path / "ckpt"))
    tfpipe.train.fit(_model(), cfg, 1, tmp_path / "ckpt", save_every=2, verbose=0)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("tfpipe")]
    assert lines == [f"resuming training at epoch 0, step 2 from checkpoint {last}"]
    caplog.clear()  # again: the run is complete
    tfpipe.train.fit(_model(), cfg, 1, tmp_path / "ckpt", save_every=2, verbose=0)
    last = tf.train.latest_checkpoint(str(tmp_path / "ckpt"))
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("tfpipe")]
    assert lines == [f"nothing left to train: checkpoint {last} is at epoch 1, step 0, "
                     "and the run has 1 epochs"]

    caplog.clear()
    model = _model()
    position = tfpipe.train.PipelinePosition(cfg)
    manager = tfpipe.train.checkpoint(model, position, tmp_path / "ckpt")
    assert tfpipe.train.restore(manager, position) and position.value() == (1, 0)
    assert [e for e, _ in tfpipe.train.epochs(cfg, 3, position=position)] == [1, 2]
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("tfpipe")]
    assert lines == ["resuming training at epoch 1, step 0 from checkpoint "
                     f"{manager.latest_checkpoint}"]


FRESH = """
import sys
import keras
import tfpipe  # only the top-level package, as docs/training.md writes it

cfg = tfpipe.load_config("imagenet", {"data.path": sys.argv[1], "data.image_size": [32, 32],
                                      "pipeline.batch_size": 8})


def model():
    keras.utils.set_random_seed(1)
    m = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.GlobalAveragePooling2D(),
                          keras.layers.Dense(64)])
    m.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


for epochs in (1, 2):  # the second run resumes from the first one's checkpoint
    m = model()
    h = tfpipe.train.fit(m, cfg, epochs=epochs, directory=sys.argv[2], save_every=4, verbose=0)
    print("steps", int(m.optimizer.iterations.numpy()), "epochs", len(h[0].history["loss"]))
    print("=== run", epochs, "done", file=sys.stderr, flush=True)
"""


@pytest.mark.slow
def test_import_tfpipe_then_train_fit_in_a_fresh_process(train_dataset, tmp_path):
    """Also: without any logging set-up, the resumed run's line is on stderr."""
    env = dict(os.environ, PYTHONPATH=str(Path(tfpipe.__file__).resolve().parents[1]),
               TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, "-c", FRESH, train_dataset, str(tmp_path / "ckpt")],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the restored optimizer counts the first run's steps too
    assert proc.stdout.split() == ["steps", str(STEPS), "epochs", "1",
                                   "steps", str(2 * STEPS), "epochs", "1"]
    first, second = proc.stderr.split("=== run 1 done\n")
    assert "resuming" not in first, first
    # the first run saved at steps 4, 8 and its end: ckpt-3 holds (1, 0); the line
    # as logging prints it (no set-up: the message; a basicConfig: a prefix first)
    said = [ln for ln in second.splitlines() if "resuming" in ln]
    assert len(said) == 1 and said[0].endswith(
        "resuming training at epoch 1, step 0 from checkpoint "
        + os.path.join(str(tmp_path / "ckpt"), "ckpt-3")), second
