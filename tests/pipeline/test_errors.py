"""on_error: skip (counted, named) / raise (names shard + record); framing damage; repeat()."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from tfpipe.pipeline import build_pipeline, reset_skipped_counts, skipped_counts
from tfpipe import switches

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
    paths = write_shards(Path(out), "train", recs, 2, eval_links=True)
    return str(Path(out) / "*.tfrecord"), paths


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


def test_framing_damage_skip_resyncs_and_counts_the_loss(bad_dataset, tmp_path):
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
    reset_skipped_counts()
    # shard 0: 12 - 2 bad images; shard 1: 11, all but the damaged record (the
    # reader resynchronises past it) -- or only the 5 before it without native
    resync = __import__("tfpipe.native.tfrecord").native.tfrecord.available()
    assert _count(build_pipeline(cfg)) == 10 + (11 if resync else 5)
    damaged_path = str(clean / "train-00001-of-00002.tfrecord")
    # no manifest beside a bare glob: the one damaged record (at least one without native)
    assert skipped_counts() == {str(clean / "train-00000-of-00002.tfrecord"): 2, damaged_path: 1}
    damaged = base_config(str(clean / "train-00001-*.tfrecord"),
                          **{"pipeline.on_error": "raise"})
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"framing damage in shard .*00001-of-00002.tfrecord at byte "
                             rf"{offset}.*tfpipe verify"):
        _count(build_pipeline(damaged))


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
    paths = write_shards(Path(out), "train", recs, 2, eval_links=True)
    return str(Path(out) / "*.tfrecord"), paths


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
    shard = paths[1] if split == "train" else paths[1].replace("/train-", "/validation-")
    assert skipped_counts() == {shard: 2}
    err = capfd.readouterr().err
    for idx in DAMAGED:
        assert f"bad record {idx} in shard {shard}" in err


@needs_strict
def test_damaged_jpeg_scan_raises_naming_shard_and_record(damaged_jpegs):
    path, paths = damaged_jpegs
    cfg = base_config(path, **{"pipeline.on_error": "raise", "pipeline.shuffle_buffer": 0})
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"bad record 2 in shard .*00001-of-00002"):
        _count(build_pipeline(cfg))


# ----------------------------------------------------------------- framing damage (bug 8)

@pytest.fixture(scope="module")
def framed_dataset(tmp_path_factory, images) -> tuple[Path, str, int, bytes]:
    """A dataset dir (manifest.json) of 54 train records in shards of ~100 kB,
    16 bytes flipped in the middle of shard 0. Returns (dir, damaged shard, records it
    holds, its clean bytes)."""
    from tfpipe.records import (Manifest, ShardedWriter, ShardEntry, SplitInfo,
                                classification_schema, encode_example)

    out = tmp_path_factory.mktemp("framed")
    schema = classification_schema()
    m = Manifest(schema=schema, class_names=[f"c{k}" for k in range(4)], compression=None,
                 source={"kind": "test"}, settings={})
    with ShardedWriter(out, "train", 100_000, None) as w:
        for i in range(54):
            enc, fmt, img = images[i % len(images)]
            w.write(encode_example({"image/encoded": enc, "image/format": fmt,
                                    "image/height": img.shape[0], "image/width": img.shape[1],
                                    "image/class/label": i % 4}, schema))
    m.splits["train"] = SplitInfo([ShardEntry.from_info(i, out) for i in w.infos], [])
    m.save(out)
    shard = str(out / m.splits["train"].shards[0].path)
    clean = Path(shard).read_bytes()
    data = bytearray(clean)
    mid = len(data) // 2
    data[mid:mid + 16] = bytes(b ^ 0x5A for b in data[mid:mid + 16])
    Path(shard).write_bytes(bytes(data))
    return out, shard, m.splits["train"].shards[0].num_records, clean


def _read_shard(files, **kw):
    from tfpipe.pipeline._source import read_records

    return [(int(s), int(i), r.numpy()) for s, i, r in read_records(files, None, 2, **kw)]


needs_resync = pytest.mark.skipif(
    "not __import__('tfpipe.native.tfrecord').native.tfrecord.available()",
    reason="resynchronising needs the native library (python -m tfpipe.native build)")


@needs_resync
def test_framing_damage_recovers_exactly_what_salvage_recovers(framed_dataset, tmp_path, capfd):
    """Before: the pipeline read only the records before the damage, counted
    nothing and logged one line naming no shard."""
    from tfpipe.pipeline import framing_losses
    from tfpipe.records import iter_frames, salvage

    out, shard, expected, _ = framed_dataset
    report = salvage(shard, tmp_path / "s.tfrecord")
    kept = [d for _, _, d in iter_frames(tmp_path / "s.tfrecord")]
    assert 0 < len(kept) < expected and report.lost
    reset_skipped_counts()
    got = [r for s, i, r in _read_shard([shard])]
    assert got == kept  # the same records, in the same order
    lost = expected - len(kept)
    assert skipped_counts() == {shard: lost}
    info = framing_losses()[shard]
    assert (info["offset"], info["records_lost"], info["expected"]) == \
        (report.lost[0].offset, lost, expected)
    assert info["records_read"] == len(kept) and info["recovered"] > 0
    err = capfd.readouterr().err
    assert f"framing damage in shard {shard} at byte {report.lost[0].offset}" in err
    assert f"{lost} of the {expected} records the manifest lists were lost" in err
    assert "tfpipe verify" in err and "--salvage" in err
    # through build_pipeline: every record salvage keeps, of both shards
    reset_skipped_counts()
    cfg = base_config(str(out), **{"pipeline.drop_remainder": False})
    total = sum(e.num_records for e in
                __import__("tfpipe.records").records.Manifest.load(out).splits["train"].shards)
    assert _count(build_pipeline(cfg)) == total - lost
    assert skipped_counts() == {shard: lost}


def test_framing_damage_without_native_reports_the_loss(framed_dataset, monkeypatch, capfd):
    """The pure-TF fallback cannot read past the damage; it still names the shard,
    the offset and the count the manifest gives."""
    from tfpipe.records import iter_frames
    from tfpipe.errors import RecordError

    monkeypatch.setitem(switches.OVERRIDES, "TFPIPE_NATIVE", False)
    _, shard, expected, _ = framed_dataset
    before = []
    with pytest.raises(RecordError) as info:
        for _, offset, data in iter_frames(shard):
            before.append(data)
    reset_skipped_counts()
    assert [r for s, i, r in _read_shard([shard])] == before
    assert skipped_counts() == {shard: expected - len(before)}
    err = capfd.readouterr().err
    assert f"framing damage in shard {shard} at byte {info.value.offset}" in err


def test_framing_damage_raise_names_the_shard(framed_dataset):
    out, shard, expected, _ = framed_dataset
    cfg = base_config(str(out), **{"pipeline.on_error": "raise"})
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"framing damage in shard {shard} at byte \d+.*manifest.*"
                             r"tfpipe verify .*--salvage"):
        _count(build_pipeline(cfg, split="train"))


def test_clean_shards_read_as_before(framed_dataset, tmp_path):
    """No damage: the same (shard, index, record) stream as plain TFRecordDataset."""
    _, shard, _, clean = framed_dataset
    path = tmp_path / "train-00000-of-00001.tfrecord"
    path.write_bytes(clean)
    reset_skipped_counts()
    ref = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    got = _read_shard([str(path)])
    assert [r for _, _, r in got] == ref and [i for _, i, _ in got] == list(range(len(ref)))
    assert skipped_counts() == {}


def test_inspect_and_preview_on_damaged_data_never_trace_back(framed_dataset, tmp_path):
    from click.testing import CliRunner

    from tfpipe.cli.main import cli

    out, shard, _, _ = framed_dataset
    r = CliRunner().invoke(cli, ["inspect", str(out)])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert "Traceback" not in r.output and "warning" in r.output and shard in r.output
    r = CliRunner().invoke(cli, ["inspect", str(out), "--json"])
    assert r.exit_code == 0 and "Traceback" not in r.output
    cfg = tmp_path / "cfg.yaml"
    import yaml

    cfg.write_text(yaml.safe_dump(base_config(str(out), **{"pipeline.on_error": "raise"})))
    r = CliRunner().invoke(cli, ["preview", str(cfg), "--out", str(tmp_path / "p.png"),
                                 "--set", "pipeline.on_error=raise", "-n", "60"])
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
    assert "Traceback" not in r.output and f"framing damage in shard {shard}" in r.output
    assert len(r.output.strip().splitlines()) <= 3
    r = CliRunner().invoke(cli, ["preview", str(cfg), "--out", str(tmp_path / "p.png"),
                                 "--set", "pipeline.on_error=skip", "-n", "4"])
    assert r.exit_code == 0, r.output


@needs_resync
def test_framing_counts_survive_abandoned_and_repeated_iterations(framed_dataset, tmp_path):
    """The per-shard count is reset by each new read of the shard: an iteration
    stopped early (take) does not leak into the next, and every epoch counts."""
    from tfpipe.pipeline._source import read_records
    from tfpipe.records import iter_frames, salvage

    _, shard, expected, _ = framed_dataset
    salvage(shard, tmp_path / "s.tfrecord")
    kept = [d for _, _, d in iter_frames(tmp_path / "s.tfrecord")]
    ds = read_records([shard], None, 1, True, {shard: expected})
    reset_skipped_counts()
    assert len(list(ds.take(5))) == 5
    assert [r.numpy() for _, _, r in ds] == kept
    assert [r.numpy() for _, _, r in ds] == kept
    assert skipped_counts() == {shard: 2 * (expected - len(kept))}


@needs_resync
def test_block_boundary_and_tail_garbage(tmp_path):
    """64 records (one full block, then a block holding only the end marker),
    then 20 stray bytes: all 64 delivered, the tail reported as damage."""
    from tfpipe.pipeline import framing_losses
    from tfpipe.pipeline._source import read_records
    from tfpipe.records import write_shard

    path = str(tmp_path / "x.tfrecord")
    recs = [b"r%03d" % i * (i + 1) for i in range(64)]
    info = write_shard(path, recs)
    with open(path, "ab") as f:
        f.write(b"\x07" * 20)
    reset_skipped_counts()
    got = list(read_records([path], None, 1, True, {path: 64}))
    assert [r.numpy() for _, _, r in got] == recs
    assert [int(i) for _, i, _ in got] == list(range(64))
    assert framing_losses()[path]["offset"] == info.num_bytes
    assert framing_losses()[path]["records_lost"] == 0
    clean = str(tmp_path / "y.tfrecord")
    write_shard(clean, recs)
    reset_skipped_counts()
    assert [r.numpy() for _, _, r in read_records([clean], None, 1, True)] == recs
    assert framing_losses() == {} and skipped_counts() == {}
