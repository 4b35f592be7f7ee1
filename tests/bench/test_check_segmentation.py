"""`tfpipe check` on converted segmentation datasets: a good one passes; a mask with a
value outside the classes and a mask of another size than its image fail, naming the
record, the image and the value.

The bad datasets are the good one's records with one mask replaced (written with
tfpipe's shard writer): `tfpipe convert` itself refuses such masks.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from click.testing import CliRunner
from PIL import Image

from tfpipe.bench import check as C
from tfpipe.cli.check import command as check_cli

BAD = 2  # the record (file order) whose mask is replaced


@pytest.fixture(scope="module")
def seg_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from tfpipe import sample_data
    from tfpipe.convert import convert

    root = tmp_path_factory.mktemp("seg-check")
    src = sample_data.make_segmentation_folder(root / "src", num_images=8, size_range=(32, 48))
    convert(src / "images", root / "good", masks=src / "masks", classes=src / "classes.txt",
            workers=1)
    return {"good": str(root / "good"), "out_of_range": _rewritten(root, "out_of_range"),
            "mismatched": _rewritten(root, "mismatched")}


def _png(mask: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(mask.astype(np.uint8), "L").save(buf, format="PNG")
    return buf.getvalue()


def _rewritten(root: Path, kind: str) -> str:
    """The good dataset with record BAD's mask made out of range (a 7 at one pixel) or
    one row shorter than its image."""
    from tfpipe.records import (MASK_KEY, Manifest, ShardEntry, SplitInfo, iter_frames,
                                load_manifest, open_source, write_shard)

    good = open_source(root / "good", split="train")
    records = [bytes(d) for f in good.files for _, _, d in iter_frames(f)]
    ex = tf.train.Example.FromString(records[BAD])
    feature = ex.features.feature[MASK_KEY].bytes_list
    mask = np.array(Image.open(io.BytesIO(feature.value[0])))
    if kind == "out_of_range":
        mask[mask.shape[0] // 2, mask.shape[1] // 2] = 7
    else:
        mask = mask[:-1]
    feature.value[:] = [_png(mask)]
    records[BAD] = ex.SerializeToString()
    out = root / kind
    out.mkdir()
    info = write_shard(str(out / "train-00000-of-00001.tfrecord"), records)
    manifest = load_manifest(root / "good")
    Manifest(schema=manifest.schema, splits={"train": SplitInfo(shards=[
        ShardEntry.from_info(info, out)])}, class_names=list(manifest.class_names)).save(out)
    return str(out)


def _config(path: str):
    from tfpipe.config import load_config

    return load_config({"data": {"path": path, "task": "segmentation", "image_size": [24, 32]},
                        "pipeline": {"batch_size": 4, "shuffle_buffer": 8},
                        "augment": {"geometry": {"flip": {"horizontal": True}}}})


def _stored(path: str) -> tuple[np.ndarray, list[str]]:
    """Oracle: every stored mask value (PIL) and the record's image names, file order."""
    from tfpipe.records import MASK_KEY, iter_frames, open_source

    src = open_source(path, split="train")
    values, names = [], []
    for f in src.files:
        for _, _, d in iter_frames(f):
            ex = tf.train.Example.FromString(bytes(d))
            m = np.array(Image.open(io.BytesIO(ex.features.feature[MASK_KEY].bytes_list.value[0])))
            values.append(m.ravel())
            names.append(ex.features.feature["image/filename"].bytes_list.value[0].decode())
    return np.concatenate(values), names


def test_good_dataset_passes_with_the_ignore_share(seg_data) -> None:
    results = C.run_checks(_config(seg_data["good"]), batches=1,
                           only=["dtypes", "labels", "masks"])
    by = {r.name: r for r in results}
    assert list(by) == ["dtypes and shapes", "labels", "masks aligned"]
    assert all(r.passed and not r.skipped for r in results), [(r.name, r.detail) for r in results]
    assert "mask int32[4, 24, 32, 1]" in by["dtypes and shapes"].detail
    values, _ = _stored(seg_data["good"])
    share = 100.0 * np.count_nonzero(values == 255) / values.size
    assert share > 0  # the generator's boundary rings
    assert f"ignore (255) {share:.1f}% of the stored pixels" in by["labels"].detail
    assert "8 stored masks: every value in [0, 4) or 255" in by["labels"].detail
    assert by["masks aligned"].detail.startswith("8 masks decoded")


