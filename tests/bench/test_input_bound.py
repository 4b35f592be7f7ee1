"""Input-bound analysis with tiny Keras models, and the TensorBoard outputs."""

from __future__ import annotations

import glob

import keras
import pytest
import tensorflow as tf

from tfpipe.bench._input_bound import input_bound_dataset, load_model
from tfpipe.bench._tensorboard import trace_to_tensorboard, write_scalars


def _model(compiled: bool) -> keras.Model:
    m = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Conv2D(2, 3),
                          keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(4)])
    if compiled:
        m.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def _data() -> tf.data.Dataset:
    return tf.data.Dataset.range(64).map(
        lambda i: (tf.random.stateless_uniform([16, 16, 3], tf.stack([i, i])), i % 4)).batch(4)


@pytest.mark.parametrize("compiled,suffix,kind", [(True, ".keras", "train_on_batch"),
                                                  (False, ".h5", "forward")])
def test_keras_file_fraction_in_unit_interval(tmp_path, compiled, suffix, kind) -> None:
    path = tmp_path / f"m{suffix}"
    _model(compiled).save(path)
    r = input_bound_dataset(load_model(path), _data(), steps=3, warmup=1)
    assert r.step_kind == kind and r.steps == 3
    assert 0.0 <= r.input_wait_fraction <= 1.0
    assert r.input_wait_fraction == pytest.approx(max(0.0, 1 - r.t_model_ms / r.t_fed_ms))
    assert r.verdict()


def test_saved_model_forward(tmp_path) -> None:
    _model(False).export(str(tmp_path / "sm"))
    r = input_bound_dataset(load_model(tmp_path / "sm"), _data(), steps=2, warmup=1)
    assert r.step_kind == "forward" and 0.0 <= r.input_wait_fraction <= 1.0


def test_load_model_rejects_unknown(tmp_path) -> None:
    (tmp_path / "x.txt").write_text("no")
    with pytest.raises(ValueError, match="SavedModel"):
        load_model(tmp_path / "x.txt")
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "missing.keras")


def test_tensorboard_scalars_and_trace(tmp_path) -> None:
    from tfpipe.bench import measure

    ds = _data()
    write_scalars(tmp_path, measure(ds, warmup=0, steps=2))
    traces = trace_to_tensorboard(ds, tmp_path, steps=2)
    assert traces and all(p.stat().st_size > 0 for p in traces)
    assert str(traces[0]).endswith(".xplane.pb")
    tags = {}
    for f in glob.glob(str(tmp_path / "events.out.tfevents.*")):
        for e in tf.compat.v1.train.summary_iterator(f):
            for v in e.summary.value:
                tags[v.tag] = float(tf.make_ndarray(v.tensor))
    assert tags["bench/elements_per_s"] > 0 and "bench/p90_ms" in tags
