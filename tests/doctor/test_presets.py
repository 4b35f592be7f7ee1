"""Every tfpipe preset, built on a tiny converted dataset, comes out clean:
no doctor finding above info. A preset that trips a rule is a pipeline bug."""

from __future__ import annotations

import pytest

from tfpipe import doctor
from tfpipe.config import load_config, preset_names


@pytest.mark.parametrize("preset", preset_names())
def test_preset_is_clean(preset, converted):
    cfg = load_config(preset)
    cfg = load_config(preset, {"data.path": converted[cfg.data.task]})
    splits = ("train", "val") if preset == "imagenet" else ("train",)
    for split in splits:
        findings = doctor.check_config(cfg, split=split)
        loud = [(f.rule, f.severity, f.op, f.message) for f in findings if f.severity != "info"]
        assert loud == [], f"{preset} ({split})"
