"""`on_error="raise"` names every bad input at once, and a failed run never
blocks the next one: a plain rerun starts over, --resume continues."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tfpipe.convert._run as run
from tfpipe.convert import conversion_summary, convert
from tfpipe.errors import InputError

from .conftest import tree_bytes

KW = dict(shard_size="8KB", seed=0, workers=1)


def _add_bad_files(src: Path) -> list[str]:
    classes = sorted(p for p in src.iterdir() if p.is_dir())
    good = next(classes[0].glob("*.jpg")).read_bytes()
    (classes[0] / "truncated.jpg").write_bytes(good[: len(good) // 2])
    (classes[-1] / "text.jpg").write_text("this is not an image")
    return [f"{classes[0].name}/truncated.jpg", f"{classes[-1].name}/text.jpg"]


def test_raise_lists_every_bad_input_and_reruns_work(folder_copy: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    bad = _add_bad_files(folder_copy)
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        convert(folder_copy, out, on_error="raise", **KW)
    msg = str(info.value)
    assert msg.startswith("2 bad input(s) (on_error=raise)"), msg
    for label in bad:  # both, each with its reason, whichever shard they were in
        assert any(line.strip().startswith(f"{label}: ") for line in msg.splitlines()), msg
    assert not (out / "manifest.json").exists()

    # a plain rerun (same inputs, skip) starts over instead of "OUT is not empty"
    skipped = convert(folder_copy, out, **KW)
    assert sorted(s.input for s in skipped.splits["train"].skipped) == sorted(bad)
    assert not (out / run.STATE_DIR).exists()

    # fail again, then --resume listing them instead (on_error=skip): the shards
    # without a bad input are kept, the others rewritten; bytes of a fresh run
    out2 = tmp_path / "out2"
    with pytest.raises(InputError):
        convert(folder_copy, out2, on_error="raise", **KW)
    kept = {p.name: p.stat().st_mtime_ns for p in out2.glob("*.tfrecord")}
    assert kept, "shards without a bad input stay for --resume"
    written: list[str] = []
    real = run._write_one
    monkeypatch.setattr(run, "_write_one",
                        lambda s, p, c, e: written.append(os.path.basename(p)) or real(s, p, c, e))
    convert(folder_copy, out2, resume=True, **KW)
    monkeypatch.setattr(run, "_write_one", real)
    assert tree_bytes(out2) == tree_bytes(out)  # `out` is the plain skip run above
    assert written and not set(kept) & set(written)
    assert all((out2 / n).stat().st_mtime_ns == t for n, t in kept.items())

    # or fix the inputs (here: remove them) and --resume under raise: the plan
    # changed, so only shards with unchanged inputs could be kept; a fresh run's bytes
    out3 = tmp_path / "out3"
    with pytest.raises(InputError):
        convert(folder_copy, out3, on_error="raise", **KW)
    for label in bad:
        os.remove(folder_copy / label)
    m = convert(folder_copy, out3, on_error="raise", resume=True, **KW)
    fresh = convert(folder_copy, tmp_path / "fresh", on_error="raise", **KW)
    assert tree_bytes(out3) == tree_bytes(tmp_path / "fresh")
    assert conversion_summary(m) == conversion_summary(fresh)


def test_conversion_summary_matches_the_manifest(folder_src: Path, tmp_path: Path) -> None:
    m = convert(folder_src, tmp_path / "o", split="train=0.75,val=0.25", **KW)
    s = conversion_summary(m, tmp_path / "o")
    assert s["out"] == str(tmp_path / "o")
    assert s["class_names"] == sorted(p.name for p in folder_src.iterdir() if p.is_dir())
    for name, row in s["splits"].items():
        files = [tmp_path / "o" / e.path for e in m.splits[name].shards]
        assert row["shards"] == len(files)
        assert row["bytes"] == sum(f.stat().st_size for f in files)
        # an independent count: tf.data reading the shard files
        import tensorflow as tf

        assert row["records"] == sum(1 for _ in tf.data.TFRecordDataset([str(f) for f in files]))
    assert sum(r["records"] for r in s["splits"].values()) == 32
