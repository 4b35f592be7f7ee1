"""Each transform equals its NumPy definition (docs/tabular.md, "Transforms"), with
missing values and unseen categories; statistics built by hand (tabular_oracle)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

sys.path.insert(0, str(Path(__file__).parent))
from tabular_oracle import Q, statistics  # noqa: E402

from tfpipe.errors import ConfigError  # noqa: E402
from tfpipe.features import TransformSpec as T  # noqa: E402
from tfpipe.features import build_transforms, log1p_f32  # noqa: E402

N = 400
rng = np.random.default_rng(7)
PRICE = rng.lognormal(3, 1.2, N).astype(np.float32)
PRICE_MISSING = np.arange(N) % 9 == 4
CAT = rng.choice(list("abcdefgh"), N, p=[.3, .2, .15, .1, .1, .08, .05, .02])
USER = (rng.zipf(1.4, N) % 1000).astype(np.int64)
TS = rng.integers(-10**8, 2 * 10**9, N).astype(np.int64)
TABLE = {"price": ([None if m else float(v) for v, m in zip(PRICE, PRICE_MISSING)], "float32"),
         "category": ([str(c) for c in CAT], "string"),
         "user": ([int(u) for u in USER], "int64"), "ts": ([int(t) for t in TS], "int64")}
STATS = statistics(TABLE)
NP = STATS.columns["price"].numeric

# the batch the transforms see: some unseen values, the missing prices as empty rows
NEW_CAT = np.where(np.arange(N) % 11 == 0, "zz-unseen", CAT)
NEW_USER = np.where(np.arange(N) % 13 == 0, 10**9 + np.arange(N), USER).astype(np.int64)


def raw():
    rows = [[] if m else [float(v)] for v, m in zip(PRICE, PRICE_MISSING)]
    return {"price": tf.ragged.constant(rows, dtype=tf.float32, ragged_rank=1),
            "category": tf.constant(NEW_CAT.astype(bytes)), "user": tf.constant(NEW_USER),
            "ts": tf.constant(TS)}


def run(*specs):
    return {k: v.numpy() for k, v in build_transforms(list(specs), STATS)(raw()).items()}


def same(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert np.asarray(a).dtype == np.asarray(b).dtype


def imputed(value):
    return np.where(PRICE_MISSING, np.float32(value), PRICE).astype(np.float32)


def test_normalize_is_z_score_with_mean_imputed_and_indicator():
    out = run(T("z", "normalize", ("price",), {"missing_indicator": True}))
    mean, std = np.float32(NP.mean), np.float32(NP.std)
    same(out["z"], (imputed(mean) - mean) / std)
    assert np.all(out["z"][PRICE_MISSING] == 0)
    same(out["z_missing"], PRICE_MISSING.astype(np.float32))


def test_min_max_and_clip():
    out = run(T("m", "min_max", ("price",), {"impute": 5.0}),
              T("c", "clip", ("price",), {"lower": 2.0, "upper_quantile": 0.9}))
    lo, hi = np.float32(NP.min), np.float32(NP.max)
    same(out["m"], (imputed(5.0) - lo) / (hi - lo))
    q90 = np.float32(NP.quantiles[int(0.9 * Q) - 1])
    same(out["c"], np.clip(imputed(np.float32(NP.mean)), np.float32(2.0), q90))


def test_log1p_within_one_ulp_of_numpy_and_exact_on_most():
    out = run(T("l", "log1p", ("price",)))["l"]
    want = np.log1p(imputed(0.0).astype(np.float64)).astype(np.float32)
    ulps = np.abs(out.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    assert ulps.max() <= 1 and (ulps == 0).mean() > 0.99
    # wide range, tiny values (Goldberg's correction), negatives clamp to 0
    x = np.concatenate([np.float32(10.0) ** np.arange(-30, 30, 0.37, dtype=np.float32),
                        [0.0, -3.0, np.float32(1e-7), np.float32(3e38)]]).astype(np.float32)
    got = log1p_f32(tf.maximum(tf.constant(x), 0.0)).numpy()
    ref = np.log1p(np.maximum(x, 0).astype(np.float64)).astype(np.float32)
    d = np.abs(got.view(np.int32).astype(np.int64) - ref.view(np.int32).astype(np.int64))
    assert d.max() <= 1, x[d.argmax()]


def test_bucketize_picks_stored_quantiles():
    out = run(T("b", "bucketize", ("price",), {"num_buckets": 4}))["b"]
    bounds = np.array([NP.quantiles[k * (Q // 4) - 1] for k in (1, 2, 3)], np.float32)
    median = np.float32(NP.quantiles[Q // 2 - 1])
    same(out, np.digitize(imputed(median), bounds).astype(np.int64))
    assert set(out) <= {0, 1, 2, 3}


def test_vocabulary_oov_missing_and_top_k():
    vocab = [v for v, _ in STATS.columns["category"].categorical.vocabulary]
    out = run(T("v", "vocabulary", ("category",), {"num_oov": 1, "top_k": 5}))["v"]
    top = vocab[:5]
    want = [2 + top.index(c) if c in top else 1 for c in NEW_CAT]
    same(out, np.array(want, np.int64))
    assert (out[NEW_CAT == "zz-unseen"] == 1).all()


def test_integer_vocabulary_min_frequency_and_oov_buckets():
    freq = dict(STATS.columns["user"].categorical.vocabulary)
    kept = [v for v, f in STATS.columns["user"].categorical.vocabulary if f >= 3]
    spec = T("u", "embedding_id", ("user",), {"min_frequency": 3, "num_oov": 3})
    ft = build_transforms([spec], STATS)
    out = ft(raw())["u"].numpy()
    # IntegerLookup's OOV bucket of an int is value mod num_oov (Keras' documented default)
    want = [1 + 3 + kept.index(u) if freq.get(u, 0) >= 3 else 1 + u % 3 for u in NEW_USER]
    same(out, np.array(want, np.int64))
    info = ft.output_info["u"]
    assert info.cardinality == 1 + 3 + len(kept) and info.embedding_dim >= 1
    assert out.max() < info.cardinality


def test_hash_and_cross_use_farmhash_with_bin_zero_for_missing():
    out = run(T("h", "hash", ("category",), {"num_bins": 17}),
              T("x", "cross", ("category", "user"), {"num_bins": 33}))
    # oracle: TF's own FarmHash ops on the values (the layers are Keras')
    h = tf.strings.to_hash_bucket_fast(NEW_CAT.astype(bytes), 16).numpy() + 1
    same(out["h"], h.astype(np.int64))
    x = tf.sparse.to_dense(tf.sparse.cross_hashed(
        [tf.constant(NEW_CAT.astype(bytes))[:, None], tf.constant(NEW_USER)[:, None]],
        32)).numpy()[:, 0] + 1
    same(out["x"], x.astype(np.int64))


def test_cross_and_hash_of_a_missing_value_is_bin_zero():
    stats = statistics({"a": (["p", None, "q"], "string"), "b": ([1, 2, None], "int64")})
    ft = build_transforms([T("x", "cross", ("a", "b"), {"num_bins": 8}),
                           T("h", "hash", ("b",), {"num_bins": 8}),
                           T("v", "vocabulary", ("a",))], stats)
    out = ft({"a": tf.ragged.constant([[b"p"], [], [b"q"]]),
              "b": tf.ragged.constant([[1], [2], []], dtype=tf.int64)})
    assert out["x"].numpy()[1] == 0 and out["x"].numpy()[2] == 0 and out["x"].numpy()[0] > 0
    assert out["h"].numpy()[2] == 0 and out["v"].numpy()[1] == 0


def test_time_parts_match_python_datetime():
    import datetime as dt

    off = 330  # UTC+05:30
    out = run(T("h", "time", ("ts",), {"part": "hour", "utc_offset_minutes": off}),
              T("d", "time", ("ts",), {"part": "day_of_week", "utc_offset_minutes": off}),
              T("hc", "time", ("ts",), {"part": "hour_cyclic", "utc_offset_minutes": off}),
              T("dc", "time", ("ts",), {"part": "day_cyclic"}))
    tz = dt.timezone(dt.timedelta(minutes=off))
    local = [dt.datetime.fromtimestamp(int(t), tz) for t in TS]
    same(out["h"], np.array([t.hour for t in local], np.int64))
    same(out["d"], np.array([t.weekday() for t in local], np.int64))
    minute = np.array([t.hour * 60 + t.minute for t in local])
    ang = 2 * np.pi * minute / 1440
    same(out["hc"], np.stack([np.sin(ang), np.cos(ang)], -1).astype(np.float32))
    wd = np.array([dt.datetime.fromtimestamp(int(t), dt.timezone.utc).weekday() for t in TS])
    same(out["dc"], np.stack([np.sin(2 * np.pi * wd / 7), np.cos(2 * np.pi * wd / 7)],
                             -1).astype(np.float32))


def test_time_and_passthrough_missing_values():
    stats = statistics({"t": ([0, None], "int64"), "s": (["x", None], "string")})
    ft = build_transforms([T("h", "time", ("t",)), T("c", "time", ("t",), {"part": "hour_cyclic"}),
                           T("p", "passthrough", ("s",), {"impute": "?", "missing_indicator": True})],
                          stats)
    out = ft({"t": tf.ragged.constant([[7200], []], dtype=tf.int64),
              "s": tf.ragged.constant([[b"x"], []])})
    same(out["h"].numpy(), np.array([2, 24], np.int64))
    same(out["c"].numpy()[1], np.zeros(2, np.float32))
    same(out["p"].numpy(), np.array([b"x", b"?"], object))
    same(out["p_missing"].numpy(), np.array([0, 1], np.float32))


def test_dense_columns_with_masks_and_nan_are_missing():
    ft = build_transforms([T("z", "normalize", ("price",))], STATS)
    assert ft.nullable == ("price",) and "price__missing" in ft.serving_spec
    x = tf.constant([1.0, 2.0, np.nan])
    z = ft({"price": x, "price__missing": tf.constant([False, True, False])})["z"].numpy()
    assert z[1] == 0 and z[2] == 0 and z[0] != 0


@pytest.mark.parametrize("spec, words", [
    (T("z", "normalize", ("nope",)), ["unknown column 'nope'", "price"]),
    (T("z", "normalize", ("category",)), ["holds string", "int64 or float32"]),
    (T("v", "vocabulary", ("price",)), ["holds float32", "int64 or string"]),
    (T("b", "bucketize", ("price",), {"num_buckets": 3}), ["num_buckets", "[2, 4, 5, 10, 20]"]),
    (T("c", "clip", ("price",), {"lower_quantile": 0.33}), ["quantile 0.33 is not stored"]),
    (T("c", "clip", ("price",)), ["needs lower/upper"]),
    (T("h", "hash", ("category",), {"bins": 3}), ["unknown parameter", "num_bins"]),
    (T("t", "time", ("ts",), {"part": "week"}), ["part must be one of", "hour_cyclic"]),
    (T("v", "vocabulary", ("category",), {"min_frequency": 10**6}), ["no value"]),
])
def test_build_errors_name_output_transform_and_column(spec, words):
    with pytest.raises(ConfigError) as e:
        build_transforms([spec], STATS, where="data/statistics.json")
    msg = str(e.value)
    assert f"features.{spec.name}" in msg and repr(spec.kind) in msg
    for w in words:
        assert w in msg, msg


def test_missing_statistics_names_the_file():
    stats = statistics({"c": (["a"], "string")})
    from dataclasses import replace

    bare = replace(stats, columns={"c": replace(stats.columns["c"], categorical=None)})
    with pytest.raises(ConfigError, match="data/statistics.json does not hold"):
        build_transforms([T("v", "vocabulary", ("c",))], bare, where="data/statistics.json")


def test_spec_rejects_unknown_kind_and_wrong_column_count():
    with pytest.raises(ConfigError, match="allowed: normalize"):
        T("a", "scale", ("x",))
    with pytest.raises(ConfigError, match="2 or more"):
        T("a", "cross", ("x",))


def test_graph_has_no_python_callbacks_or_stateful_random_and_runs_in_tf_data():
    ft = build_transforms([T("l", "log1p", ("price",)), T("v", "vocabulary", ("category",)),
                           T("hc", "time", ("ts",), {"part": "hour_cyclic"})], STATS)
    fn = tf.function(lambda r: ft(r)).get_concrete_function(
        {k: tf.TensorSpec([None], v.dtype) for k, v in ft.raw_spec.items()})
    ops = {n.op for n in fn.graph.as_graph_def().node}
    for f in fn.graph.as_graph_def().library.function:
        ops |= {n.op for n in f.node_def}
    assert not ops & {"PyFunc", "EagerPyFunc", "PyFuncStateless", "RandomUniform",
                      "Log1p", "Sin", "Cos"}, ops
    ds = tf.data.Dataset.from_tensor_slices({"price": PRICE, "category": CAT.astype(bytes),
                                             "ts": TS}).batch(64).map(ft)
    assert sum(int(b["l"].shape[0]) for b in ds) == N
    assert math.isfinite(float(next(iter(ds))["l"][0]))
