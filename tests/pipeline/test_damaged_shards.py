"""A truncated or missing shard of a converted dataset (issue #22, item 8).

Under `on_error: skip` the pipeline reads every readable record of every shard
(a truncated shard up to its last whole record; a missing shard reported in one
line and counted) and reports what is lost; under `raise` one clear error names
the shard. A manifest whose count is wrong over an intact shard is diagnosed as
such. Oracle: `tfpipe.records.iter_frames` (the Python framing reader) on the
damaged files, and the manifest convert wrote.
"""

from __future__ import annotations

import contextlib

import json
import os
from pathlib import Path

import pytest
import tensorflow as tf

from tfpipe.errors import ManifestError, RecordError
from tfpipe.pipeline import (build_pipeline, build_stages, framing_losses,
                             reset_skipped_counts, skipped_counts)
from tfpipe.records import Manifest, decode_example, iter_frames

from .conftest import base_config


def _convert(root: Path) -> Path:
    """A photo folder converted the way users do it: 4 train + 2 val shards."""
    from tfpipe import sample_data
    from tfpipe.convert import convert

    sample_data.make_image_folder(root / "raw", num_classes=4, per_class=10,
                                  size_range=(40, 64), seed=0)
    convert(root / "raw", root / "data", split="train=0.8,val=0.2", shard_size=20000,
            workers=1)
    return root / "data"


@pytest.fixture(scope="module")
def _converted_once(tmp_path_factory) -> Path:
    return _convert(tmp_path_factory.mktemp("converted"))


@pytest.fixture()
def converted(_converted_once, tmp_path) -> Path:
    """A fresh copy per test (tests damage it)."""
    import shutil

    shutil.copytree(_converted_once, tmp_path / "data")
    return tmp_path / "data"


def _readable(path: Path) -> list[bytes]:
    """Every record the Python framing reader returns before the first damage."""
    out = []
    if not path.exists():
        return out
    try:
        for _, _, data in iter_frames(path):
            out.append(data)
    except RecordError:
        pass
    return out


def _truncate_mid_record(path: Path) -> int:
    """Cut `path` in the middle of its last record; return the records kept whole."""
    offsets = [off for _, off, _ in iter_frames(path)]
    os.truncate(path, offsets[-1] + 20)
    return len(offsets) - 1


def _cfg(data: Path, **over) -> dict:
    return base_config(str(data), **{"pipeline.drop_remainder": False,
                                     "pipeline.shuffle_buffer": 1, **over})


@pytest.mark.parametrize("native", ["1", "0"])
def test_skip_reads_every_readable_record_of_truncated_and_missing_shards(
        converted, capfd, request, native):
    """Before: `ManifestError: ... 17124 bytes on disk ... the shard was changed or
    truncated` at build time: not one of the readable records could be read. The
    pure-TF fallback (no resync) reads the same records: the damage is at the end."""
    from tfpipe import switches

    # (switches are read once per process: an override, not setenv)
    stack = contextlib.ExitStack()
    stack.enter_context(switches.override(TFPIPE_NATIVE=native))
    request.addfinalizer(stack.close)
    m = Manifest.load(converted)
    shards = [converted / e.path for e in m.splits["train"].shards]
    listed = {str(p): e.num_records for p, e in zip(shards, m.splits["train"].shards)}
    kept = _truncate_mid_record(shards[1])
    os.remove(shards[2])
    oracle = sorted(r for p in shards for r in _readable(p))
    assert len(oracle) == m.splits["train"].num_records - listed[str(shards[2])] - 1

    reset_skipped_counts()
    read = build_stages(_cfg(converted))[0][1]  # the pipeline's own record stream
    got = [r.numpy() for _, _, r in read]
    assert sorted(got) == oracle
    lost = {str(shards[1]): listed[str(shards[1])] - kept, str(shards[2]): listed[str(shards[2])]}
    assert skipped_counts() == lost
    losses = framing_losses()
    assert losses[str(shards[1])]["records_read"] == kept
    assert losses[str(shards[2])]["records_lost"] == listed[str(shards[2])]
    err = capfd.readouterr().err
    missing_lines = [line for line in err.splitlines() if str(shards[2]) in line]
    assert len(missing_lines) == 1, err
    assert f"shard {shards[2]} is missing" in missing_lines[0]
    assert f"{listed[str(shards[2])]} records the manifest lists" in missing_lines[0]
    assert f"framing damage in shard {shards[1]}" in err


