"""The `features:` config section: structure errors name the column, the transform and
what is allowed; the config's parameter table mirrors tfpipe.features.PARAMS."""

from __future__ import annotations

import pytest

from tfpipe.config import TRANSFORMS, load_config
from tfpipe.config.features import PARAMETERS
from tfpipe.errors import ConfigError
from tfpipe.features import KINDS, PARAMS, TransformSpec


def load(columns, **extra):
    return load_config({"data": {"path": "x"},
                        "features": {"label": "label", "columns": columns, **extra}})


def test_config_table_mirrors_the_transforms():
    assert TRANSFORMS == KINDS
    assert {k: set(v) for k, v in PARAMETERS.items()} == {k: set(v) for k, v in PARAMS.items()}


@pytest.mark.parametrize("columns, words", [
    ({"p": {"transform": "normalise"}}, ["features.columns.p.transform", "normalize",
                                         "did you mean"]),
    ({"c": {"transform": "vocabulary", "column": "cat", "num_oov": 0}},
     ["features.columns.c", "num_oov must be an integer >= 1, got 0", "'vocabulary'",
      "column 'cat'"]),
    ({"b": {"transform": "bucketize", "bins": 4}}, ["bins is not a parameter of 'bucketize'",
                                                   "num_buckets"]),
    ({"x": {"transform": "cross", "columns": ["a"]}}, ["2 or more"]),
    ({"t": {"transform": "time", "part": "minute"}}, ["part must be one of", "hour_cyclic"]),
    ({"t": {"transform": "time", "utc_offset_minutes": 2000}}, ["[-840, 840]"]),
    ({"c": {"transform": "clip", "upper_quantile": 1.5}}, ["in (0, 1)"]),
    ({"n": {"transform": "normalize", "impute": "avg"}}, ["impute must be one of", "median"]),
    ({"label": "normalize"}, ["reads the label column"]),
    ({}, ["at least one"]),
])
def test_structure_errors(columns, words):
    with pytest.raises(ConfigError) as e:
        load(columns)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_shorthand_roundtrip_and_bridge():
    from tfpipe.pipeline import transform_specs

    cfg = load({"price": "log1p", "x": {"transform": "cross", "columns": ["a", "b"],
                                        "num_bins": 64}})
    again = load_config(cfg.to_dict())
    assert again.features.to_dict() == cfg.features.to_dict()
    assert transform_specs(cfg.features) == [
        TransformSpec("price", "log1p", ("price",), {}),
        TransformSpec("x", "cross", ("a", "b"), {"num_bins": 64})]


def test_image_configs_keep_their_dict():
    assert "features" not in load_config({"data": {"path": "x"}}).to_dict()


# issue 26 item 8: image-only keys in a tabular config were accepted and ignored
@pytest.mark.parametrize("key, value", [
    ("data.task", "detection"),
    ("data.image_size", 128),
    ("data.output_dtype", "uint8"),
    ("data.normalize.mean", [0.5, 0.5, 0.5]),
    ("data.label_format", "one_hot"),
    ("data.max_boxes", 10),
    ("pipeline.materialized", "/nonexistent"),
    ("pipeline.prefetch_to_device", "/gpu:0"),
    ("augment.geometry.flip", True),
    ("augment.pixel.brightness", {"max_delta": 0.2}),
    ("augment.enable_rate", 0.5),
])
def test_image_only_keys_are_refused_in_a_tabular_config(key, value):
    with pytest.raises(ConfigError) as info:
        load_config({"data": {"path": "x"}, "features": {"label": "label",
                                                          "columns": {"price": "log1p"}}},
                    {key: value})
    msg = str(info.value)
    top = key.split(".")[0] + "." + key.split(".")[1]
    assert top in msg and "image" in msg and "features:" in msg, msg


def test_tabular_config_with_the_keys_it_uses_still_validates_and_round_trips():
    cfg = load_config({"data": {"path": "x"},
                       "pipeline": {"batch_size": 32, "shuffle_buffer": 100, "cache": "memory",
                                    "on_error": "raise", "deterministic": False},
                       "features": {"label": "label", "columns": {"price": "log1p"}}})
    assert load_config(cfg) == cfg and load_config(cfg.to_dict()) == cfg
