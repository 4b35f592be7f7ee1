"""Tabular export: a tiny Keras model trained through build_pipeline on the CTR table,
exported; the skew test (pipeline vs the signature's preprocess, bit for bit, with
unseen categories and missing values); malformed requests; a fresh serving process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

sys.path.insert(0, str(Path(__file__).parents[1] / "features"))
from tabular_oracle import CTR_FEATURES, make_ctr_dataset  # noqa: E402

from tfpipe.config import load_config  # noqa: E402
from tfpipe.export import export_serving  # noqa: E402
from tfpipe.pipeline import build_pipeline, tabular_transforms  # noqa: E402
from tfpipe.records import Manifest  # noqa: E402

DTYPES = {"int64": np.int64, "float32": np.float32, "string": object}


def tiny_model(transforms):
    """Embeddings for the indices, the floats concatenated, one logistic unit."""
    inputs, parts = {}, []
    for name, info in transforms.output_info.items():
        if info.dtype == "string":
            continue
        inp = keras.Input(shape=info.shape, dtype=info.dtype, name=name)
        inputs[name] = inp
        if info.cardinality:
            parts.append(keras.layers.Flatten()(keras.layers.Embedding(info.cardinality, 4)(
                keras.layers.Reshape((1,))(inp))))
        else:
            parts.append(keras.layers.Reshape((int(np.prod(info.shape or (1,))),))(inp))
    h = keras.layers.Concatenate()(parts)
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Dense(8, "relu")(h))
    return keras.Model(inputs, out)


def raw_columns(examples: list[bytes], transforms) -> dict[str, np.ndarray]:
    """Serving input built with protobuf's own classes: the value, or the mask when the
    row has none (a null in the table)."""
    out: dict[str, list] = {c: [] for c in transforms.raw_spec}
    masks: dict[str, list] = {c: [] for c in transforms.nullable}
    for blob in examples:
        feats = tf.train.Example.FromString(blob).features.feature
        for c, spec in transforms.raw_spec.items():
            f = feats[c]
            vals = list({"int64": f.int64_list.value, "float32": f.float_list.value,
                         "string": f.bytes_list.value}[spec.dtype.name])
            out[c].append(vals[0] if vals else (b"" if spec.dtype == tf.string else 0))
            if c in masks:
                masks[c].append(not vals)
    cols = {c: np.array(v, DTYPES[transforms.raw_spec[c].dtype.name]) for c, v in out.items()}
    cols.update({c + "__missing": np.array(v, bool) for c, v in masks.items()})
    return cols


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("tabexp")
    _, data = make_ctr_dataset(root, rows=1000)
    cfg = load_config({"seed": 1, "data": {"path": data},
                       "pipeline": {"batch_size": 128, "shuffle_buffer": 500},
                       "features": CTR_FEATURES})
    transforms = tabular_transforms(cfg)
    model = tiny_model(transforms)
    model.compile("adam", "binary_crossentropy")
    model.fit(build_pipeline(cfg), epochs=1, steps_per_epoch=3, verbose=0)
    res = export_serving(cfg, model, root / "export", 1)
    return {"root": root, "data": data, "cfg": cfg, "model": model, "export": res,
            "loaded": tf.saved_model.load(res.version_dir)}


def adversarial_dataset(root: Path, data: str) -> str:
    """Rows the training data never had: unseen categories, devices, users and items,
    nulls in the nullable columns, converted like any table."""
    import pyarrow as pa

    from tfpipe.convert import convert

    n = 40
    rng = np.random.default_rng(0)
    table = pa.table({
        "user_id": pa.array(np.where(np.arange(n) % 2 == 0, 10**9 + np.arange(n), 1), pa.int64()),
        "item_id": pa.array(rng.integers(1, 10**6, n), pa.int64()),
        "timestamp": pa.array(rng.integers(0, 2 * 10**9, n), pa.int64()),
        "price": pa.array(np.linspace(0, 1e5, n), pa.float64()),
        "category": pa.array(["never-seen" if i % 3 == 0 else "books" for i in range(n)]),
        "device": pa.array([None if i % 4 == 0 else ("watch" if i % 4 == 1 else "mobile")
                            for i in range(n)]),
        "user_age": pa.array([None if i % 5 == 0 else 18 + i for i in range(n)], pa.int64()),
        "position": pa.array(np.arange(n) % 10 + 1, pa.int64()),
        "label": pa.array(np.arange(n) % 2, pa.int64()),
    })
    import pyarrow.parquet as pq

    pq.write_table(table, root / "new.parquet")
    out = root / "new"
    convert(str(root / "new.parquet"), str(out), split="val=1", progress=False, workers=1)
    return str(out)


def pipeline_and_signature(cfg, data, loaded, transforms):
    ds = build_pipeline(cfg, "val")
    files = Manifest.load(data).shard_paths(data, "val")
    records = list(tf.data.TFRecordDataset(files).as_numpy_iterator())
    raw = raw_columns(records, transforms)
    got = loaded.signatures["preprocess"](**{k: tf.constant(v) for k, v in raw.items()})
    feats = {k: np.concatenate([f[k].numpy() for f, _ in ds]) for k in transforms.output_info}
    return feats, {k: v.numpy() for k, v in got.items()}, raw


@pytest.mark.slow
def test_skew_pipeline_equals_signature_bit_for_bit(world, tmp_path):
    transforms = tabular_transforms(world["cfg"])
    feats, served, _ = pipeline_and_signature(world["cfg"], world["data"], world["loaded"],
                                              transforms)
    assert set(served) == set(feats)
    for k in feats:
        assert feats[k].dtype == served[k].dtype and feats[k].tobytes() == served[k].tobytes(), k
    # unseen categories and missing values, through the pipeline of a new table
    new = adversarial_dataset(tmp_path, world["data"])
    stats = os.path.join(world["data"], "statistics.json")
    cfg = load_config({"data": {"path": new}, "pipeline": {"batch_size": 16},
                       "features": dict(CTR_FEATURES, statistics=stats)})
    feats, served, raw = pipeline_and_signature(cfg, new, world["loaded"], transforms)
    for k in feats:
        assert feats[k].tobytes() == served[k].tobytes(), k
    gone = raw["device__missing"]
    assert gone.sum() == 10 and (feats["device"][gone] == 0).all()  # missing: index 0
    watch = raw["device"] == b"watch"
    assert watch.sum() == 10 and (feats["device"][watch] == 1).all()  # unseen: OOV index 1
    assert (feats["category"][raw["category"] == b"never-seen"] == 1).all()
    assert raw["user_age__missing"].sum() == 8
    assert (feats["age_missing"] == raw["user_age__missing"]).all()
    assert (feats["user"][raw["user_id"] > 10**8] == 1).all()


def test_malformed_requests_name_the_column(world):
    sig = world["loaded"].signatures["serving_default"]
    transforms = tabular_transforms(world["cfg"])
    cols = {c: tf.zeros([2], s.dtype) if s.dtype != tf.string else tf.constant([b"a", b"b"])
            for c, s in transforms.raw_spec.items()}
    cols.update({c + "__missing": tf.constant([False, True]) for c in transforms.nullable})
    assert sig(**cols)["outputs"].shape == [2, 1]
    missing = dict(cols)
    del missing["price"]
    with pytest.raises(TypeError, match="price"):
        sig(**missing)
    wrong = dict(cols, price=tf.constant([b"x", b"y"]))
    # TF's own signature check: refused before any op runs (by input position)
    with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError),
                       match="float"):
        sig(**wrong)
    short = dict(cols, category=tf.constant([b"a"]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="category"):
        sig(**short)


@pytest.mark.slow
def test_fresh_process_serves_the_same_predictions(world, tmp_path, graph_optimizer_on):
    transforms = tabular_transforms(world["cfg"])
    data = world["data"]
    files = Manifest.load(data).shard_paths(data, "val")
    records = list(tf.data.TFRecordDataset(files).as_numpy_iterator())[:50]
    cols = raw_columns(records, transforms)
    np.savez(tmp_path / "req.npz", **cols)
    feats = next(iter(build_pipeline(world["cfg"], "val")))[0]
    # the pipeline's features of the same 50 rows through the exported model in this
    # process: bit for bit (the Keras model run eagerly differs in the last bit: the
    # saved graph fuses MatMul + BiasAdd + Relu)
    head = {k: v[:50] for k, v in feats.items()}
    want = world["loaded"].signatures["predict_preprocessed"](**head)["outputs"].numpy()
    keras_out = world["model"](head, training=False).numpy()
    np.testing.assert_allclose(want, keras_out, rtol=1e-5, atol=1e-6)
    script = textwrap.dedent(f"""
        import numpy as np, tensorflow as tf
        m = tf.saved_model.load({world['export'].version_dir!r})
        req = dict(np.load({str(tmp_path / 'req.npz')!r}, allow_pickle=True))
        out = m.signatures["serving_default"](**{{k: tf.constant(v) for k, v in req.items()}})
        np.save({str(tmp_path / 'out.npy')!r}, out["outputs"].numpy())
    """)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, "-c", script], env=env, timeout=180,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = np.load(tmp_path / "out.npy")
    np.testing.assert_array_equal(got, want[: len(got)])
    meta = json.loads((Path(world["export"].version_dir) / "export_manifest.json").read_text())
    assert meta["preprocessing"]["kind"] == "tabular"
    assert (Path(world["export"].out_dir) / "models.config").exists()


def test_tabular_request_checks_columns_and_fills_masks(world):
    from tfpipe.errors import ConfigError
    from tfpipe.export import tabular_request

    vdir = world["export"].version_dir
    transforms = tabular_transforms(world["cfg"])
    cols = {c: ([b"books", None] if s.dtype == tf.string else
                [1.5, 2.0] if s.dtype == tf.float32 else [3, None])
            for c, s in transforms.raw_spec.items() if c in transforms.nullable}
    cols.update({c: ([b"books", b"never-seen"] if s.dtype == tf.string else
                     [1.5, 2.0] if s.dtype == tf.float32 else [3, 4])
                 for c, s in transforms.raw_spec.items() if c not in transforms.nullable})
    req = tabular_request(vdir, cols)
    for c in transforms.nullable:
        assert req[c + "__missing"].tolist() == [False, cols[c][1] is None]
    served = world["loaded"].signatures["preprocess"](**{k: tf.constant(v) for k, v in req.items()})
    # the same as the layer itself on the same rows: a null is index 0 / imputed
    direct = transforms({k: tf.constant(v) for k, v in req.items()})
    for k in direct:
        assert direct[k].numpy().tobytes() == served[k].numpy().tobytes(), k
    with pytest.raises(ConfigError, match=r"missing column\(s\) \['price'\].*price \(float32\)"):
        tabular_request(vdir, {k: v for k, v in cols.items() if k != "price"})
    with pytest.raises(ConfigError, match="column 'price' row 1: expected float32, got 'x'"):
        tabular_request(vdir, dict(cols, price=[1.0, "x"]))
    with pytest.raises(ConfigError, match="column 'category' row 0: null, but 'category' cannot"):
        tabular_request(vdir, dict(cols, category=[None, b"a"]))
    with pytest.raises(ConfigError, match="unknown column"):
        tabular_request(vdir, dict(cols, extra=[1, 2]))


def test_warmup_requests_replay_through_serving_default(world):
    from tensorflow_serving.apis import prediction_log_pb2

    res = world["export"]
    path = Path(res.version_dir) / "assets.extra" / "tf_serving_warmup_requests"
    recs = list(tf.data.TFRecordDataset(str(path)).as_numpy_iterator())
    assert res.warmup_records == len(recs) == 10
    sig = world["loaded"].signatures["serving_default"]
    for rec in recs:
        req = prediction_log_pb2.PredictionLog.FromString(rec).predict_log.request
        assert req.model_spec.signature_name == "serving_default"
        assert set(req.inputs) == set(res.signatures["serving_default"]["inputs"])
        out = sig(**{k: tf.make_ndarray(v) for k, v in req.inputs.items()})["outputs"]
        assert out.shape[0] == tf.make_ndarray(req.inputs["price"]).shape[0]


# ---------------------------------------------- issue 26 item 10: malformed requests, export
def _request_columns(transforms):
    cols = {c: ([b"books", b"toys"] if s.dtype == tf.string else
                [1.5, 2.0] if s.dtype == tf.float32 else [3, 4])
            for c, s in transforms.raw_spec.items()}
    return cols


def test_request_out_of_range_and_non_finite_values_name_the_column(world):
    from tfpipe.errors import ConfigError
    from tfpipe.export import tabular_request

    vdir = world["export"].version_dir
    cols = _request_columns(tabular_transforms(world["cfg"]))
    # 2**64 fits no int64: once a bare OverflowError from NumPy
    with pytest.raises(ConfigError, match=r"column 'user_id' row 1: 18446744073709551616 is "
                                          r"outside int64's range \[-9223372036854775808, "
                                          r"9223372036854775807\]"):
        tabular_request(vdir, dict(cols, user_id=[1, 2**64]))
    assert tabular_request(vdir, dict(cols, user_id=[-2**63, 2**63 - 1]))["user_id"].tolist() \
        == [-2**63, 2**63 - 1]
    # inf once went through to the model (log1p(inf) = inf features)
    for bad in (float("inf"), -np.inf):
        with pytest.raises(ConfigError, match=r"column 'price' row 0: .*inf.* not finite"):
            tabular_request(vdir, dict(cols, price=[bad, 1.0]))
    # a float64 value beyond float32's range would become inf in the float32 tensor
    with pytest.raises(ConfigError, match=r"column 'price' row 1: 1e\+39 .*float32"):
        tabular_request(vdir, dict(cols, price=[1.0, 1e39]))
    # NaN is a missing value, as in training (imputed): kept
    assert np.isnan(tabular_request(vdir, dict(cols, price=[float("nan"), 1.0]))["price"][0])


def test_signature_refuses_inf_naming_column_and_rows(world):
    sig = world["loaded"].signatures["serving_default"]
    transforms = tabular_transforms(world["cfg"])
    cols = {c: tf.zeros([3], s.dtype) if s.dtype != tf.string else tf.constant([b"a"] * 3)
            for c, s in transforms.raw_spec.items()}
    cols.update({c + "__missing": tf.constant([False] * 3) for c in transforms.nullable})
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"column price rows \[0 2\]: ±inf is not a valid value"):
        sig(**dict(cols, price=tf.constant([np.inf, 1.0, -np.inf], tf.float32)))
    # NaN stays a missing value (imputed, as the pipeline does)
    nan = sig(**dict(cols, price=tf.constant([np.nan, 1.0, 2.0], tf.float32)))["outputs"]
    assert np.isfinite(nan.numpy()).all()


def test_rest_request_with_an_out_of_range_integer_names_the_input(world):
    from tfpipe.export import RestBodyError, rest_predict

    transforms = tabular_transforms(world["cfg"])
    inst = {c: ("a" if s.dtype == tf.string else 1.0 if s.dtype == tf.float32 else 3)
            for c, s in transforms.raw_spec.items()}
    inst.update({c + "__missing": False for c in transforms.nullable})
    ok = rest_predict(world["loaded"], json.dumps({"instances": [inst]}))
    assert len(ok["predictions"]) == 1
    with pytest.raises(RestBodyError, match=r"user_id: 18446744073709551616 is outside int64"):
        rest_predict(world["loaded"], json.dumps({"instances": [dict(inst, user_id=2**64)]}))
    with pytest.raises(RestBodyError, match=r"price: inf is not finite"):
        rest_predict(world["loaded"], json.dumps({"instances": [dict(inst, price=1e999)]}))


def test_export_without_tensorflow_serving_api_says_so_and_leaves_nothing(world, tmp_path,
                                                                          monkeypatch):
    from tfpipe.export import ExportError

    for mod in [m for m in sys.modules if m.startswith("tensorflow_serving")]:
        monkeypatch.setitem(sys.modules, mod, None)  # import fails as if not installed
    monkeypatch.setitem(sys.modules, "tensorflow_serving", None)
    out = tmp_path / "export"
    with pytest.raises(ExportError, match=r"tensorflow-serving-api.*pip install 'tfpipe\[serving\]'"):
        export_serving(world["cfg"], world["model"], out, 1)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(ExportError, match=r"warmup=0, serving_config=False \(--warmup 0 "
                                          r"--no-serving-config\)"):
        export_serving(world["cfg"], world["model"], out, 1)


def test_failed_export_leaves_no_directory(world, tmp_path):
    class Broken(keras.Model):
        def call(self, x):
            raise RuntimeError("broken model")

    out = tmp_path / "export"
    with pytest.raises(RuntimeError, match="broken model"):
        export_serving(world["cfg"], Broken(), out, 1)
    assert list(tmp_path.iterdir()) == []  # once an empty OUT/model/ stayed behind
    # into an existing export root: a failed version or model leaves the root as it was
    (out / "model" / "1").mkdir(parents=True)
    (out / "models.config").write_text("kept")
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    with pytest.raises(RuntimeError, match="broken model"):
        export_serving(world["cfg"], Broken(), out, 2)
    with pytest.raises(RuntimeError, match="broken model"):
        export_serving(world["cfg"], Broken(), out, 1, model_name="other")
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    # a new root is written beside OUT and renamed: every path names OUT, not the stage
    res = world["export"]
    assert res.version_dir == str(Path(res.out_dir) / "model" / "1")
    config = (Path(res.out_dir) / "models.config").read_text()
    assert f"base_path: \"{(Path(res.out_dir) / 'model').resolve()}\"" in config
    assert ".tmp-" not in config and not [p for p in Path(res.out_dir).parent.iterdir()
                                          if p.name.startswith(".export.tmp-")]
