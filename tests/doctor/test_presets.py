"""Every tfpipe preset, built on a tiny converted dataset, comes out clean:
no doctor finding above info. A preset that trips a rule is a pipeline bug."""

from __future__ import annotations

import pytest

from tfpipe import doctor
from tfpipe.config import load_config, preset_names


@pytest.mark.parametrize("preset", preset_names())
def test_preset_is_clean(preset, converted):
    cfg = load_config(preset)
    kind = ("tabular" if cfg.features is not None else
            "pose" if cfg.data.keypoints is not None else cfg.data.task)
    over = {"data.path": converted[kind]}
    if kind in ("segmentation", "pose"):  # a quarter of the size: the same graph, less to trace
        over["data.image_size"] = [d // 4 for d in cfg.data.image_size]
    cfg = load_config(preset, over)
    splits = ("train", "val") if preset == "imagenet" else ("train",)
    for split in splits:
        findings = doctor.check_config(cfg, split=split)
        loud = [(f.rule, f.severity, f.op, f.message) for f in findings if f.severity != "info"]
        assert loud == [], f"{preset} ({split})"


def test_doctor_reads_the_epoch_inside_a_train_dataset(converted):
    """A train dataset runs each epoch inside a flat_map (one epoch per iteration);
    doctor must still see the per-sample maps, not only that wrapper."""
    from tfpipe import build_pipeline
    from tfpipe.doctor._graph import PipelineGraph
    from tfpipe.pipeline import _block, one_epoch_view

    cfg = load_config("imagenet", {"data.path": converted["classification"]})
    with _block.forced(False):  # the per-element path (views are built lazily, inside too)
        ds = build_pipeline(cfg, split="train")
        wrapper = [n.op for n in PipelineGraph.from_dataset(ds).chain]
        assert "FlatMapDataset" in wrapper and "ParallelMapDatasetV2" not in wrapper
        view = one_epoch_view(ds)
        assert view is not None and one_epoch_view(build_pipeline(cfg, split="val")) is None
        inner = [n.op for n in PipelineGraph.from_dataset(view).chain]
        assert "ParallelMapDatasetV2" in inner and "FlatMapDataset" not in inner
        # what doctor reports on the dataset is what it reports on the epoch it runs
        rules = sorted((f.rule, f.function) for f in doctor.check(ds))
        assert rules == sorted((f.rule, f.function) for f in doctor.check(view))
        assert any(f.rule == "unbatched-parse" for f in doctor.check(ds)), rules
    # the block path (the default here): its epoch is read through the wrapper too
    block = build_pipeline(cfg, split="train")
    assert sorted((f.rule, f.function) for f in doctor.check(block)) == sorted(
        (f.rule, f.function) for f in doctor.check(one_epoch_view(block)))
