"""Every tfpipe preset, built on a tiny converted dataset, comes out clean:
no doctor finding above info. A preset that trips a rule is a pipeline bug."""

from __future__ import annotations

import json

import pytest

from tfpipe import doctor

pipeline = pytest.importorskip("tfpipe.pipeline", reason="tfpipe.pipeline not written yet")
if not hasattr(pipeline, "build_pipeline"):
    pytest.skip("tfpipe.pipeline.build_pipeline not importable yet", allow_module_level=True)

from tfpipe.config import load_config, preset_names  # noqa: E402


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, str]:
    """Classification (image folder) and detection (COCO JSON) datasets, converted."""
    from tfpipe import sample_data
    from tfpipe.convert import convert

    root = tmp_path_factory.mktemp("doctor-presets")
    sample_data.make_image_folder(root / "folder", num_classes=2, per_class=4,
                                  size_range=(40, 60))
    convert(root / "folder", root / "cls", split="train=0.5,val=0.5", workers=1)

    coco = root / "coco"
    coco.mkdir()
    images, annotations = [], []
    for i, jpeg in enumerate(sample_data.make_jpeg_bytes(4, seed=1)):
        name = f"{i}.jpg"
        (coco / name).write_bytes(jpeg)
        images.append({"id": i, "file_name": name})
        annotations.append({"id": i, "image_id": i, "category_id": 1 + i % 2,
                            "bbox": [2.0, 3.0, 10.0, 12.0]})
    (coco / "ann.json").write_text(json.dumps({
        "images": images, "annotations": annotations,
        "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]}))
    convert(coco / "ann.json", root / "det", format="coco", split="train=0.5,val=0.5",
            workers=1)
    return {"classification": str(root / "cls"), "detection": str(root / "det")}


@pytest.mark.parametrize("preset", preset_names())
def test_preset_is_clean(preset, converted):
    cfg = load_config(preset)
    cfg = load_config(preset, {"data.path": converted[cfg.data.task]})
    splits = ("train", "val") if preset == "imagenet" else ("train",)
    for split in splits:
        findings = doctor.check_config(cfg, split=split)
        loud = [(f.rule, f.severity, f.op, f.message) for f in findings if f.severity != "info"]
        assert loud == [], f"{preset} ({split})"
