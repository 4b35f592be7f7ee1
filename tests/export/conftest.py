"""One converted dataset of real photos, one tiny Keras model and ONE export per
session, shared by every test here (the tests carry xdist_group("export") so a
parallel run builds them once, on one worker)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from photos import photos  # noqa: E402

IMAGE_SIZE = (48, 64)


def pytest_configure(config):  # known without xdist too (-p no:xdist)
    config.addinivalue_line("markers", "xdist_group(name): run on one xdist worker")
  # not square: a transposed height/width shows


@pytest.fixture(scope="session")
def photo_bytes() -> dict[str, bytes]:
    return photos()


@pytest.fixture(scope="session")
def dataset(tmp_path_factory, photo_bytes) -> Path:
    """The photos converted by `tfpipe.convert` (original bytes kept), all in `val`,
    one shard so record i is sample index i."""
    from tfpipe.convert import convert

    root = tmp_path_factory.mktemp("export-data")
    for name, data in photo_bytes.items():
        cls = "cat" if "chelsea" in name else "other"
        (root / "raw" / cls).mkdir(parents=True, exist_ok=True)
        (root / "raw" / cls / name).write_bytes(data)
    manifest = convert(root / "raw", root / "data", split={"val": 1.0})
    assert not manifest.splits["val"].skipped, manifest.splits["val"].skipped
    assert len(list((root / "data").glob("val-*.tfrecord"))) == 1
    return root / "data"


@pytest.fixture(scope="session")
def config(dataset) -> dict:
    return {"data": {"path": str(dataset), "image_size": list(IMAGE_SIZE)},
            "pipeline": {"batch_size": 3}}


@pytest.fixture(scope="session")
def keras_model():
    """A 2-class CNN of ~100 parameters (logits out), fixed weights."""
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((*IMAGE_SIZE, 3))
    x = keras.layers.Conv2D(4, 3, strides=4, activation="relu")(inp)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, keras.layers.Dense(2)(x))


@pytest.fixture(scope="session")
def exported(tmp_path_factory, config, keras_model):
    from tfpipe.export import BatchingParameters, export_serving

    out = tmp_path_factory.mktemp("export-out")
    batching = BatchingParameters(max_batch_size=8, allowed_batch_sizes=(2, 4, 8))
    return export_serving(config, keras_model, out, version=3, model_name="tiny", warmup=5,
                          batching=batching, per_model_batching=True, top_k=2)


@pytest.fixture(scope="session")
def loaded(exported):
    import tensorflow as tf

    return tf.saved_model.load(exported.version_dir)


@pytest.fixture(scope="session")
def records(dataset) -> tuple[list[str], list[bytes]]:
    """(file names, encoded bytes) of the val records, in record order."""
    import tensorflow as tf

    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/filename": tf.io.FixedLenFeature([], tf.string)}
    names, blobs = [], []
    for rec in tf.data.TFRecordDataset([str(p) for p in sorted(dataset.glob("val-*.tfrecord"))]):
        ex = tf.io.parse_single_example(rec, spec)
        names.append(ex["image/filename"].numpy().decode())
        blobs.append(ex["image/encoded"].numpy())
    return names, blobs


FRESH = """
import json, sys
import numpy as np
import tensorflow as tf
version_dir, blobs, out = sys.argv[1], sys.argv[2], sys.argv[3]
data = [bytes.fromhex(h) for h in json.load(open(blobs))]
m = tf.saved_model.load(version_dir)
x = m.signatures["preprocess"](image_bytes=tf.constant(data))["image"].numpy()
y = m.signatures["serving_default"](image_bytes=tf.constant(data))
np.savez(out, image=x, outputs=y["outputs"].numpy())
print(json.dumps({"tfpipe_loaded": any(k.startswith("tfpipe") for k in sys.modules)}))
print("=== saved_model_cli", flush=True)
# the `saved_model_cli` console script's entry point, in this same fresh process
# (one TensorFlow start instead of two)
from tensorflow.python.tools import saved_model_cli
sys.argv = ["saved_model_cli", "show", "--dir", version_dir, "--all"]
saved_model_cli.main()
"""


@pytest.fixture(scope="session")
def fresh(exported, records, tmp_path_factory) -> dict:
    """One process without tfpipe (no PYTHONPATH, cwd elsewhere): loads the export with
    tf.saved_model.load, runs preprocess + serving_default on the records' bytes, then
    `saved_model_cli show --all`. -> {"image", "outputs", "tfpipe_loaded", "cli"}."""
    import json
    import os
    import subprocess

    import numpy as np

    tmp = tmp_path_factory.mktemp("fresh")
    (tmp / "blobs.json").write_text(json.dumps([b.hex() for b in records[1]]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    proc = subprocess.run([sys.executable, "-c", FRESH, exported.version_dir,
                           str(tmp / "blobs.json"), str(tmp / "out.npz")],
                          capture_output=True, text=True, timeout=180, env=env, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    head, cli = proc.stdout.split("=== saved_model_cli\n", 1)
    got = np.load(tmp / "out.npz")
    return {"image": got["image"], "outputs": got["outputs"], "cli": cli,
            **json.loads(head.strip().splitlines()[-1])}
