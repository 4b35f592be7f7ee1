"""Child process of tests/train/test_train_kill.py: train, record, maybe halt.

    python train_child.py DATA_GLOB WORK:MODE [WORK:MODE ...]     (MODE: keras | custom)

keras: `tfpipe.train.fit` (Keras `fit`, checkpoint every 2 steps). custom: a
`@tf.function(input_signature=...)` train step under `MirroredStrategy` on two
logical CPUs, input from `tfpipe.train.epochs(..., strategy=...)`, one input
pipeline per replica. Both resume from WORK/<mode>/ckpt when it holds a
checkpoint. Each trained batch appends `{"epoch", "step", "digest"}` to
WORK/<mode>/digests.jsonl (the digest of the exact batch: image and label
bytes, per replica); the final weights go to WORK/<mode>/weights.npz; the
custom run writes each replica's labels of epoch 0 to labels.json.

With TFPIPE_TEST_HALT="MODE:EPOCH:STEP" and TFPIPE_TEST_HALT_WORK=WORK, the
run of MODE in WORK writes WORK/<mode>/halted
after training batch STEP of EPOCH (the last checkpoint is then at an earlier
step) and sleeps: the parent kills it with SIGKILL.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]  # before TF initializes its devices
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
tf.config.experimental.enable_op_determinism()

import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from train_data import NUM, config, digest  # noqa: E402

import tfpipe.train  # noqa: E402

EPOCHS = 2
SAVE_EVERY = 2


def _halt_at(mode: str, out: Path) -> tuple[int, int] | None:
    spec = os.environ.get("TFPIPE_TEST_HALT", "")
    if not spec.startswith(mode + ":"):
        return None
    if os.environ.get("TFPIPE_TEST_HALT_WORK") != str(out.parent):
        return None
    _, e, k = spec.split(":")
    return int(e), int(k)


def _model() -> keras.Model:
    keras.utils.set_random_seed(1)  # the same initial weights in every process
    return keras.Sequential([
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(4, 3, strides=2, activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(NUM),
    ])


class _Log:
    def __init__(self, out: Path, mode: str) -> None:
        self.out, self.mode, self.halt = out, mode, _halt_at(mode, out)
        self.file = open(out / "digests.jsonl", "a")

    def record(self, epoch: int, step: int, d: str) -> None:
        self.file.write(json.dumps({"epoch": epoch, "step": step, "digest": d}) + "\n")
        self.file.flush()
        if self.halt == (epoch, step):
            (self.out / "halted").write_text(f"{epoch} {step}")
            time.sleep(120)  # killed here, one batch past the last checkpoint


def _weights(model: keras.Model, out: Path) -> None:
    np.savez(out / "weights.npz", *[np.asarray(w) for w in model.get_weights()])


def run_keras(data: str, out: Path) -> None:
    log = _Log(out, "keras")

    model = _model()
    seen: dict[str, str] = {}
    base_step = model.train_step

    def train_step(batch):  # run_eagerly: the concrete batch the model trains on
        x, y = batch
        seen["d"] = digest(x.numpy(), y.numpy())
        return base_step(batch)

    model.train_step = train_step
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    position = tfpipe.train.PipelinePosition(config(data))

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            e, k = position.value()  # after the checkpoint callback: k batches done
            log.record(e, k - 1, seen["d"])

    tfpipe.train.fit(model, config(data), EPOCHS, out / "ckpt", save_every=SAVE_EVERY,
                     callbacks=[Record()], position=position, verbose=0)
    _weights(model, out)


def run_custom(data: str, out: Path) -> None:
    log = _Log(out, "custom")
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    cfg = config(data)
    position = tfpipe.train.PipelinePosition(cfg, workers=tfpipe.train.input_pipelines(strategy))
    with strategy.scope():
        model = _model()
        optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
        optimizer.build(model.trainable_variables)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model, optimizer=optimizer, position=position),
        str(out / "ckpt"), max_to_keep=2)
    tfpipe.train.restore(manager, position)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    global_batch = 8
    step_fn = None
    labels: dict[int, list[int]] = {0: [], 1: []}
    for epoch, dist in tfpipe.train.epochs(cfg, EPOCHS, position=position, strategy=strategy):
        if step_fn is None:
            def replica_step(x, y):
                with tf.GradientTape() as tape:
                    per_sample = loss_fn(y, model(x, training=True))
                    loss = tf.nn.compute_average_loss(per_sample, global_batch_size=global_batch)
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            @tf.function(input_signature=[dist.element_spec])
            def step_fn(batch):
                x, y = batch
                return strategy.reduce("SUM", strategy.run(replica_step, args=(x, y)), axis=None)
        for batch in dist:
            x, y = (strategy.experimental_local_results(t) for t in batch)
            d = digest(*[a.numpy() for pair in zip(x, y) for a in pair])
            if epoch == 0:
                for r in (0, 1):
                    labels[r] += y[r].numpy().tolist()
            step_fn(batch)
            e, k = position.value()
            position.advance()
            log.record(e, k, d)
            if (k + 1) % SAVE_EVERY == 0:
                manager.save()
        manager.save()  # the epoch's end: (epoch, steps); the next yield sets (epoch + 1, 0)
    (out / "labels.json").write_text(json.dumps(labels))
    _weights(model, out)


def main() -> None:
    data, runs = sys.argv[1], sys.argv[2:]
    for run in runs:  # one after the other in this process
        work, mode = run.rsplit(":", 1)
        out = Path(work) / mode
        out.mkdir(parents=True, exist_ok=True)
        {"keras": run_keras, "custom": run_custom}[mode](data, out)
        (out / "done").write_text("ok")


if __name__ == "__main__":
    main()