def test_skip_eval_split_delivers_exactly_the_readable_records(converted):
    """The val split through `build_pipeline`: the labels of every readable record,
    in order, and nothing else (a missing shard, a truncated one)."""
    m = Manifest.load(converted)
    val = [converted / e.path for e in m.splits["val"].shards]
    os.remove(val[0])
    _truncate_mid_record(val[1])
    want = [int(decode_example(r)["image/class/label"][0]) for r in _readable(val[1])]
    reset_skipped_counts()
    got = [int(v) for b in build_pipeline(_cfg(converted), split="val")
           for v in b["label"].numpy()]
    assert got == want and len(want) == m.splits["val"].shards[1].num_records - 1


def test_raise_names_the_missing_or_truncated_shard(converted):
    m = Manifest.load(converted)
    shards = [converted / e.path for e in m.splits["train"].shards]
    _truncate_mid_record(shards[1])
    cfg = _cfg(converted, **{"pipeline.on_error": "raise"})
    with pytest.raises(ManifestError, match=rf"{shards[1]}: .*bytes on disk.*the manifest "
                                            r"says .*on_error: skip.*--salvage"):
        build_pipeline(cfg)
    os.remove(shards[2])
    with pytest.raises(ManifestError) as info:  # one line per shard
        build_pipeline(cfg)
    lines = str(info.value).splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{shards[1]}: ")
    assert lines[1].startswith(f"{shards[2]}: shard listed in the manifest is missing")
    assert all("on_error: skip" in line and "--salvage" in line for line in lines)


def test_a_wrong_manifest_count_over_an_intact_shard_is_diagnosed(converted, capfd):
    """The manifest says 70 records, the shard holds its 8 intact ones: the
    pipeline says the manifest is wrong, not the data (before: nothing said)."""
    path = converted / "manifest.json"
    obj = json.loads(path.read_text())
    entry = obj["splits"]["train"]["shards"][0]
    true, entry["num_records"] = entry["num_records"], 70
    path.write_text(json.dumps(obj))
    shard = converted / entry["path"]
    reset_skipped_counts()
    read = build_stages(_cfg(converted))[0][1]
    assert sum(1 for _ in read) == Manifest.load(converted).splits["train"].num_records - 70 + true
    err = capfd.readouterr().err
    line = next(line for line in err.splitlines() if str(shard) in line)
    assert (f"the manifest lists 70 records, the shard holds {true} intact records and "
            "ends cleanly: the manifest is wrong, not the data") in line
    assert "--salvage" in line
    assert skipped_counts() == {str(shard): 70 - true}
    with pytest.raises(tf.errors.InvalidArgumentError, match="the manifest is wrong"):
        for _ in build_stages(_cfg(converted, **{"pipeline.on_error": "raise"}))[0][1]:
            pass


def test_skip_on_the_damage_reads_what_the_salvaged_dataset_holds(converted, tmp_path):
    """The two ways on agree: `on_error: skip` over the damaged dataset and
    `on_error: raise` over `salvage_dataset`'s complete copy read the same records."""
    from tfpipe.records import salvage_dataset

    m = Manifest.load(converted)
    shards = [converted / e.path for e in m.splits["train"].shards]
    _truncate_mid_record(shards[0])
    os.remove(shards[3])
    salvage_dataset(converted, tmp_path / "salvaged")
    damaged = sorted(r.numpy() for _, _, r in build_stages(_cfg(converted))[0][1])
    salvaged = sorted(r.numpy() for _, _, r in build_stages(
        _cfg(tmp_path / "salvaged", **{"pipeline.on_error": "raise"}))[0][1])
    assert damaged == salvaged and len(damaged) == sum(len(_readable(p)) for p in shards)
