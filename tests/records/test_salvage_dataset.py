"""`salvage_dataset`: every damaged shard of a dataset, with a manifest of its own."""

from __future__ import annotations

from tfpipe.records import (Manifest, iter_frames, salvage_dataset, summarize, verify)


def test_salvage_dataset_writes_a_manifest_verify_accepts(tmp_path, cls_records, make_dataset):
    ds = tmp_path / "ds"
    make_dataset(ds, cls_records, shard_size=1 << 20)
    shard = ds / "train-00000-of-00001.tfrecord"
    first = len(cls_records[0]) + 16
    data = bytearray(shard.read_bytes())
    data[first + 12 + 30] ^= 1  # record 1's data (train holds records 0, 2, 4, ...)
    shard.write_bytes(bytes(data))

    out = tmp_path / "fixed"
    rep = salvage_dataset(ds, out)
    assert not rep.intact and len(rep.shards) == 1
    (s,) = rep.shards
    assert rep.records_lost(s) == (1, True)
    assert rep.to_dict()["salvaged"][0]["records_lost_per_manifest"] == 1
    # the kept records are the originals, minus the damaged one, in order
    kept = [d for _, _, d in iter_frames(str(out / shard.name))]
    assert kept == [cls_records[i] for i in range(0, 12, 2) if i != 2]
    m = Manifest.load(out)
    assert list(m.splits) == ["train"] and m.splits["train"].num_records == 5
    assert m.class_names == ["c0", "c1", "c2"] and m.source["kind"] == "salvage"
    assert [k.input for k in m.splits["train"].skipped] == [f"{shard.name}@{first}"]
    v = verify(out)
    assert v.ok and v.files_checked == 1 and v.records_checked == 5
    assert summarize(out)["splits"]["train"]["records"] == 5


def test_salvage_of_an_intact_dataset_writes_nothing(tmp_path, cls_records, make_dataset):
    make_dataset(tmp_path / "ds", cls_records)
    rep = salvage_dataset(tmp_path / "ds", tmp_path / "out")
    assert rep.intact and rep.verify.ok and not (tmp_path / "out").exists()
