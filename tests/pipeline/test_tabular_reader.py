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
    # frame: 8-byte length, 4-byte CRC, data, 4-byte CRC; flip the record's first data byte
    offset = sum(12 + len(r) + 4 for r in records[DAMAGED_SHARD][:DAMAGED_RECORD])
    with open(bad_files[DAMAGED_SHARD], "r+b") as f:
        f.seek(offset + 12)
        byte = f.read(1)
        f.seek(offset + 12)
        f.write(bytes([byte[0] ^ 0xFF]))
    return clean, files, damaged, bad_files, records, offset


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
