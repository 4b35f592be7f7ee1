"""TfpipeTfrecordWalk walks a damaged TFRecord file as tfpipe.records.framing.walk
does (the reference `tfpipe verify --salvage` uses): same intact records, same
findings, on many random damage patterns (flips, zero runs, cuts, inserted bytes)."""

from __future__ import annotations

import numpy as np
import pytest

from tfpipe import native
from tfpipe.native import tfrecord as native_tfrecord
from tfpipe.records import write_shard
from tfpipe.records.framing import Finding, _Buffer, _Record, walk

needs_native = pytest.mark.skipif(
    not native_tfrecord.available(),
    reason=f"native TFRecord walk unavailable: {native.status()['detail']}")


def _reference(path: str):
    records, findings = [], []
    with _Buffer(path, None) as buf:
        for item in walk(buf):
            if isinstance(item, _Record):
                records.append((item.index, item.offset))
            elif item.kind != "empty":
                assert isinstance(item, Finding)
                findings.append((item.kind, item.offset, item.end,
                                 -1 if item.records_lost is None else item.records_lost))
    return records, findings


def _native(path: str):
    w = native_tfrecord.walk(path, 0, 0)
    records = []
    for start, count, first in zip(w.segment_starts.numpy(), w.segment_counts.numpy(),
                                   w.segment_indices.numpy()):
        records.append((int(first), int(start), int(count)))
    findings = [(k.decode(), int(o), int(e), int(n)) for k, o, e, n in zip(
        w.finding_kinds.numpy(), w.finding_offsets.numpy(), w.finding_ends.numpy(),
        w.finding_records_lost.numpy())]
    return records, findings


@needs_native
@pytest.mark.parametrize("seed", range(12))
def test_walk_matches_framing_walk(tmp_path, seed):
    rng = np.random.default_rng(seed)
    recs = [rng.integers(0, 256, int(rng.integers(0, 400)), dtype=np.uint8).tobytes()
            for _ in range(40)]
    path = str(tmp_path / "x.tfrecord")
    write_shard(path, recs)
    data = bytearray(open(path, "rb").read())
    for _ in range(int(rng.integers(1, 4))):
        p = int(rng.integers(0, len(data)))
        what = seed % 4
        if what == 0:
            for k in range(16):
                if p + k < len(data):
                    data[p + k] ^= 0xFF
        elif what == 1:
            data[p:p + 64] = bytes(len(data[p:p + 64]))
        elif what == 2:
            data[p:p] = rng.integers(0, 256, 7, dtype=np.uint8).tobytes()
        else:
            del data[p:]
            break
    open(path, "wb").write(bytes(data))
    ref_records, ref_findings = _reference(path)
    got_runs, got_findings = _native(path)
    assert ref_findings  # the damage is there
    assert got_findings == ref_findings
    # runs of consecutive records: expand the native runs back to (index, offset)
    expanded = []
    with open(path, "rb") as f:
        blob = f.read()
    for first, start, count in got_runs:
        off = start
        for k in range(count):
            expanded.append((first + k, off))
            off += int.from_bytes(blob[off:off + 8], "little") + 16
    assert expanded == ref_records


@needs_native
def test_walk_of_a_clean_file_from_its_end_is_empty(tmp_path):
    path = str(tmp_path / "x.tfrecord")
    info = write_shard(path, [b"a" * 10, b"b" * 20])
    w = native_tfrecord.walk(path, info.num_bytes, 2)
    assert int(w.file_size) == info.num_bytes
    assert w.segment_starts.shape == [0] and w.finding_offsets.shape == [0]
