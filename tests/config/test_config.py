"""tfpipe.config: presets, merging, overrides, error messages, round-trips, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tfpipe.config import (
    BATCH_OPS,
    GEOMETRY_OPS,
    PIXEL_OPS,
    Config,
    list_presets,
    load_config,
    parse_set_options,
    preset_names,
)
from tfpipe.errors import ConfigError

PRESETS = ["cifar", "ctr", "detection", "imagenet", "medical-ultrasound", "pose",
           "remote-sensing", "remote-sensing-segmentation", "segmentation"]


def _write(tmp_path: Path, text: str, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _error(name_or_path: object, overrides: dict | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(name_or_path, overrides)  # type: ignore[arg-type]
    return str(info.value)


# ------------------------------------------------------------------ presets
def test_preset_list_is_complete_and_described() -> None:
    assert preset_names() == sorted(PRESETS)
    assert all(desc for desc in list_presets().values())


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads_and_round_trips(name: str, tmp_path: Path) -> None:
    cfg = load_config(name)
    assert isinstance(cfg, Config)
    again = load_config(_write(tmp_path, cfg.to_yaml()))
    assert again == cfg
    assert again.to_dict() == cfg.to_dict()
    # JSON carries the same resolved values.
    assert json.loads(cfg.to_json()) == cfg.to_dict()


def test_ctr_preset_is_tabular_and_shows_only_the_keys_it_reads() -> None:
    cfg = load_config("ctr")
    assert cfg.features is not None and cfg.features.label == "label"
    assert cfg.features.columns["user"].transform == "embedding_id"
    out = cfg.to_dict()
    assert set(out) == {"seed", "data", "pipeline", "features"}
    assert out["data"] == {"path": None}
    assert "materialized" not in out["pipeline"] and out["pipeline"]["batch_size"] == 1024
    assert load_config(out) == cfg  # the image keys come back at their defaults


def test_imagenet_preset_contents() -> None:
    cfg = load_config("imagenet")
    geo = cfg.augment.geometry
    assert list(geo) == ["random_resized_crop", "flip"]
    assert geo["random_resized_crop"].params == {"scale": [0.08, 1.0], "ratio": [0.75, pytest.approx(4 / 3)]}
    assert geo["flip"].p == 0.5 and geo["flip"].params == {"horizontal": True, "vertical": False}
    for op in ("contrast", "saturation"):
        assert cfg.augment.pixel[op].params == {"lower": 0.6, "upper": 1.4}
    assert cfg.augment.pixel["brightness"].params == {"max_delta": 0.4}
    assert {op.name: op.enabled for op in cfg.augment.ops("batch")} == {"mixup": False, "cutmix": False}
    assert cfg.augment.active("batch") == []
    assert cfg.data.image_size == (224, 224) and cfg.data.label_format == "index"


def test_domain_presets_respect_their_constraints() -> None:
    us = load_config("medical-ultrasound")
    assert us.data.channels == 1 and len(us.data.normalize.mean) == 1
    assert [op.name for op in us.augment.active("geometry")] == ["affine"]
    affine = us.augment.geometry["affine"]
    assert affine.rotation == 0 and max(affine.translate) <= 0.05 and affine.shear == 0
    assert [op.name for op in us.augment.active("pixel")] == ["speckle_noise"]

    rs = load_config("remote-sensing")
    assert {"rot90", "flip", "elastic"} <= set(rs.augment.geometry)
    assert rs.augment.geometry["flip"].params == {"horizontal": True, "vertical": True}
    assert set(rs.augment.pixel) == {"brightness", "contrast"}

    det = load_config("detection")
    assert det.data.task == "detection" and det.data.image_size == (512, 512)
    assert det.data.max_boxes == 100
    assert det.augment.geometry["affine"].scale == (0.5, 1.5)
    assert det.augment.geometry["affine"].translate == (0.1, 0.1)
    assert det.augment.batch["mosaic"].enabled and det.augment.batch["mosaic"].p == 0.5

    seg = load_config("segmentation")
    assert seg.data.task == "segmentation" and seg.data.image_size == (512, 1024)
    assert seg.data.ignore_label == 255 and not seg.augment.active("batch")
    assert seg.augment.geometry["affine"].scale == (0.5, 2.0)
    assert seg.augment.geometry["flip"].params == {"horizontal": True, "vertical": False}
    rss = load_config("remote-sensing-segmentation")
    assert rss.data.task == "segmentation"
    assert [op.name for op in rss.augment.active("geometry")] == [
        "random_resized_crop", "rot90", "flip"]  # no elastic: masks follow a matrix

    cifar = load_config("cifar")
    assert cifar.data.image_size == (32, 32)
    assert cifar.augment.geometry["pad_and_crop"].padding == 4
    assert cifar.data.normalize.mean == [0.4914, 0.4822, 0.4465]


# --------------------------------------------------------- merge, overrides
def test_base_merge_appends_user_ops_and_disables(tmp_path: Path) -> None:
    path = _write(tmp_path, """