def test_out_of_range_mask_value_fails_naming_record_and_value(seg_data) -> None:
    path = seg_data["out_of_range"]
    (labels, aligned) = C.run_checks(_config(path), only=["labels", "masks"])
    assert aligned.passed
    assert not labels.passed
    _, names = _stored(path)
    assert f"record {BAD} of " in labels.detail and repr(names[BAD]) in labels.detail
    assert "mask value 7 outside [0, 4) and not data.ignore_label 255" in labels.detail
    assert "set data.num_classes to at least 8" in labels.detail
    # another ignore label makes the stored 255 (the convert's ignore) out of range too
    (strict,) = C.run_checks(_config(seg_data["good"]), ["data.ignore_label=250"],
                             only=["labels"])
    assert not strict.passed and "mask value 255 outside [0, 4)" in strict.detail


def test_mismatched_mask_fails_naming_record_and_sizes(seg_data) -> None:
    path = seg_data["mismatched"]
    res = CliRunner().invoke(check_cli, ["--json", "--only", "masks", "--set",
                                         f"data.path={path}", "--set",
                                         "data.task=segmentation", "imagenet"])
    assert res.exit_code == 1, res.output
    out = {c["name"]: c for c in json.loads(res.stdout)["checks"]}
    detail = out["masks aligned"]["detail"]
    assert not out["masks aligned"]["passed"]
    _, names = _stored(path)
    h, w = Image.open(io.BytesIO(_image_bytes(path, BAD))).size[::-1]
    assert f"record {BAD} of " in detail and repr(names[BAD]) in detail
    assert f"mask {h - 1}x{w} (height x width), its image {h}x{w}" in detail


def _image_bytes(path: str, index: int) -> bytes:
    from tfpipe.records import iter_frames, open_source

    frames = [bytes(d) for f in open_source(path, split="train").files for _, _, d in iter_frames(f)]
    ex = tf.train.Example.FromString(frames[index])
    return ex.features.feature["image/encoded"].bytes_list.value[0]


def test_naive_baseline_carries_the_mask_with_the_image(seg_data) -> None:
    """`tfpipe bench --baseline naive` on a segmentation config: the mask gets the
    image's crop and flip. Oracle: the generator paints each class in one solid colour,
    so where the mask says class k the image shows k's colour."""
    from tfpipe.bench.baselines import naive_from_config
    from tfpipe.config import load_config
    from tfpipe.sample_data import SHAPE_COLORS

    cfg = load_config({"data": {"path": seg_data["good"], "task": "segmentation",
                                "image_size": [40, 40], "output_dtype": "uint8"},
                       "pipeline": {"batch_size": 8, "shuffle_buffer": 0},
                       "augment": {"geometry": {"random_resized_crop": {"scale": [0.3, 1.0]},
                                                "flip": {"horizontal": True}}}})
    ds, spec = naive_from_config(cfg)
    assert spec.masks
    batch = next(iter(ds))
    image, mask = batch["image"].numpy().astype(int), batch["mask"].numpy()[..., 0]
    assert batch["mask"].dtype == tf.int32 and mask.shape == (8, 40, 40)
    hits = total = 0
    for k, colour in SHAPE_COLORS.items():
        at = mask == k
        near = (np.abs(image - np.array(colour)) <= 40).all(-1)
        hits += int((near & at).sum())
        total += int(at.sum())
    # 0.9: bilinear blur and JPEG at the shapes' edges; an unflipped or uncropped mask: < 0.5
    assert total > 200 and hits >= 0.9 * total, (hits, total)
