"""on_error: skip (counted, named) / raise (names shard + record); framing damage; repeat()."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from tfpipe.pipeline import build_pipeline, reset_skipped_counts, skipped_counts

from .conftest import _example, base_config, write_shards

BAD = {3: b"\xff\xd8\xff\xe0 not really a jpeg", 7: b"hello, I am text"}


@pytest.fixture(scope="module")
def bad_dataset(tmp_path_factory, images) -> tuple[str, list[str]]:
    """2 shards x 12 records; shard 0 has bad images at record 3 and 7 (indices in shard)."""
    out = tmp_path_factory.mktemp("bad")
    recs = []
    for i in range(24):
        enc, fmt, _ = images[i]
        shard, idx = i % 2, i // 2
        if shard == 0 and idx in BAD:
            enc = BAD[idx]
        recs.append(_example(enc, fmt, i % 4))
    paths = write_shards(Path(out), "train", recs, 2)
    return str(Path(out) / "train-*.tfrecord"), paths


def _count(ds) -> int:
    return sum(int(tf.shape(b["label"])[0]) for b in ds)


def test_skip_counts_and_names_bad_images(bad_dataset, capfd):
    path, paths = bad_dataset
    reset_skipped_counts()
    cfg = base_config(path, **{"pipeline.drop_remainder": False})
    assert _count(build_pipeline(cfg)) == 22
    assert skipped_counts() == {paths[0]: 2}
    err = capfd.readouterr().err
    for idx in BAD:
        assert f"bad record {idx} in shard {paths[0]}" in err


def test_raise_names_shard_and_record(bad_dataset):
    path, paths = bad_dataset
    cfg = base_config(path, **{"pipeline.on_error": "raise", "pipeline.shuffle_buffer": 0})
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"bad record 3 in shard .*00000-of"):
        _count(build_pipeline(cfg, split="validation"))


def test_repeat_over_all_bad_shard_terminates(tmp_path):
    recs = [_example(b"garbage %d" % i, "jpeg", 0) for i in range(5)]
    write_shards(tmp_path, "train", recs, 1)
    cfg = base_config(str(tmp_path / "train-*.tfrecord"))
    ds = build_pipeline(cfg).repeat().take(3)
    assert list(ds) == []  # an epoch that yields nothing ends repeat() instead of spinning


def test_framing_damage_skip_drops_rest_of_that_shard_only(bad_dataset, tmp_path):
    _, paths = bad_dataset
    clean = tmp_path / "c"
    clean.mkdir()
    data = [Path(p).read_bytes() for p in paths]
    # shard 1 (12 good records): flip one byte inside the payload of its 6th record
    framed = bytearray(data[1])
    offset, n = 0, 0
    while n < 5:
        length = int.from_bytes(framed[offset:offset + 8], "little")
        offset += 8 + 4 + length + 4
        n += 1
    framed[offset + 12 + 40] ^= 0xFF
    (clean / "train-00000-of-00002.tfrecord").write_bytes(data[0])
    (clean / "train-00001-of-00002.tfrecord").write_bytes(bytes(framed))
    glob = str(clean / "train-*.tfrecord")
    cfg = base_config(glob, **{"pipeline.drop_remainder": False})
    # shard 0: 12 - 2 bad images; shard 1: the 5 records before the damage
    assert _count(build_pipeline(cfg)) == 10 + 5
    damaged = base_config(str(clean / "train-00001-*.tfrecord"),
                          **{"pipeline.on_error": "raise"})
    with pytest.raises(tf.errors.DataLossError):
        _count(build_pipeline(damaged, split="validation"))


# ----------------------------------------------------------------- damaged JPEG scans (bug 7)

def _damage_scan(data: bytes, kind: str) -> bytes:
    """Damage the entropy-coded data early in the scan (10% in): TF decodes the
    result without an error, gray from there on."""
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")
    p = start + (data.rindex(b"\xff\xd9") - start) // 10
    if kind == "cut":
        return data[:p] + b"\xff\xd9"
    b = bytearray(data)
    b[p:p + 2] = b"\xff\xd9"  # "Corrupt JPEG data: premature end of data segment"
    return bytes(b)


DAMAGED = {2: "eoi", 5: "cut"}  # record index in shard 1 -> kind


@pytest.fixture(scope="module")
def damaged_jpegs(tmp_path_factory, images) -> tuple[str, list[str]]:
    """2 shards x 12 records; shard 1 has damaged JPEG scans at records 2 and 5."""
    out = tmp_path_factory.mktemp("damaged")
    jpegs = [(enc, fmt) for enc, fmt, img in images if fmt == "jpeg" and img.ndim == 3]
    recs = []
    for i in range(24):
        enc, fmt = jpegs[i % len(jpegs)]
        shard, idx = i % 2, i // 2
        if shard == 1 and idx in DAMAGED:
            enc = _damage_scan(enc, DAMAGED[idx])
            tf.io.decode_jpeg(enc)  # the premise: TF's op does not fail
        recs.append(_example(enc, fmt, i % 4))
    paths = write_shards(Path(out), "train", recs, 2)
    return str(Path(out) / "train-*.tfrecord"), paths


needs_strict = pytest.mark.skipif(
    "not __import__('tfpipe.native.jpeg').native.jpeg.available()",
    reason="the strict JPEG decode needs the native library (python -m tfpipe.native build)")


@needs_strict
@pytest.mark.parametrize("split", ["train", "validation"])
def test_damaged_jpeg_scans_are_skipped_and_counted(damaged_jpegs, split, capfd):
    """Before: all 24 delivered, skipped_counts() empty, half-gray images trained."""
    path, paths = damaged_jpegs
    reset_skipped_counts()
    cfg = base_config(path, **{"pipeline.drop_remainder": False})
    assert _count(build_pipeline(cfg, split=split)) == 22
    assert skipped_counts() == {paths[1]: 2}
    err = capfd.readouterr().err
    for idx in DAMAGED:
        assert f"bad record {idx} in shard {paths[1]}" in err


@needs_strict
def test_damaged_jpeg_scan_raises_naming_shard_and_record(damaged_jpegs):
    path, paths = damaged_jpegs
    cfg = base_config(path, **{"pipeline.on_error": "raise", "pipeline.shuffle_buffer": 0})
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"bad record 2 in shard .*00001-of-00002"):
        _count(build_pipeline(cfg))
