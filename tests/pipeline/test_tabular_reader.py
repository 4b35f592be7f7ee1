"""The tabular reader (`read_serialized`): intact shards on the stock reader, a
damaged shard through the tolerant path, in the image reader's order, and the
damage under `on_error: skip` (skipped and counted) and `raise` (shard + offset)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

tf = pytest.importorskip("tensorflow")

sys.path.insert(0, str(Path(__file__).parents[1] / "features"))
from tabular_oracle import make_ctr_dataset  # noqa: E402

from tfpipe.config import load_config  # noqa: E402
from tfpipe.native import tfrecord as native_tfrecord  # noqa: E402
from tfpipe.pipeline import (  # noqa: E402
    build_pipeline, framing_losses, reset_skipped_counts, skipped_counts)
from tfpipe.pipeline._source import read_serialized  # noqa: E402
from tfpipe.records import Manifest  # noqa: E402

DAMAGED_SHARD, DAMAGED_RECORD = 1, 5


def shard_records(path: str) -> list[bytes]:
    return [r.numpy() for r in tf.data.TFRecordDataset(path)]


def round_robin(per_shard: list[list[bytes]]) -> list[bytes]:
    """interleave(cycle >= shards, block_length=1): one record per open shard in turn."""
    out, k = [], 0
    while any(k < len(s) for s in per_shard):
        out += [s[k] for s in per_shard if k < len(s)]
        k += 1
    return out


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    clean = make_ctr_dataset(tmp_path_factory.mktemp("ctr"), rows=1000)[1]
    files = Manifest.load(clean).shard_paths(clean, "train")
    assert 2 <= len(files) <= 4, files  # round_robin's premise (cycle 4)
    damaged = str(tmp_path_factory.mktemp("bad") / "ctr")
    shutil.copytree(clean, damaged)
    bad_files = Manifest.load(damaged).shard_paths(damaged, "train")
    records = [shard_records(f) for f in files]
    offset = damage(bad_files[DAMAGED_SHARD], records[DAMAGED_SHARD], DAMAGED_RECORD)
    return clean, files, damaged, bad_files, records, offset


def damage(path: str, records: list[bytes], k: int) -> int:
    """Flip the first data byte of record `k` of shard `path` (its data CRC no longer
    matches; same size); returns the record's frame offset. A frame: 8-byte length,
    4-byte CRC, data, 4-byte CRC."""
    offset = sum(12 + len(r) + 4 for r in records[:k])
    with open(path, "r+b") as f:
        f.seek(offset + 12)
        byte = f.read(1)
        f.seek(offset + 12)
        f.write(bytes([byte[0] ^ 0xFF]))
    return offset


def test_intact_shards_read_in_the_interleave_order(datasets):
    _, files, _, _, records, _ = datasets
    got = [r.numpy() for r in read_serialized(files, None, -1)]
    assert got == round_robin(records)
    one_at_a_time = [r.numpy() for r in read_serialized(files, None, 1)]
    assert one_at_a_time == [r for shard in records for r in shard]


@pytest.mark.skipif(not native_tfrecord.available(), reason="resync needs the native library")
def test_damaged_shard_skips_only_the_bad_record_others_stay_on_stock_reader(datasets):
    _, _, _, bad_files, records, _ = datasets
    want = [list(s) for s in records]
    del want[DAMAGED_SHARD][DAMAGED_RECORD]
    got = [r.numpy() for r in read_serialized(bad_files, None, -1, skip_framing=True)]
    assert got == round_robin(want)


def cfg(path: str, on_error: str):
    return load_config({"seed": 1, "data": {"path": path},
                        "pipeline": {"batch_size": 64, "shuffle_buffer": 200,
                                     "on_error": on_error},
                        "features": {"label": "label", "columns": {
                            "price": {"transform": "log1p"},
                            "category": {"transform": "vocabulary"}}}})


@pytest.mark.skipif(not native_tfrecord.available(), reason="resync needs the native library")
def test_build_pipeline_skip_counts_and_raise_names_shard_and_offset(datasets):
    _, _, damaged, bad_files, _, offset = datasets
    shard = bad_files[DAMAGED_SHARD]
    reset_skipped_counts()  # process-wide: the reader test above counted it too
    ds = build_pipeline(cfg(damaged, "skip"))
    batches = sum(1 for _ in ds)
    assert batches == int(ds.cardinality())  # the pass is filled to the manifest's count
    assert skipped_counts().get(shard) == 1
    assert framing_losses()[shard]["offset"] == offset
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        for _ in build_pipeline(cfg(damaged, "raise")):
            pass
    assert shard in str(err.value) and f"at byte {offset}" in str(err.value)


@pytest.mark.skipif(not native_tfrecord.available(), reason="resync needs the native library")
def test_a_shard_damaged_after_the_build_time_walk_follows_on_error(datasets, tmp_path):
    """Issue #26 item 2: the build-time walk found the shard intact, so it was read by
    the stock reader alone, and damage made after build_pipeline returned ended the
    run with TF's DataLossError. Now skip counts it and fills the pass; raise names
    the shard and byte offset."""
    clean, _, _, _, records, _ = datasets
    later = str(tmp_path / "ctr")
    shutil.copytree(clean, later)
    files = Manifest.load(later).shard_paths(later, "train")
    reset_skipped_counts()
    skip = build_pipeline(cfg(later, "skip"))
    strict = build_pipeline(cfg(later, "raise"))
    offset = damage(files[DAMAGED_SHARD], records[DAMAGED_SHARD], DAMAGED_RECORD)
    batches = sum(1 for _ in skip)
    assert batches == int(skip.cardinality())
    assert skipped_counts() == {files[DAMAGED_SHARD]: 1}
    assert framing_losses()[files[DAMAGED_SHARD]]["offset"] == offset
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        for _ in strict:
            pass
    assert files[DAMAGED_SHARD] in str(err.value) and f"at byte {offset}" in str(err.value)


def replace_records(data: str, split: str, new: dict[tuple[int, int], bytes]) -> None:
    """Record r of shard k (each (k, r) of `new`) becomes the given bytes, framed
    correctly; the manifest's sizes and sha256 follow (the framing is intact, only
    the Example is wrong)."""
    import hashlib
    import json
    import os

    man_path = Path(data) / "manifest.json"
    manifest = json.loads(man_path.read_text())
    entries = manifest["splits"][split]["shards"]
    for k in sorted({k for k, _ in new}):
        path = Path(data) / entries[k]["path"]
        records = shard_records(str(path))
        for (kk, r), rec in new.items():
            if kk == k:
                records[r] = rec
        with tf.io.TFRecordWriter(str(path)) as w:
            for rec in records:
                w.write(rec)
        entries[k]["num_bytes"] = os.path.getsize(path)
        entries[k]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    man_path.write_text(json.dumps(manifest, indent=2, sort_keys=True))


def test_a_malformed_example_is_skipped_by_shard_and_record_or_named_under_raise(
        datasets, tmp_path):
    """Issue #26 item 1: one record that is no Example, one whose price is int64
    (the schema says float32): the batch's parse_example failed and ended the run
    naming neither shard nor record. Now skip drops exactly those two, counts them
    per shard and delivers every other record in order; raise names the first."""
    import numpy as np

    from tfpipe.records import decode_example

    clean, _, _, _, records, _ = datasets
    bad_data = str(tmp_path / "ctr")
    shutil.copytree(clean, bad_data)
    wrong = tf.train.Example.FromString(records[1][7])
    del wrong.features.feature["price"].float_list.value[:]
    wrong.features.feature["price"].int64_list.value.append(12)
    bad = {(0, 3): b"\xff\xff this is no Example", (1, 7): wrong.SerializeToString()}
    replace_records(bad_data, "train", bad)
    files = Manifest.load(bad_data).shard_paths(bad_data, "train")
    c = load_config({"seed": 1, "data": {"path": bad_data},
                     "pipeline": {"batch_size": 64, "shuffle_buffer": 1, "interleave_cycle": 1,
                                  "drop_remainder": False, "on_error": "skip"},
                     "features": {"label": "label", "columns": {
                         "price": {"transform": "passthrough"},
                         "category": {"transform": "vocabulary"}}}})
    reset_skipped_counts()
    got = list(build_pipeline(c))
    assert skipped_counts() == {files[0]: 1, files[1]: 1}
    keep = [decode_example(r) for k, shard in enumerate(records) for i, r in enumerate(shard)
            if (k, i) not in bad]
    np.testing.assert_array_equal(np.concatenate([y.numpy() for _, y in got]),
                                  [r["label"][0] for r in keep])
    np.testing.assert_array_equal(np.concatenate([f["price"].numpy() for f, _ in got]),
                                  np.array([r["price"][0] for r in keep], np.float32))
    assert all(len(y) == 64 for _, y in got[:-1])  # a short batch is refilled
    c.pipeline.on_error = "raise"
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=f"bad record 3 in shard {files[0]}"):
        for _ in build_pipeline(c):
            pass
