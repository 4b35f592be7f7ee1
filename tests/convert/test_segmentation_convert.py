"""Image folder + --masks -> segmentation records: the stored mask PNG decodes (PIL)
to the source mask, each bad mask is skipped-and-listed or raised naming its file,
`verify --deep` finds a damaged mask, and TFDS reads the mask feature."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from tfpipe.convert import convert
from tfpipe.errors import ConfigError, InputError
from tfpipe.records import MASK_KEY, Manifest, verify
from tfpipe.sample_data import SEGMENTATION_CLASSES, make_segmentation_folder

from .conftest import read_split, tree_bytes


@pytest.fixture(scope="module")
def seg_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_segmentation_folder(tmp_path_factory.mktemp("seg") / "src", num_images=8,
                                    seed=4, size_range=(32, 64))


@pytest.fixture(scope="module")
def seg_out(seg_src: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    out = tmp_path_factory.mktemp("seg_out") / "out"
    manifest = convert(seg_src / "images", out, masks=seg_src / "masks",
                       classes=seg_src / "classes.txt", split="train=0.5,val=0.5", workers=1)
    return out, manifest


def _features():
    import tensorflow as tf

    return {k: tf.io.FixedLenFeature([], tf.string)
            for k in ("image/encoded", "image/filename", MASK_KEY,
                      "image/segmentation/class/format")}


def _png(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        assert img.mode == "L" and img.format == "PNG"
        return np.asarray(img)


def _records(out: Path, manifest: Manifest) -> list[dict]:
    return [r for split in manifest.splits for r in read_split(out, split, _features())]


def test_masks_round_trip(seg_src: Path, seg_out) -> None:
    out, manifest = seg_out
    assert manifest.class_names == list(SEGMENTATION_CLASSES)
    assert MASK_KEY in manifest.schema and "image/class/label" not in manifest.schema
    assert manifest.source["task"] == "segmentation"
    records = _records(out, manifest)
    names = sorted(r["image/filename"].decode() for r in records)
    assert names == sorted(p.relative_to(seg_src / "images").as_posix()
                           for p in (seg_src / "images").rglob("*.*"))
    assert any("/" in n for n in names)  # images in a sub-folder too
    for r in records:
        rel = r["image/filename"].decode()
        mask_path = seg_src / "masks" / Path(rel).with_suffix(".png")
        source = np.asarray(Image.open(mask_path))
        assert np.array_equal(_png(r[MASK_KEY]), source), rel
        assert r[MASK_KEY] == mask_path.read_bytes()  # an 8-bit gray PNG is kept as is
        assert r["image/segmentation/class/format"] == b"png"
        assert r["image/encoded"] == (seg_src / "images" / rel).read_bytes()
    # the per-class pixel counts add up to every pixel of every mask
    stats = manifest.settings["stats"]
    total = sum(np.asarray(Image.open(p)).size for p in (seg_src / "masks").rglob("*.png"))
    assert sum(v for s in stats.values() for k, v in s.items()
               if k.startswith("mask_pixels/")) == total


def test_class_names_default_to_largest_class_seen(seg_src: Path, tmp_path: Path) -> None:
    manifest = convert(seg_src / "images", tmp_path / "out", masks=seg_src / "masks",
                       workers=1)
    seen = max(int(v) for p in (seg_src / "masks").rglob("*.png")
               for v in np.unique(np.asarray(Image.open(p))) if v != 255)
    assert manifest.class_names == [f"class_{k}" for k in range(seen + 1)]


def _save(path: Path, array: np.ndarray, mode: str | None = None) -> None:
    img = Image.fromarray(array) if mode is None else Image.fromarray(array).convert(mode)
    img.save(path, format="PNG")


@pytest.fixture()
def bad_src(seg_src: Path, tmp_path: Path) -> Path:
    """A copy with one bad mask of each kind (and one 16-bit mask that is fine)."""
    src = tmp_path / "src"
    shutil.copytree(seg_src, src)
    masks = sorted((src / "masks").glob("*.png"))
    arrays = [np.asarray(Image.open(p)) for p in masks]
    _save(masks[0], arrays[0][:-1])  # one row short
    Image.fromarray(arrays[1]).convert("P").save(masks[1])  # palette
    _save(masks[2], np.repeat(arrays[2][..., None], 3, axis=2))  # RGB
    masks[3].unlink()  # missing
    bad_class = arrays[4].copy()
    bad_class[0, 0] = 9
    _save(masks[4], bad_class)
    Image.fromarray(arrays[5].astype(np.uint16)).save(masks[5])  # 16-bit, values <= 255
    return src


def test_bad_masks_skipped_and_listed(bad_src: Path, tmp_path: Path) -> None:
    manifest = convert(bad_src / "images", tmp_path / "out", masks=bad_src / "masks",
                       classes=bad_src / "classes.txt", workers=1)
    skipped = {s.input: s.reason for info in manifest.splits.values() for s in info.skipped}
    stems = sorted(p.stem for p in (bad_src / "images").glob("*.*"))
    by_stem = {Path(k).stem: v for k, v in skipped.items()}
    assert set(by_stem) == set(stems[:5])
    assert "is 33x" in by_stem[stems[0]] or "its image is" in by_stem[stems[0]]
    assert f"{stems[0]}.png" in by_stem[stems[0]]
    assert "palette (P mode)" in by_stem[stems[1]] and "fromarray" in by_stem[stems[1]]
    assert "RGB" in by_stem[stems[2]] and "single-channel" in by_stem[stems[2]]
    assert "mask not found" in by_stem[stems[3]] and f"{stems[3]}.png" in by_stem[stems[3]]
    assert "[9]" in by_stem[stems[4]] and "classes file names 4" in by_stem[stems[4]]
    # the 16-bit mask is stored, re-encoded losslessly as 8-bit
    out = tmp_path / "out"
    records = _records(out, manifest)
    rec = next(r for r in records if Path(r["image/filename"].decode()).stem == stems[5])
    source = np.asarray(Image.open(bad_src / "masks" / f"{stems[5]}.png"))
    assert source.dtype != np.uint8 and np.array_equal(_png(rec[MASK_KEY]), source)


def test_bad_masks_raise(bad_src: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        convert(bad_src / "images", tmp_path / "out", masks=bad_src / "masks",
                classes=bad_src / "classes.txt", on_error="raise", workers=1)
    msg = str(info.value)
    assert "5 bad input(s)" in msg and "palette" in msg and "mask not found" in msg
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_option_errors(seg_src: Path, tmp_path: Path, coco_src: Path) -> None:
    with pytest.raises(ConfigError, match="masks= goes with an image folder"):
        convert(coco_src, tmp_path / "a", masks=seg_src / "masks")
    with pytest.raises(ConfigError, match="classes= names the classes of masks="):
        convert(seg_src / "images", tmp_path / "b", classes=seg_src / "classes.txt")
    with pytest.raises(ConfigError, match="needs masks=MASKS"):
        convert(seg_src / "images", tmp_path / "c", task="segmentation")
    classes = tmp_path / "classes.txt"
    classes.write_text("background\n\ncat\n")
    with pytest.raises(InputError, match="line 2 is blank"):
        convert(seg_src / "images", tmp_path / "d", masks=seg_src / "masks", classes=classes)


def test_verify_deep_reports_a_damaged_mask(seg_out, tmp_path: Path) -> None:
    import tensorflow as tf

    out, manifest = seg_out
    assert verify(out, deep=True).ok
    # Rewrite one shard with one record's mask replaced by a wrong-size PNG and
    # another's by garbage; then re-point the manifest at the new bytes.
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shard = manifest.splits["train"].shards[0].path
    records = list(tf.data.TFRecordDataset(str(copy / shard)).as_numpy_iterator())
    assert len(records) >= 2
    damaged = []
    for i, data in enumerate(records):
        ex = tf.train.Example.FromString(data)
        feature = ex.features.feature[MASK_KEY].bytes_list
        if i == 0:
            buf = io.BytesIO()
            Image.fromarray(np.zeros((5, 7), np.uint8)).save(buf, format="PNG")
            feature.value[0] = buf.getvalue()
        elif i == 1:
            feature.value[0] = feature.value[0][:40]
        damaged.append(ex.SerializeToString())
    with tf.io.TFRecordWriter(str(copy / shard)) as w:
        for data in damaged:
            w.write(data)
    obj = json.loads((copy / "manifest.json").read_text())
    import hashlib

    entry = obj["splits"]["train"]["shards"][0]
    entry["sha256"] = hashlib.sha256((copy / shard).read_bytes()).hexdigest()
    entry["num_bytes"] = (copy / shard).stat().st_size
    (copy / "manifest.json").write_text(json.dumps(obj))
    report = verify(copy, deep=True)
    masks = [f for f in report.findings if f.kind == "bad-mask"]
    assert len(masks) == 2, report.findings
    names = [tf.train.Example.FromString(d).features.feature["image/filename"]
             .bytes_list.value[0].decode() for d in records[:2]]
    assert names[0] in masks[0].message and "is 5x7" in masks[0].message
    assert names[1] in masks[1].message and "does not decode" in masks[1].message
    from tfpipe.cli.main import cli

    result = CliRunner().invoke(cli, ["verify", str(copy), "--deep"])
    assert result.exit_code != 0 and "bad-mask" in result.output


def test_cli_sample_data_convert_inspect(tmp_path: Path) -> None:
    from tfpipe.cli.main import cli

    runner = CliRunner()
    src = tmp_path / "src"
    result = runner.invoke(cli, ["sample-data", "segmentation", str(src), "--images", "3",
                                 "--min-size", "24", "--max-size", "32"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["convert", str(src / "images"), str(tmp_path / "out"),
                                 "--masks", str(src / "masks"), "--classes",
                                 str(src / "classes.txt"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    masks = summary["splits"]["train"]["masks"]
    assert masks["masks"] == 3 and summary["class_names"] == list(SEGMENTATION_CLASSES)
    assert abs(sum(masks["class_share"].values()) - 1) < 1e-9
    result = runner.invoke(cli, ["inspect", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert MASK_KEY in result.output and "classes [0, " in result.output
    assert "label: tfpipe/schema_version" not in result.output


def test_tfds_reads_the_mask(seg_src: Path, seg_out) -> None:
    tfds = pytest.importorskip("tensorflow_datasets")
    out, manifest = seg_out
    builder = tfds.builder_from_directory(out)
    assert builder.info.supervised_keys == ("image/encoded", MASK_KEY)
    n = 0
    for split in manifest.splits:
        for ex in tfds.as_numpy(builder.as_dataset(split=split)):
            rel = ex["image/filename"].decode()
            source = np.asarray(Image.open(seg_src / "masks" / Path(rel).with_suffix(".png")))
            assert ex[MASK_KEY].shape == source.shape + (1,) and ex[MASK_KEY].dtype == np.uint8
            assert np.array_equal(ex[MASK_KEY][..., 0], source), rel
            n += 1
    assert n == 8


@pytest.mark.skipif(importlib.util.find_spec("apache_beam") is None,
                    reason="needs apache-beam (the beam extra)")
def test_beam_direct_runner_gives_the_local_bytes(seg_src: Path, seg_out, tmp_path: Path) -> None:
    out, _ = seg_out
    beam = tmp_path / "beam"
    convert(seg_src / "images", beam, masks=seg_src / "masks", classes=seg_src / "classes.txt",
            split="train=0.5,val=0.5", runner="direct")  # in-memory: one process
    assert tree_bytes(beam) == tree_bytes(out)
