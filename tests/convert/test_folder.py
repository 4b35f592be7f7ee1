"""Image-folder conversion, checked through plain tf.data, PIL and hashlib."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from tfpipe.convert import convert
from tfpipe.errors import ConfigError, InputError

from .conftest import read_split, sha256_file, tree_bytes


def _features():
    import tensorflow as tf

    s, i = tf.io.FixedLenFeature([], tf.string), tf.io.FixedLenFeature([], tf.int64)
    return {"image/encoded": s, "image/format": s, "image/height": i, "image/width": i,
            "image/filename": s, "image/source_id": s, "image/class/label": i,
            "image/class/text": s, "tfpipe/schema_version": i}


@pytest.fixture(scope="module")
def converted(folder_src: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("folder_out") / "out"
    manifest = convert(folder_src, out, split="train=0.75,val=0.25", shard_size="20KB",
                       workers=1)
    return out, manifest


def test_round_trip_original_bytes_and_labels(folder_src: Path, converted) -> None:
    out, manifest = converted
    classes = sorted(p.name for p in folder_src.iterdir())
    assert manifest.class_names == classes
    seen = {}
    for split in ("train", "val"):
        for rec in read_split(out, split, _features()):
            rel = rec["image/filename"].decode()
            assert rel not in seen
            seen[rel] = split
            original = (folder_src / rel).read_bytes()
            assert rec["image/encoded"] == original  # stored as-is, never re-encoded
            with Image.open(io.BytesIO(original)) as img:
                assert (rec["image/width"], rec["image/height"]) == img.size
                assert rec["image/format"].decode() == img.format.lower()
            assert classes[rec["image/class/label"]] == rel.split("/")[0]
            assert rec["image/class/text"].decode() == rel.split("/")[0]
            assert rec["tfpipe/schema_version"] == 1
    all_files = sorted(p.relative_to(folder_src).as_posix() for p in folder_src.rglob("*.*"))
    assert sorted(seen) == all_files
    assert set(seen.values()) == {"train", "val"}


def test_manifest_counts_and_checksums(converted) -> None:
    import tensorflow as tf

    out, manifest = converted
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["splits"].keys() == {"train", "val"}
    for split, info in manifest.splits.items():
        assert len(info.shards) >= 1
        for i, shard in enumerate(info.shards):
            path = out / shard.path
            assert shard.path == f"{split}-{i:05d}-of-{len(info.shards):05d}.tfrecord"
            assert sha256_file(path) == shard.sha256
            assert path.stat().st_size == shard.num_bytes
            assert sum(1 for _ in tf.data.TFRecordDataset(str(path))) == shard.num_records
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_classes_spread_across_and_within_shards(converted) -> None:
    out, manifest = converted
    assert len(manifest.splits["train"].shards) >= 3
    shards = manifest.splits["train"].shards
    import tensorflow as tf

    feats = _features()
    sequence = []
    for shard in shards:
        labels = [int(tf.io.parse_single_example(r, feats)["image/class/label"])
                  for r in tf.data.TFRecordDataset(str(out / shard.path))]
        assert len(set(labels)) > 1, f"{shard.path} holds one class only: {labels}"
        sequence += labels
    assert sequence != sorted(sequence)
    counts = [s.num_records for s in shards]
    assert max(counts) - min(counts) <= 1  # balanced record counts


def test_workers_do_not_change_bytes(folder_src: Path, converted, tmp_path: Path) -> None:
    out, _ = converted
    convert(folder_src, tmp_path / "w2", split="train=0.75,val=0.25", shard_size="20KB",
            workers=2)
    assert tree_bytes(tmp_path / "w2") == tree_bytes(out)


def test_gzip_round_trip(folder_src: Path, tmp_path: Path) -> None:
    import gzip

    m = convert(folder_src, tmp_path / "gz", compression="gzip", shard_size="60KB", workers=1)
    shard = m.splits["train"].shards[0]
    assert shard.path.endswith(".tfrecord.gz")
    assert gzip.decompress((tmp_path / "gz" / shard.path).read_bytes())  # a real gzip stream
    recs = read_split(tmp_path / "gz", "train", _features(), compression="gzip")
    assert len(recs) == 32 == m.num_records["train"]


def test_splits_stable_across_runs_and_added_files(folder_copy: Path, tmp_path: Path) -> None:
    def assignment(out: Path) -> dict[str, str]:
        return {r["image/filename"].decode(): split for split in ("train", "val")
                for r in read_split(out, split, _features())}

    kw = dict(split="train=0.5,val=0.5", shard_size="1MB", workers=1, seed=7)
    convert(folder_copy, tmp_path / "a", **kw)
    first = assignment(tmp_path / "a")
    convert(folder_copy, tmp_path / "b", **kw)
    assert assignment(tmp_path / "b") == first
    cls = sorted(p for p in folder_copy.iterdir())[0]
    for k in range(5):
        (cls / f"new{k}.jpg").write_bytes(next(cls.glob("*.jpg")).read_bytes())
    convert(folder_copy, tmp_path / "c", **kw)
    grown = assignment(tmp_path / "c")
    assert len(grown) == len(first) + 5
    assert {k: grown[k] for k in first} == first
    convert(folder_copy, tmp_path / "d", **{**kw, "seed": 8})
    assert assignment(tmp_path / "d") != grown  # the seed matters


def test_bad_images_skipped_and_listed(folder_copy: Path, tmp_path: Path) -> None:
    cls = sorted(p for p in folder_copy.iterdir())[1]
    good = sorted(cls.glob("*.jpg"))[0].read_bytes()
    (cls / "truncated.jpg").write_bytes(good[: len(good) // 2])
    (cls / "text.jpg").write_text("this is not an image")
    (cls / "notes.txt").write_text("ignored")
    m = convert(folder_copy, tmp_path / "out", workers=1)
    skipped = {s.input: s.reason for s in m.splits["train"].skipped}
    rel = cls.name
    assert "truncated" in skipped[f"{rel}/truncated.jpg"].lower()
    assert "not a recognised image" in skipped[f"{rel}/text.jpg"]
    assert skipped[f"{rel}/notes.txt"].startswith("ignored")
    assert m.num_records["train"] == 32
    with pytest.raises(InputError, match=f"{rel}/(truncated|text).jpg"):
        convert(folder_copy, tmp_path / "raise", workers=1, on_error="raise")
    with pytest.raises(InputError, match=f"{rel}/(truncated|text).jpg"):
        convert(folder_copy, tmp_path / "raise2", workers=2, on_error="raise")


def test_clear_errors(folder_src: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sum to 1"):
        convert(folder_src, tmp_path / "x", split="train=0.9,val=0.2")
    with pytest.raises(ConfigError, match="format must be one of"):
        convert(folder_src, tmp_path / "x", format="tfds")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    with pytest.raises(ConfigError, match="not empty.*--resume"):
        convert(folder_src, tmp_path / "full")
    with pytest.raises(InputError, match="no class folders"):
        convert(tmp_path / "full", tmp_path / "y")
