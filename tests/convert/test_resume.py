"""--resume after an interruption gives the bytes of an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tfpipe.convert._run as run
from tfpipe.convert import convert
from tfpipe.convert._plan import RECORD_OVERHEAD_BYTES, Item, plan_shards
from tfpipe.errors import ConfigError

from .conftest import tree_bytes

KW = dict(split="train=0.8,val=0.2", shard_size="16KB", seed=2)


def test_resume_after_crash_keeps_finished_shards(folder_src: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    convert(folder_src, tmp_path / "ref", workers=1, **KW)
    reference = tree_bytes(tmp_path / "ref")

    real = run._write_one
    calls: list[str] = []

    def crash_on_third(shard, path, compression, on_error):
        calls.append(os.path.basename(path))
        if len(calls) == 3:
            # What a kill mid-shard leaves behind: a temp file, no final name.
            Path(path).with_name(f".{Path(path).name}.tmp-999-1").write_bytes(b"half")
            raise KeyboardInterrupt
        return real(shard, path, compression, on_error)

    monkeypatch.setattr(run, "_write_one", crash_on_third)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        convert(folder_src, out, workers=1, **KW)
    assert not (out / "manifest.json").exists()
    finished = calls[:2]
    mtimes = {n: (out / n).stat().st_mtime_ns for n in finished}

    calls.clear()
    monkeypatch.setattr(run, "_write_one", real)
    rewritten: list[str] = []
    monkeypatch.setattr(run, "_write_one",
                        lambda s, p, c, e: rewritten.append(os.path.basename(p)) or real(s, p, c, e))
    convert(folder_src, out, workers=1, resume=True, **KW)
    assert tree_bytes(out) == reference  # temp file and state dir gone, bytes identical
    assert not set(finished) & set(rewritten)
    assert {n: (out / n).stat().st_mtime_ns for n in finished} == mtimes


def test_resume_rewrites_damaged_shard_of_finished_run(folder_src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    manifest = convert(folder_src, out, workers=1, **KW)
    reference = tree_bytes(out)
    victim = out / manifest.splits["train"].shards[1].path
    victim.write_bytes(victim.read_bytes()[:100])
    (out / manifest.splits["val"].shards[0].path).unlink()
    convert(folder_src, out, workers=2, resume=True, **KW)
    assert tree_bytes(out) == reference


def test_resume_refuses_a_different_plan(folder_src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    convert(folder_src, out, workers=1, **KW)
    with pytest.raises(ConfigError, match="fresh output directory"):
        convert(folder_src, out, workers=1, resume=True, **{**KW, "seed": 3})


def _fifo_name_in_later_shard(src: Path, shard_size: int, image_size: int) -> str:
    """A new file name whose input lands in train shard >= 1, in the same plan whether
    that file is a FIFO (0 bytes) or the image that replaces it later."""
    sizes = {p.relative_to(src).as_posix(): p.stat().st_size for p in src.rglob("*.*")}
    cls = sorted(p.name for p in src.iterdir())[0]

    def where(name: str, size: int) -> tuple[int, int]:
        items = [Item(n, s, [n]) for n, s in {**sizes, name: size}.items()]
        plan = plan_shards(items, {"train": 1.0}, 0, shard_size)
        return next((s.index, s.count) for s in plan.shards
                    if any(i.key == name for i in s.items))

    for k in range(200):
        name = f"{cls}/zz{k}.jpg"
        index, count = where(name, 0)
        if 1 <= index < count - 1 and where(name, image_size) == (index, count):
            return name
    raise AssertionError("no candidate name")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
def test_resume_after_sigkill_of_the_cli(folder_copy: Path, tmp_path: Path) -> None:
    """Kill `tfpipe convert` for real while it blocks on an input, then --resume."""
    total = sum(p.stat().st_size + RECORD_OVERHEAD_BYTES for p in folder_copy.rglob("*.*"))
    shard_size = total // 4 + 1
    image = next(folder_copy.rglob("*.jpg")).read_bytes()
    name = _fifo_name_in_later_shard(folder_copy, shard_size, len(image))
    os.mkfifo(folder_copy / name)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "tfpipe.cli.main", "convert", str(folder_copy), str(out),
           "--workers", "1", "--shard-size", str(shard_size)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not list(out.glob("train-00000-of-*.tfrecord")):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no shard landed"
            time.sleep(0.05)
        time.sleep(0.3)  # let it reach the FIFO and block there
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not (out / "manifest.json").exists()
    landed = sorted(p.name for p in out.glob("train-*.tfrecord"))
    assert landed and list(out.glob(".train-*.tmp-*"))  # killed inside a shard
    (folder_copy / name).unlink()
    (folder_copy / name).write_bytes(image)
    ref = tmp_path / "ref"
    m = convert(folder_copy, ref, workers=1, shard_size=shard_size)
    assert len(landed) < len(m.splits["train"].shards)
    result = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert tree_bytes(out) == tree_bytes(ref)