base: imagenet
seed: 3
data: {path: /data/x, image_size: 128}
augment:
  geometry:
    flip: {vertical: true}
  pixel:
    saturation: false
    gaussian_blur: {sigma: [0.1, 1.0], kernel_size: 3}
    brightness: {p: 0.8}
""")
    cfg = load_config(path)
    assert cfg.seed == 3 and cfg.data.path == "/data/x" and cfg.data.image_size == (128, 128)
    assert cfg.data.task == "classification"  # from the preset
    assert cfg.augment.geometry["flip"].params == {"horizontal": True, "vertical": True}
    assert list(cfg.augment.pixel) == ["brightness", "contrast", "saturation", "gaussian_blur"]
    sat = cfg.augment.pixel["saturation"]
    assert not sat.enabled and sat.params == {"lower": 0.6, "upper": 1.4}  # params kept
    assert cfg.augment.pixel["brightness"].p == 0.8
    assert cfg.augment.pixel["brightness"].params == {"max_delta": 0.4}
    assert [op.name for op in cfg.augment.active("pixel")] == ["brightness", "contrast", "gaussian_blur"]


def test_base_may_be_a_relative_path_and_cycles_are_errors(tmp_path: Path) -> None:
    _write(tmp_path, "base: cifar\npipeline: {batch_size: 7}\n", "parent.yaml")
    child = _write(tmp_path, "base: parent.yaml\nseed: 9\n", "child.yaml")
    cfg = load_config(child)
    assert (cfg.seed, cfg.pipeline.batch_size, cfg.data.image_size) == (9, 7, (32, 32))
    _write(tmp_path, "base: b.yaml\n", "a.yaml")
    _write(tmp_path, "base: a.yaml\n", "b.yaml")
    assert "`base` cycle" in _error(tmp_path / "a.yaml")


@pytest.mark.parametrize(("overrides", "check"), [
    ({"data.path": "out/"}, lambda c: c.data.path == "out/"),
    ({"pipeline.num_parallel_calls": 1}, lambda c: c.pipeline.num_parallel_calls == 1),
    ({"pipeline.num_parallel_calls": "4"}, lambda c: c.pipeline.num_parallel_calls == 4),
    ({"pipeline.prefetch": "AUTOTUNE"}, lambda c: c.pipeline.prefetch == "autotune"),
    ({"pipeline.interleave_cycle": -1}, lambda c: c.pipeline.tf_value("interleave_cycle") == -1),
    ({"seed": 7}, lambda c: c.seed == 7),
    ({"seed": "7"}, lambda c: c.seed == 7),
    ({"augment.pixel.brightness.max_delta": "0.2"}, lambda c: c.augment.pixel["brightness"].max_delta == 0.2),
    ({"pipeline.deterministic": "false"}, lambda c: c.pipeline.deterministic is False),
    ({"data.num_classes": "null"}, lambda c: c.data.num_classes is None),
    ({"data.image_size": "[64, 48]"}, lambda c: c.data.image_size == (64, 48)),
    ({"pipeline.cache": "/tmp/cache dir"}, lambda c: c.pipeline.cache == "/tmp/cache dir"),
    ({"augment.pixel.hue.max_delta": "0.1"}, lambda c: list(c.augment.pixel)[-1] == "hue"),
    ({"augment.batch.mixup.enabled": "true"}, lambda c: c.data.label_format == "index"
     and c.one_hot_labels),
    ({"augment.batch.cutmix": "true"}, lambda c: c.augment.batch["cutmix"].params == {"alpha": 1.0}),
])
def test_dotted_overrides(overrides: dict, check) -> None:  # type: ignore[no-untyped-def]
    assert check(load_config("imagenet", overrides))


# ------------------------------------------- validation never rewrites input
def test_mixup_derives_one_hot_without_rewriting_label_format() -> None:
    cfg = load_config("imagenet", {"data.label_format": "index", "augment.batch.cutmix.enabled": True})
    assert cfg.data.label_format == "index" and cfg.to_dict()["data"]["label_format"] == "index"
    assert cfg.one_hot_labels  # derived: cutmix mixes the labels
    assert not load_config("imagenet").one_hot_labels
    assert load_config("imagenet", {"data.label_format": "one_hot"}).one_hot_labels
    # detection labels are boxes: mixup there does not make class labels one-hot
    assert not load_config("detection", {"augment.batch.mixup.enabled": True}).one_hot_labels


def test_mixup_turned_off_again_keeps_what_the_user_wrote(tmp_path: Path) -> None:
    """Bug 10: label_format was forced to one_hot and kept after mixup was disabled."""
    on = load_config("imagenet", {"augment.batch.mixup.enabled": True})
    assert on.data.label_format == "index"
    # a validated Config passed back in (to_dict round trip) with mixup off again
    off = load_config(on, {"augment.batch.mixup.enabled": False})
    assert off.data.label_format == "index" and not off.one_hot_labels
    assert off == load_config("imagenet")
    # the resolved YAML of the mixup config, reloaded with mixup off
    path = _write(tmp_path, on.to_yaml())
    again = load_config(path, {"augment.batch.mixup.enabled": "false"})
    assert again.data.label_format == "index" and again == load_config("imagenet")
    # explicit one_hot stays one_hot either way
    kept = load_config(load_config("imagenet", {"data.label_format": "one_hot",
                                                 "augment.batch.mixup.enabled": True}),
                       {"augment.batch.mixup.enabled": False})
    assert kept.data.label_format == "one_hot"


def test_validation_does_not_mutate_the_input_mapping() -> None:
    import copy

    from tfpipe.config import validate

    raw = {"data": {"label_format": "index", "image_size": 64},
           "pipeline": {"cache": "Memory", "num_parallel_calls": -1},
           "augment": {"geometry": {"flip": None, "affine": {"scale": [0.9, 1.1]}},
                       "pixel": {"brightness": True},
                       "batch": {"mixup": {"alpha": 0.4}, "cutmix": False}}}
    before = copy.deepcopy(raw)
    cfg = load_config(raw)
    assert raw == before
    assert cfg.data.label_format == "index" and cfg.one_hot_labels
    validate(raw)
    assert raw == before
    over = {"augment.batch.mixup.enabled": "false"}
    load_config(raw, over)
    assert raw == before and over == {"augment.batch.mixup.enabled": "false"}
    cfg2 = load_config(cfg, {"seed": 3})  # a Config passed in is not changed either
    assert cfg2.seed == 3 and cfg.seed == 0 and cfg == load_config(before)


def test_yaml_object_is_not_mutated(tmp_path: Path) -> None:
    """The parsed YAML object handed to load_config stays what was read."""
    text = ("base: imagenet\ndata: {label_format: index}\n"
            "augment: {batch: {mixup: {enabled: true}}}\n")
    raw = yaml.safe_load(text)
    before = yaml.safe_load(text)
    cfg = load_config(raw)
    assert raw == before and cfg.data.label_format == "index"


def test_cli_config_show_prints_what_the_user_wrote(tmp_path: Path) -> None:
    shown = yaml.safe_load(_cli(["config", "show", "imagenet", "--set",
                                 "augment.batch.mixup.enabled=true"]).output)
    assert shown["data"]["label_format"] == "index"
    assert shown["augment"]["batch"]["mixup"]["enabled"] is True
    # show's output, fed back with mixup off, is the preset again
    path = _write(tmp_path, yaml.safe_dump(shown))
    result = _cli(["config", "show", str(path), "--set", "augment.batch.mixup.enabled=false"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.output) == load_config("imagenet").to_dict()


def test_mapping_input_and_yaml_text_shorthand(tmp_path: Path) -> None:
    cfg = load_config({"base": "cifar", "augment": {"pixel": {"grayscale": None, "equalize": True}}})
    assert [op.name for op in cfg.augment.active("pixel")] == ["grayscale", "equalize"]
    assert cfg.augment.pixel["grayscale"].params == {}
    again = load_config(cfg, {"seed": 4})
    assert again.seed == 4 and again.augment == cfg.augment and cfg.seed == 0
    bare = load_config(_write(tmp_path, "seed: 1\n"))
    assert bare.augment.ops("geometry") == [] and bare.pipeline.batch_size == 64


def test_parse_set_options() -> None:
    assert parse_set_options(["a.b=1", "c= x=y", "d="]) == {"a.b": "1", "c": " x=y", "d": ""}
    with pytest.raises(ConfigError, match=r"--set 'oops': expected KEY=VALUE"):
        parse_set_options(["oops"])
    with pytest.raises(ConfigError, match=r"--set 'a..b=1'"):
        parse_set_options(["a..b=1"])


# ------------------------------------------------------------------- errors
@pytest.mark.parametrize(("overrides", "expected"), [
    # out of range
    ({"augment.pixel.brightness.max_delta": 1.7},
     "augment.pixel.brightness.max_delta: must be in [0, 1], got 1.7"),
    ({"augment.geometry.flip.p": "-0.1"}, "augment.geometry.flip.p: must be in [0, 1], got -0.1"),
    ({"pipeline.batch_size": 0}, "pipeline.batch_size: must be >= 1, got 0"),
    ({"augment.pixel.hue.max_delta": 0.6}, "augment.pixel.hue.max_delta: must be in [0, 0.5], got 0.6"),
    ({"augment.geometry.affine.translate": "[0.1, 2]"},
     "augment.geometry.affine.translate: both values must be in [0, 1], got [0.1, 2]"),
    ({"augment.geometry.random_resized_crop.scale": "[0, 1]"},
     "augment.geometry.random_resized_crop.scale: both values must be in (0, 1], got [0, 1]"),
    ({"seed": -1}, "seed: must be in [0, 9223372036854775807], got -1"),
    # pipeline enums and unions
    ({"pipeline.cache": 3}, "pipeline.cache: must be 'none', 'memory' or a directory path"),
    ({"pipeline.num_parallel_calls": 0},
     "pipeline.num_parallel_calls: must be an integer >= 1, 'auto' (tfpipe's measured default) "
     "or 'autotune' (tf.data.AUTOTUNE), got 0"),
    ({"pipeline.prefetch": "fast"}, "pipeline.prefetch: must be an integer >= 1, 'auto'"),
    ({"data.task": "segmentation3d"},
     "data.task: must be 'classification', 'detection' or 'segmentation', got 'segmentation3d'"),
    ({"data.channels": 4}, "data.channels: must be 1 or 3, got 4"),
    ({"pipeline.on_error": "ignore"}, "pipeline.on_error: must be 'skip' or 'raise', got 'ignore'"),
    ({"augment.geometry.affine.fill_mode": "wrap"},
     "augment.geometry.affine.fill_mode: must be 'constant', 'reflect' or 'nearest', got 'wrap'"),
    # wrong type
    ({"pipeline.batch_size": "abc"}, "pipeline.batch_size: must be an integer, got 'abc'"),
    ({"pipeline.batch_size": 1.5}, "pipeline.batch_size: must be an integer, got 1.5"),
    ({"pipeline.deterministic": "maybe"}, "pipeline.deterministic: must be true or false, got 'maybe'"),
    ({"augment.geometry.flip": 3},
     "augment.geometry.flip: must be a mapping of parameters, true, false or null, got 3"),
    ({"augment.pixel": "[1, 2]"}, "augment.pixel: must be a mapping of op name -> parameters, got [1, 2]"),
    ({"data.image_size": "[0, 3]"},
     "data.image_size: must be [height, width] of positive integers (or one integer), got [0, 3]"),
    ({"augment.geometry.random_resized_crop.scale": "[0.5]"},
     "augment.geometry.random_resized_crop.scale: must be a [lower, upper] pair of numbers, got [0.5]"),
    ({"augment.pixel.random_erasing.value": "rand"},
     "augment.pixel.random_erasing.value: must be a number in [0, 1] or 'random', got 'rand'"),
    # lower > upper, odd kernel
    ({"augment.pixel.contrast.lower": 2}, "augment.pixel.contrast.lower: must be <= upper (1.4), got 2"),
    ({"augment.geometry.random_resized_crop.ratio": "[2, 1]"},
     "augment.geometry.random_resized_crop.ratio: lower must be <= upper, got [2, 1]"),
    ({"augment.pixel.gaussian_blur.kernel_size": 4},
     "augment.pixel.gaussian_blur.kernel_size: must be odd, got 4"),
    # unknown key / op with suggestion
    ({"pipeline.bach_size": 3},
     "pipeline.bach_size: unknown key (did you mean 'batch_size'?); allowed: batch_size, shuffle_buffer,"),
    ({"augment.pixel.brightnes.max_delta": 0.1},
     "augment.pixel.brightnes: unknown pixel op (did you mean 'brightness'?); allowed: brightness, contrast,"),
    ({"augment.geometry.brightness": {}}, "augment.geometry.brightness: unknown geometry op; allowed: "
                                          "random_resized_crop, center_crop, flip, rot90, affine,"),
    ({"augment.pixel.brightness.max_delt": 0.1},
     "augment.pixel.brightness.max_delt: unknown key (did you mean 'max_delta'?); allowed: enabled, p, max_delta"),
    ({"dat.path": "x"}, "dat: unknown key (did you mean 'data'?); allowed: seed, data, pipeline, augment"),
    # cross-field
    ({"augment.batch.mosaic.p": 0.5}, "augment.batch.mosaic: needs data.task 'detection' or 'segmentation', got 'classification'"),
    ({"data.channels": 1}, "data.normalize.mean: needs 1 value (one per channel, data.channels is 1), got 3"),
    ({"base": "cifar"}, "base: cannot be overridden"),
    ({"seed.x": 1}, "seed: is 0, not a mapping; cannot set seed.x"),
])
def test_error_messages_name_key_value_and_allowed(overrides: dict, expected: str) -> None:
    message = _error("imagenet", overrides)
    assert expected in message, message
    assert "pydantic" not in message and "Value error" not in message and "errors.pydantic.dev" not in message


def test_cross_field_rules_for_channels_and_detection() -> None:
    msg = _error("medical-ultrasound", {"augment.pixel.saturation": True, "augment.pixel.hue": True})
    assert msg.splitlines() == ["augment.pixel.saturation: needs 3 colour channels, data.channels is 1",
                                "augment.pixel.hue: needs 3 colour channels, data.channels is 1"]
    assert "augment.geometry.elastic: a non-affine warp cannot move the targets" in _error(
        "detection", {"augment.geometry.elastic": True})
    # A disabled op is not checked against the task; colour ops on detection are fine.
    load_config("detection", {"augment.geometry.elastic.enabled": False, "augment.pixel.hue": True})


def test_all_errors_reported_one_per_line() -> None:
    msg = _error("imagenet", {"augment.pixel.brightness.max_delta": 1.7, "pipeline.bach_size": 3,
                              "data.task": "x"})
    lines = msg.splitlines()
    assert len(lines) == 3
    assert {line.split(":")[0] for line in lines} == {
        "augment.pixel.brightness.max_delta", "pipeline.bach_size", "data.task"}


def test_file_errors(tmp_path: Path) -> None:
    assert "not valid YAML (line 2, column 7)" in _error(_write(tmp_path, "seed: 1\ndata: ]\n"))
    assert "duplicate key 'flip'" in _error(_write(tmp_path, "augment:\n  geometry:\n    flip: {}\n    flip: {}\n"))
    assert "aliases" in _error(_write(tmp_path, "a: &x 1\nseed: *x\n"))
    assert "could not determine a constructor for the tag" in _error(_write(tmp_path, "seed: !!python/object/apply:os.system ['true']\n"))
    assert "top level must be a mapping" in _error(_write(tmp_path, "- 1\n"))
    assert "no such config file" in _error(tmp_path / "missing.yaml")
    msg = _error("imagnet")
    assert "(did you mean 'imagenet'?)" in msg and "presets: cifar, ctr, detection" in msg
    assert "base: must be a preset name" in _error(_write(tmp_path, "base: 3\n"))
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (1 << 20) + "\n")
    assert "the limit is" in _error(big)


def test_op_table_is_complete() -> None:
    # The op names of docs/architecture.md, section by section.
    assert list(GEOMETRY_OPS) == ["random_resized_crop", "center_crop", "flip", "rot90", "affine",
                                  "pad_and_crop", "elastic"]
    assert set(PIXEL_OPS) == {"brightness", "contrast", "saturation", "hue", "grayscale", "gamma",
                              "gaussian_noise", "speckle_noise", "gaussian_blur", "sharpen",
                              "random_erasing", "posterize", "solarize", "equalize", "autocontrast",
                              "jpeg_quality", "channel_shuffle", "randaugment", "trivialaugment"}
    assert list(BATCH_OPS) == ["mixup", "cutmix", "mosaic"]


def test_every_op_defaults_validate_and_round_trip(tmp_path: Path) -> None:
    geometry = {name: {} for name in GEOMETRY_OPS if name != "elastic"}
    pixel = {name: {} for name in PIXEL_OPS}
    cfg = load_config({"augment": {"geometry": geometry, "pixel": pixel,
                                   "batch": {"mixup": {}, "cutmix": {}}}})
    for op in cfg.augment.ops("geometry") + cfg.augment.ops("pixel"):
        assert op.enabled and op.p == (0.5 if op.name == "flip" else 1.0)
        assert set(op.params) == set(type(op).param_names())
    assert load_config(_write(tmp_path, cfg.to_yaml())) == cfg


# ---------------------------------------------------------------------- CLI
def _cli(args: list[str]):  # type: ignore[no-untyped-def]
    from tfpipe.cli.main import cli

    return CliRunner().invoke(cli, args)


def test_cli_config_show_yaml_with_set() -> None:
    result = _cli(["config", "show", "imagenet", "--set", "pipeline.batch_size=32",
                   "--set", "augment.pixel.brightness.max_delta=0.25", "--set", "data.path=out/"])
    assert result.exit_code == 0, result.output
    shown = yaml.safe_load(result.output)
    assert shown["pipeline"]["batch_size"] == 32
    assert shown["augment"]["pixel"]["brightness"] == {"enabled": True, "p": 1.0, "max_delta": 0.25}
    assert shown["data"]["path"] == "out/"
    assert shown == load_config("imagenet", {"pipeline.batch_size": 32,
                                             "augment.pixel.brightness.max_delta": 0.25,
                                             "data.path": "out/"}).to_dict()


def test_cli_config_show_json_and_errors(tmp_path: Path) -> None:
    result = _cli(["config", "show", "cifar", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.output) == load_config("cifar").to_dict()
    bad = _cli(["config", "show", "cifar", "--set", "pipeline.bach_size=3"])
    assert bad.exit_code == 2
    assert "pipeline.bach_size: unknown key (did you mean 'batch_size'?)" in bad.output
    assert "Traceback" not in bad.output
    assert _cli(["config", "show", "cifar", "--set", "nokey"]).exit_code == 2
    path = _write(tmp_path, "base: detection\nseed: 5\n")
    assert yaml.safe_load(_cli(["config", "show", str(path)]).output)["seed"] == 5


def test_cli_config_list() -> None:
    result = _cli(["config", "list", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.output) == list_presets()
    table = _cli(["config", "list"])
    assert table.exit_code == 0 and all(name in table.output for name in PRESETS)


def test_reference_doc_covers_every_key_and_op() -> None:
    from tfpipe.config import DataConfig, PipelineConfig, SECTIONS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "config.md").read_text()
    for model in (DataConfig, PipelineConfig):
        for key in model.model_fields:
            if key != "normalize":
                assert f"| `{key}` |" in doc, key
    assert "| `normalize.mean` |" in doc and "| `normalize.std` |" in doc
    for ops in SECTIONS.values():
        for name, cls in ops.items():
            assert f"| `{name}` |" in doc, name
            for param in cls.param_names():
                assert f"`{param}`" in doc, (name, param)
    for preset in PRESETS:
        assert f"| `{preset}` |" in doc, preset
