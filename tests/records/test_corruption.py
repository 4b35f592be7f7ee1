"""Damaged shards: each kind of damage gives the right finding; salvage keeps
every intact record, including those after the damage."""

from __future__ import annotations

import gzip
import os
import struct
import tracemalloc

import pytest
import tensorflow as tf

from tfpipe.errors import RecordError
from tfpipe.records import iter_frames, salvage, scan_file, write_shard


def _offsets(records: list[bytes]) -> list[int]:
    out, p = [], 0
    for r in records:
        out.append(p)
        p += len(r) + 16
    return out


@pytest.fixture()
def shard(tmp_path, cls_records):
    path = str(tmp_path / "train-00000-of-00001.tfrecord")
    write_shard(path, cls_records)
    return path


def _patch(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def _tf_records(path: str) -> list[bytes]:
    return [r.numpy() for r in tf.data.TFRecordDataset(path)]


def test_flip_data_byte(shard, cls_records, tmp_path):
    off = _offsets(cls_records)
    _flip(shard, off[5] + 12 + 40)
    findings = scan_file(shard)
    assert [(f.kind, f.index, f.offset) for f in findings] == [("corrupted-data", 5, off[5])]
    assert findings[0].path == shard and findings[0].records_lost == 1
    with pytest.raises(RecordError) as e:
        list(iter_frames(shard))
    assert (e.value.path, e.value.index, e.value.offset) == (shard, 5, off[5])
    rep = salvage(shard, tmp_path / "out.tfrecord")
    expected = cls_records[:5] + cls_records[6:]
    assert rep.records_kept == len(expected) and rep.records_lost_known == 1
    assert rep.records_lost_exact
    assert _tf_records(rep.out.path) == expected  # plain tf.data oracle
    # tf.data's ignore_errors loses everything after the damage; salvage does not
    ignored = [r.numpy() for r in tf.data.TFRecordDataset(shard).ignore_errors()]
    assert len(ignored) == 5


def test_flip_length_field(shard, cls_records, tmp_path):
    off = _offsets(cls_records)
    _flip(shard, off[3] + 2)
    findings = scan_file(shard)
    assert [(f.kind, f.index, f.offset) for f in findings] == [("corrupted-length", 3, off[3])]
    assert findings[0].end == off[4]  # resynchronised exactly at the next frame
    rep = salvage(shard, tmp_path / "out.tfrecord")
    assert _tf_records(rep.out.path) == cls_records[:3] + cls_records[4:]
    assert rep.bytes_lost == off[4] - off[3]
    assert rep.records_lost_known == 0 and not rep.records_lost_exact  # unknowable


def test_garbage_in_the_middle_resyncs(tmp_path, cls_records):
    path = str(tmp_path / "g.tfrecord")
    good = open(write_shard(tmp_path / "a", cls_records[:4]).path, "rb").read()
    rest = open(write_shard(tmp_path / "b", cls_records[4:]).path, "rb").read()
    junk = bytes(range(256)) * 3 + b"\x00" * 100
    with open(path, "wb") as f:
        f.write(good + junk + rest)
    findings = scan_file(path)
    assert [(f.kind, f.index, f.offset, f.end) for f in findings] == \
        [("corrupted-length", 4, len(good), len(good) + len(junk))]
    rep = salvage(path, tmp_path / "out.tfrecord")
    assert _tf_records(rep.out.path) == cls_records


def test_truncated_shard(shard, cls_records, tmp_path):
    off = _offsets(cls_records)
    size = os.path.getsize(shard)
    os.truncate(shard, size - 10)
    findings = scan_file(shard)
    assert [(f.kind, f.index, f.offset) for f in findings] == \
        [("truncated", len(cls_records) - 1, off[-1])]
    rep = salvage(shard, tmp_path / "out.tfrecord")
    assert _tf_records(rep.out.path) == cls_records[:-1]
    os.truncate(shard, off[2] + 5)  # inside a header
    assert [(f.kind, f.index, f.offset) for f in scan_file(shard)] == [("truncated", 2, off[2])]


def test_empty_file(tmp_path):
    p = tmp_path / "e.tfrecord"
    p.write_bytes(b"")
    assert [(f.kind, f.path) for f in scan_file(p)] == [("empty", str(p))]


def test_jpeg_is_not_a_tfrecord(tmp_path, jpegs):
    p = tmp_path / "photo.tfrecord"
    p.write_bytes(jpegs[0])
    findings = scan_file(p)
    assert [(f.kind, f.index, f.offset) for f in findings] == [("not-a-tfrecord", 0, 0)]
    with pytest.raises(RecordError, match="not a TFRecord"):
        list(iter_frames(p))


def test_garbage_length_does_not_allocate(tmp_path, cls_records):
    for comp in (None, "gzip"):
        path = str(tmp_path / ("big.tfrecord" + (".gz" if comp else "")))
        header = struct.pack("<Q", 2**60)
        from tfpipe.records import masked_crc32c

        # a header whose CRC is valid, declaring 2**60 bytes: only a bound saves us
        frame = header + struct.pack("<I", masked_crc32c(header)) + b"x" * 100
        data = frame if comp is None else gzip.compress(frame)
        open(path, "wb").write(data)
        tracemalloc.start()
        findings = scan_file(path)
        with pytest.raises(RecordError, match="truncated"):
            list(iter_frames(path))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 64 << 20
        assert [(f.kind, f.index, f.offset) for f in findings] == [("truncated", 0, 0)]


def test_gzip_shard_damage_reports_decompressed_offsets(tmp_path, cls_records):
    path = str(tmp_path / "z.tfrecord.gz")
    off = _offsets(cls_records)
    # damage the decompressed content, then compress: the frame scan runs on the
    # decompressed stream, so offsets are decompressed ones and say so
    raw = bytearray(open(write_shard(tmp_path / "p", cls_records).path, "rb").read())
    raw[off[7] + 20] ^= 0xFF
    open(path, "wb").write(gzip.compress(bytes(raw), mtime=0))
    findings = scan_file(path)
    assert [(f.kind, f.index, f.offset, f.offset_space) for f in findings] == \
        [("corrupted-data", 7, off[7], "decompressed")]
    assert "decompressed" in str(findings[0])
    rep = salvage(path, tmp_path / "out.tfrecord.gz")
    assert [r.numpy() for r in tf.data.TFRecordDataset(rep.out.path, "GZIP")] == \
        cls_records[:7] + cls_records[8:]
    # a cut GZIP stream: everything before the cut is still salvaged
    good = write_shard(tmp_path / "q.tfrecord.gz", cls_records, "gzip").path
    blob = open(good, "rb").read()
    open(good, "wb").write(blob[: len(blob) * 2 // 3])
    kinds = {f.kind for f in scan_file(good)}
    assert "truncated" in kinds
    rep2 = salvage(good, tmp_path / "out2.tfrecord")
    assert 0 < rep2.records_kept < len(cls_records)
    assert _tf_records(rep2.out.path) == cls_records[: rep2.records_kept]


def test_plain_file_named_gz_is_not_a_tfrecord(tmp_path, cls_records):
    plain = write_shard(tmp_path / "p.tfrecord", cls_records[:2]).path
    wrong = tmp_path / "w.tfrecord.gz"
    wrong.write_bytes(open(plain, "rb").read())
    assert [(f.kind, f.index, f.offset) for f in scan_file(wrong)] == [("not-a-tfrecord", 0, 0)]


def test_resync_across_a_large_zeroed_region(tmp_path, cls_records):
    # 9 MiB of zeros (a crash artefact) crosses the 8 MiB scan chunk boundary
    path = str(tmp_path / "z.tfrecord")
    head = open(write_shard(tmp_path / "a", cls_records[:2]).path, "rb").read()
    tail = open(write_shard(tmp_path / "b", cls_records[2:]).path, "rb").read()
    gap = (9 << 20) + 3
    with open(path, "wb") as f:
        f.write(head + b"\x00" * gap + tail)
    findings = scan_file(path)
    assert [(f.kind, f.offset, f.end) for f in findings] == \
        [("corrupted-length", len(head), len(head) + gap)]
    rep = salvage(path, tmp_path / "out.tfrecord")
    assert _tf_records(rep.out.path) == cls_records and rep.bytes_lost == gap
