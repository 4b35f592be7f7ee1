"""Config spellings that used to do something other than what they say (issue #10)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tfpipe.config import AUTO, AUTOTUNE, TF_AUTO, TF_AUTOTUNE, load_config
from tfpipe.errors import ConfigError


def _mixup(cfg):
    return cfg.augment.batch["mixup"]


# --------------------------------------------------- giving parameters enables
def test_op_parameters_over_a_disabled_preset_op_enable_it(tmp_path: Path) -> None:
    # imagenet lists mixup {alpha: 0.2, p: 0.5, enabled: false}
    path = tmp_path / "mine.yaml"
    path.write_text("base: imagenet\naugment:\n  batch:\n    mixup: {alpha: 0.4, p: 1.0}\n")
    cfg = load_config(str(path))
    assert (_mixup(cfg).enabled, _mixup(cfg).alpha, _mixup(cfg).p) == (True, 0.4, 1.0)
    assert cfg.one_hot_labels  # mixup really runs: labels become one-hot
    assert not cfg.augment.batch["cutmix"].enabled  # untouched ops stay as the preset says


@pytest.mark.parametrize("entry", ["mixup:", "mixup: true", "mixup: {}"])
def test_naming_an_op_enables_it_with_the_preset_params(tmp_path: Path, entry: str) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(f"base: imagenet\naugment:\n  batch:\n    {entry}\n")
    m = _mixup(load_config(str(path)))
    assert (m.enabled, m.alpha, m.p) == (True, 0.2, 0.5)


def test_explicit_enabled_false_with_params_stays_off() -> None:
    cfg = load_config({"base": "imagenet",
                       "augment": {"batch": {"mixup": {"alpha": 0.3, "enabled": False}}}})
    assert (_mixup(cfg).enabled, _mixup(cfg).alpha) == (False, 0.3)
    cfg = load_config({"base": "imagenet", "augment": {"batch": {"mixup": False}}})
    assert (_mixup(cfg).enabled, _mixup(cfg).alpha, _mixup(cfg).p) == (False, 0.2, 0.5)


def test_set_op_true_keeps_the_presets_other_fields() -> None:
    # was: the whole entry replaced by {} -> p reset to 1.0, alpha to the default
    m = _mixup(load_config("imagenet", {"augment.batch.mixup": "true"}))
    assert (m.enabled, m.p, m.alpha) == (True, 0.5, 0.2)
    m = _mixup(load_config("imagenet", {"augment.batch.mixup": "{alpha: 0.7}"}))
    assert (m.enabled, m.p, m.alpha) == (True, 0.5, 0.7)
    m = _mixup(load_config("imagenet", {"augment.batch.mixup": "false"}))
    assert (m.enabled, m.p, m.alpha) == (False, 0.5, 0.2)


def test_set_one_parameter_enables_the_op_unless_enabled_is_set_too() -> None:
    m = _mixup(load_config("imagenet", {"augment.batch.mixup.alpha": "0.3"}))
    assert (m.enabled, m.p, m.alpha) == (True, 0.5, 0.3)
    m = _mixup(load_config("imagenet", {"augment.batch.mixup.alpha": "0.3",
                                        "augment.batch.mixup.enabled": "false"}))
    assert (m.enabled, m.alpha) == (False, 0.3)
    # an enabled op's other fields are untouched by a parameter override
    b = load_config("imagenet", {"augment.pixel.brightness.p": "0.25"}).augment.pixel["brightness"]
    assert (b.enabled, b.p, b.max_delta) == (True, 0.25, 0.4)


def test_round_trip_keeps_disabled_ops_disabled() -> None:
    cfg = load_config("imagenet")
    again = load_config(cfg.to_dict())
    assert not _mixup(again).enabled and again == cfg


# ------------------------------------------------------------- pipeline.cache
@pytest.mark.parametrize("value, hint", [("ram", ""), ("memroy", "did you mean 'memory'?"),
                                         ("cache", ""), (True, "")])
def test_cache_word_that_is_not_a_keyword_fails_naming_the_allowed_values(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value, hint: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        load_config("imagenet", {"pipeline.cache": value})
    msg = str(e.value)
    assert msg.startswith("pipeline.cache: must be 'none', 'memory' or a directory path"), msg
    assert "'./cache'" in msg and hint in msg
    assert not any(tmp_path.iterdir())  # nothing named `ram/` appeared


@pytest.mark.parametrize("value, stored", [
    ("Memory", "memory"), ("none", "none"), (None, "none"), (False, "none"),
    ("./cache", "./cache"), ("/tmp/tfpipe cache", "/tmp/tfpipe cache"), ("~/c", "~/c"),
    ("data/cache", "data/cache"), (".cache", ".cache")])
def test_cache_accepts_the_keywords_and_paths_spelled_as_paths(value, stored: str) -> None:
    assert load_config("imagenet", {"pipeline.cache": value}).pipeline.cache == stored


# ------------------------------------------------------------ auto / autotune
def test_auto_and_autotune_are_two_values() -> None:
    from tfpipe import system
    from tfpipe.pipeline import batch_parallelism, map_parallelism, settings

    default = load_config("imagenet")
    assert default.pipeline.num_parallel_calls == AUTO  # the measured default stays
    assert default.pipeline.interleave_cycle == AUTO
    assert default.pipeline.tf_value("num_parallel_calls") == TF_AUTO
    s = settings(default)
    assert map_parallelism(s) == max(2, 2 * system.available_cpus())
    tuned = load_config("imagenet", {"pipeline.num_parallel_calls": "AutoTune",
                                     "pipeline.interleave_cycle": "autotune"})
    assert tuned.pipeline.num_parallel_calls == AUTOTUNE
    assert tuned.pipeline.tf_value("num_parallel_calls") == TF_AUTOTUNE
    st = settings(tuned)
    import tensorflow as tf

    assert map_parallelism(st) == tf.data.AUTOTUNE == batch_parallelism(st)
    # the interleave keeps its fixed cycle (the sample order); only the reads are tuned
    assert (st.interleave_cycle, st.read_parallel) == (s.interleave_cycle, tf.data.AUTOTUNE)
    assert load_config("imagenet", {"pipeline.num_parallel_calls": -1}
                       ).pipeline.num_parallel_calls == AUTOTUNE
    assert os.cpu_count()
