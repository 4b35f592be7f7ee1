"""`tfpipe convert --runner direct`: Apache Beam's DirectRunner gives the local converter's bytes.

The multi-process runs go through the CLI in a subprocess of their own session, so a
hung Beam worker is killed with its process group after a bounded time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tfpipe.convert import RUNNERS, convert
from tfpipe.convert.beam import pipeline_flags
from tfpipe.errors import ConfigError, InputError

from .conftest import tree_bytes

# Without Apache Beam only the install-hint and option tests can run.
needs_beam = pytest.mark.skipif(importlib.util.find_spec("apache_beam") is None,
                                reason="apache-beam is not installed (tfpipe[beam])")

MULTI = "--direct_running_mode=multi_processing --direct_num_workers=2"
TIMEOUT_S = 180


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`tfpipe convert ...` in its own process group, killed whole on timeout."""
    cmd = [sys.executable, "-m", "tfpipe.cli.main", "convert", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"{' '.join(cmd)} did not finish in {TIMEOUT_S} s") from None
    finally:
        try:  # Beam's SDK workers share the group: leave none behind
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _break(path: Path) -> bytes:
    """Truncate an image so it no longer decodes; return its original bytes."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    return data


def _shard_files(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob("*.tfrecord*"))


@needs_beam
@pytest.mark.slow
def test_cli_direct_multiprocess_matches_local_folder(folder_copy: Path, tmp_path: Path) -> None:
    broken = sorted(folder_copy.rglob("*.jpg"))[5]
    _break(broken)
    settings = ["--split", "train=0.75,val=0.25", "--shard-size", "20KB", "--seed", "7"]
    local = tmp_path / "local"
    r = _cli(str(folder_copy), str(local), *settings, "--runner", "local", "--workers", "2")
    assert r.returncode == 0, r.stderr
    beam = tmp_path / "beam"
    r = _cli(str(folder_copy), str(beam), *settings, "--runner", "direct",
             "--pipeline-options", MULTI, "--json")
    assert r.returncode == 0, r.stderr
    # Two SDK worker processes really ran (each logs this line when it starts).
    assert r.stderr.count("Python sdk harness starting") == 2, r.stderr[-3000:]
    summary = json.loads(r.stdout)

    assert tree_bytes(beam) == tree_bytes(local)  # shards and manifest, byte for byte
    manifest = json.loads((beam / "manifest.json").read_text())
    assert [len(manifest["splits"][s]["shards"]) for s in ("train", "val")] == \
        [summary["splits"][s]["shards"] for s in ("train", "val")]
    assert min(summary["splits"][s]["shards"] for s in ("train", "val")) >= 2
    skipped = [s for info in manifest["splits"].values() for s in info["skipped"]]
    rel = broken.relative_to(folder_copy).as_posix()
    assert [s["input"] for s in skipped] == [rel]
    assert "undecodable" in skipped[0]["reason"] or "truncated" in skipped[0]["reason"]
    assert sum(info["records"] for info in summary["splits"].values()) == 31
    assert not (beam / ".tfpipe-convert").exists()


@needs_beam
@pytest.mark.slow
def test_direct_multiprocess_matches_local_parquet(table_src: tuple[Path, Path],
                                                   tmp_path: Path) -> None:
    src_dir = tmp_path / "table"
    shutil.copytree(table_src[1].parent, src_dir)
    table = src_dir / table_src[1].name
    _break(src_dir / "images" / "00004.jpg")
    settings = ["--image-column", "image", "--label-column", "label", "--split",
                "train=0.6,val=0.4", "--shard-size", "30KB"]
    local, beam = tmp_path / "local", tmp_path / "beam"
    convert(table, local, image_column="image", label_column="label",
            split="train=0.6,val=0.4", shard_size="30KB", workers=1)
    r = _cli(str(table), str(beam), *settings, "--runner", "direct", "--pipeline-options", MULTI)
    assert r.returncode == 0, r.stderr
    assert tree_bytes(beam) == tree_bytes(local)
    manifest = json.loads((beam / "manifest.json").read_text())
    skipped = [s["input"] for info in manifest["splits"].values() for s in info["skipped"]]
    assert skipped == ["table.parquet row 4 (images/00004.jpg)"]
    assert sum(len(info["shards"]) for info in manifest["splits"].values()) >= 3


@needs_beam
@pytest.mark.slow
def test_direct_multiprocess_matches_local_coco_gzip(coco_src: Path, tmp_path: Path) -> None:
    local, beam = tmp_path / "local", tmp_path / "beam"
    convert(coco_src, local, shard_size="40KB", compression="gzip", workers=1)
    r = _cli(str(coco_src), str(beam), "--shard-size", "40KB", "--compression", "gzip",
             "--runner", "direct", "--pipeline-options", MULTI)
    assert r.returncode == 0, r.stderr
    assert tree_bytes(beam) == tree_bytes(local)
    manifest = json.loads((beam / "manifest.json").read_text())
    assert len(manifest["splits"]["train"]["shards"]) >= 2
    assert manifest["settings"]["stats"]["train"]["boxes"] > 0  # per-shard counters merged


@needs_beam
@pytest.mark.slow
def test_failed_run_commits_nothing_and_resume_gives_local_bytes(
        folder_copy: Path, tmp_path: Path) -> None:
    settings = dict(split="train=0.75,val=0.25", shard_size="20KB")
    ref = tmp_path / "ref"
    convert(folder_copy, ref, workers=1, **settings)
    broken = sorted(folder_copy.rglob("*.jpg"))[9]
    original = _break(broken)
    out = tmp_path / "out"
    rel = broken.relative_to(folder_copy).as_posix()
    with pytest.raises(InputError) as local_err:
        convert(folder_copy, tmp_path / "local", on_error="raise", workers=1, **settings)
    with pytest.raises(InputError, match=f"\n  {rel}: ") as beam_err:
        convert(folder_copy, out, on_error="raise", runner="direct", **settings)
    # The same one error as locally, listing every bad input; no manifest; the
    # shards that lack an input are not kept, the others are, as locally.
    assert str(beam_err.value) == str(local_err.value)
    assert not (out / "manifest.json").exists()
    assert _shard_files(out) == _shard_files(tmp_path / "local")
    assert 0 < len(_shard_files(out)) < len(_shard_files(ref))

    broken.write_bytes(original)
    convert(folder_copy, out, resume=True, runner="direct", **settings)
    assert tree_bytes(out) == tree_bytes(ref)


@needs_beam
def test_options_are_checked_before_any_work(folder_src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="runner must be one of local, direct"):
        convert(folder_src, out, runner="ray")
    with pytest.raises(ConfigError, match="not runner 'local'"):
        convert(folder_src, out, pipeline_options="--direct_num_workers=2")
    with pytest.raises(ConfigError, match="not as '--runner=FlinkRunner'"):
        convert(folder_src, out, runner="direct", pipeline_options="--runner=FlinkRunner")
    with pytest.raises(ConfigError, match="workers applies to runner 'local'"):
        convert(folder_src, out, runner="direct", workers=2)
    with pytest.raises(InputError, match="gs://bucket/out: runner 'local' reads and writes "
                                         "local"):
        convert(folder_src, "gs://bucket/out")
    with pytest.raises(ConfigError, match="nosuch://b/out: TensorFlow has no filesystem for "
                                          "nosuch://"):
        convert(folder_src, "nosuch://b/out", runner="direct")
    with pytest.raises(InputError, match="a URL source is implemented for image folders and "
                                         "csv / parquet tables, not format 'coco'"):
        convert("ram://t/set.json", out, runner="direct", format="coco")
    with pytest.raises(ConfigError, match="cannot split"):
        convert(folder_src, out, runner="direct", pipeline_options="--temp_location='gs://x")
    assert not out.exists()
    # A quoted string and a list give Beam the same flags, after tfpipe's --runner.
    assert pipeline_flags("flink", "--flink_master=h:8081 --parallelism=4") == \
        pipeline_flags("flink", ["--flink_master=h:8081", "--parallelism=4"]) == \
        ["--runner=FlinkRunner", "--flink_master=h:8081", "--parallelism=4"]


def test_missing_beam_names_the_extra(folder_src: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "apache_beam", None)  # import apache_beam -> ImportError
    with pytest.raises(ConfigError, match=r"pip install 'tfpipe\[beam\]'"):
        convert(folder_src, tmp_path / "out", runner="direct")
    assert not (tmp_path / "out").exists()
    # The base install converts locally without Beam: nothing imports it eagerly.
    code = ("import sys; sys.modules['apache_beam'] = None; "
            "from tfpipe.convert import convert; import tfpipe.cli.convert; "
            f"convert({str(folder_src)!r}, {str(tmp_path / 'local')!r}, workers=1)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "local" / "manifest.json").exists()


def test_cli_runner_choices_are_the_package_runners() -> None:
    from tfpipe.cli.convert import command

    choices = next(p.type.choices for p in command.params if p.name == "runner")
    assert tuple(choices) == RUNNERS


_REAL_COMMIT: dict[str, object] = {}


def _dying_finalize(*args: object, **kwargs: object) -> None:
    raise RuntimeError("worker lost after renaming the shards")


def _commit_dies_then_retries(job: object, written: list) -> None:
    """A commit attempt that dies after its renames, then the runner's retry."""
    import tfpipe.convert.beam as beam_module

    real_finalize = beam_module.finalize
    beam_module.finalize = _dying_finalize
    try:
        with pytest.raises(RuntimeError, match="worker lost"):
            _REAL_COMMIT["fn"](job, written)
    finally:
        beam_module.finalize = real_finalize
    assert not list(Path(job.out).glob(".tfpipe-convert/beam/tmp/*.tfrecord.*"))  # all renamed
    _REAL_COMMIT["fn"](job, written)


@needs_beam
@pytest.mark.slow
def test_commit_step_retried_after_its_renames_gives_local_bytes(
        folder_src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tfpipe.convert.beam as beam_module

    settings = dict(split="train=0.75,val=0.25", shard_size="20KB")
    ref = tmp_path / "ref"
    convert(folder_src, ref, workers=1, **settings)
    _REAL_COMMIT["fn"] = beam_module._commit
    monkeypatch.setattr(beam_module, "_commit", _commit_dies_then_retries)
    out = tmp_path / "out"
    convert(folder_src, out, runner="direct", **settings)  # in_memory: one process
    assert tree_bytes(out) == tree_bytes(ref)


def test_shard_input_lists_round_trip_exactly_and_refuse_edits(tmp_path: Path) -> None:
    """What workers read back is the planned shard: same payload types, same digest."""
    import math

    from tfpipe.convert._plan import Item, ShardPlan
    from tfpipe.convert.beam import BEAM_DIR, _read_inputs, _write_inputs

    row = {"__bytes__": b"\x00\xff text", "w": -0.0, "x": float("nan"), "big": 2**62,
           "tags": [1, 2], "note": None, "img": b"images/1.jpg"}
    items = (Item("row:0", 10, [0, row], "t.parquet row 0"),
             Item("id:7", 5, ["7", "a.jpg", [None, 4], [["1", 0.1, 2.0, "nan", 3.0, 0]]]),
             Item("cat/1.jpg", 3, ["cat/1.jpg", 0]))
    shard = ShardPlan("train", 1, 3, items)
    (tmp_path / ".tfpipe-convert" / BEAM_DIR / "inputs").mkdir(parents=True)
    name = "train-00001-of-00003.tfrecord"
    _write_inputs(tmp_path, shard, name)
    task = {"name": name, "split": "train", "index": 1, "count": 3, "inputs": shard.digest()}
    back = _read_inputs(tmp_path, task)
    assert back.digest() == shard.digest()
    got = back.items[0].payload[1]
    assert got["__bytes__"] == row["__bytes__"] and got["img"] == row["img"]
    assert math.copysign(1.0, got["w"]) == -1.0 and math.isnan(got["x"])
    assert [it.name for it in back.items] == [it.name for it in items]
    assert back.items[1:] == items[1:]

    path = tmp_path / ".tfpipe-convert" / BEAM_DIR / "inputs" / f"{name}.json"
    path.write_text(path.read_text().replace("cat/1.jpg", "cat/2.jpg"))
    with pytest.raises(InputError, match="digest mismatch"):
        _read_inputs(tmp_path, task)


def _upload(src: Path, url: str) -> None:
    import tensorflow as tf

    for p in sorted(src.rglob("*")):
        if p.is_file():
            dst = f"{url}/{p.relative_to(src).as_posix()}"
            tf.io.gfile.makedirs(dst.rsplit("/", 1)[0])
            with tf.io.gfile.GFile(dst, "wb") as f:
                f.write(p.read_bytes())


def _url_tree(url: str) -> dict[str, bytes]:
    import tensorflow as tf

    out = {}
    for dirpath, _, files in tf.io.gfile.walk(url):
        for name in files:
            path = f"{dirpath.rstrip('/')}/{name}"
            with tf.io.gfile.GFile(path, "rb") as f:
                out[path[len(url) + 1:]] = f.read()
    return out


@needs_beam
def test_url_folder_to_url_out_gives_the_local_bytes(folder_copy: Path, tmp_path: Path) -> None:
    """SRC and OUT on TF's ram:// filesystem (a real tf.io.gfile filesystem, one
    process: the in_memory DirectRunner): the listing, reads, uploads and renames go
    through tf.io.gfile, and every file equals a local conversion, a skipped input
    and an ignored file included. A stale unfinished run in OUT is redone; a
    finished OUT is refused."""
    import uuid

    import tensorflow as tf

    _break(sorted(folder_copy.rglob("*.jpg"))[5])
    (folder_copy / "README.txt").write_text("not an input")
    base = f"ram://tfpipe-{uuid.uuid4().hex}"
    _upload(folder_copy, f"{base}/src")
    settings = {"split": "train=0.75,val=0.25", "shard_size": "20KB", "seed": 7}
    local = convert(folder_copy, tmp_path / "local", workers=1, **settings)
    want = tree_bytes(tmp_path / "local")
    assert len([n for n in want if n.endswith(".tfrecord")]) > 2
    # the truncated JPEG and README.txt
    assert sum(len(info.skipped) for info in local.splits.values()) == 2
    out = f"{base}/out"
    # what a failed earlier run leaves: its state directory and a half shard
    stale = {".tfpipe-convert/beam/tmp/x": b"old",
             min(n for n in want if n.endswith(".tfrecord")): b"partial"}
    for name, data in stale.items():
        tf.io.gfile.makedirs(f"{out}/{name}".rsplit("/", 1)[0])
        with tf.io.gfile.GFile(f"{out}/{name}", "wb") as f:
            f.write(data)
    manifest = convert(f"{base}/src", out, runner="direct", **settings)
    assert _url_tree(out) == want
    assert manifest.dumps() == local.dumps()
    with pytest.raises(ConfigError, match=f"{out}: is not empty"):
        convert(f"{base}/src", out, runner="direct", **settings)
    tf.io.gfile.rmtree(base)


@needs_beam
def test_url_out_failed_run_then_rerun_gives_the_local_bytes(folder_copy: Path,
                                                             tmp_path: Path) -> None:
    """on_error=raise into a ram:// OUT: the local one-line error, no manifest, the
    shards that lack an input deleted as locally; fixed and rerun (no resume for
    a URL OUT: the unfinished run is redone), the local bytes."""
    import uuid

    import tensorflow as tf

    settings = {"split": "train=0.75,val=0.25", "shard_size": "20KB"}
    ref = tmp_path / "ref"
    convert(folder_copy, ref, workers=1, **settings)
    broken = sorted(folder_copy.rglob("*.jpg"))[9]
    original = _break(broken)
    base = f"ram://tfpipe-{uuid.uuid4().hex}"
    _upload(folder_copy, f"{base}/src")
    with pytest.raises(InputError) as local_err:
        convert(folder_copy, tmp_path / "local", on_error="raise", workers=1, **settings)
    out = f"{base}/out"
    with pytest.raises(InputError) as url_err:
        convert(f"{base}/src", out, on_error="raise", runner="direct", **settings)
    # the same message, less the local hint that --resume keeps finished shards
    assert "--resume keeps the" in str(local_err.value)
    assert str(url_err.value) == re.sub(r"; --resume keeps the \d+ finished shard\(s\)", "",
                                        str(local_err.value))
    left = sorted(n for n in tf.io.gfile.listdir(out) if n.endswith(".tfrecord"))
    assert left == _shard_files(tmp_path / "local") and not tf.io.gfile.exists(
        f"{out}/manifest.json")
    fixed = f"{base}/src/{broken.relative_to(folder_copy).as_posix()}"
    tf.io.gfile.remove(fixed)  # TF's ram:// appends when a file is opened "wb" again
    with tf.io.gfile.GFile(fixed, "wb") as f:
        f.write(original)
    convert(f"{base}/src", out, runner="direct", **settings)
    assert _url_tree(out) == tree_bytes(ref)
    tf.io.gfile.rmtree(base)


@needs_beam
def test_url_tables_to_url_out_give_the_local_bytes(tmp_path: Path) -> None:
    """A Parquet (several row groups, read through tf.io.gfile as a seekable file) and
    a CSV on ram://, converted by the DirectRunner into ram:// OUTs: every file equals
    the local conversion of the same table."""
    import uuid

    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq
    import tensorflow as tf

    from .test_table_streaming import csv_table, rich_table

    local_src = tmp_path / "src"
    local_src.mkdir()
    pq.write_table(rich_table(150), local_src / "rich.parquet", row_group_size=40)
    pacsv.write_csv(csv_table(150), local_src / "plain.csv")
    base = f"ram://tfpipe-{uuid.uuid4().hex}"
    _upload(local_src, f"{base}/src")
    settings = {"split": "train=0.75,val=0.25", "shard_size": "8KB", "seed": 5}
    for name in ("rich.parquet", "plain.csv"):
        local = convert(local_src / name, tmp_path / name, workers=1, **settings)
        want = tree_bytes(tmp_path / name)
        assert len([n for n in want if n.endswith(".tfrecord")]) > 2
        out = f"{base}/{name}-out"
        if name.endswith(".csv"):  # the CLI takes URLs too (SRC need not exist locally)
            from click.testing import CliRunner

            from tfpipe.cli.main import cli

            res = CliRunner().invoke(cli, ["convert", f"{base}/src/{name}", out, "--runner",
                                           "direct", "--split", settings["split"],
                                           "--shard-size", "8KB", "--seed", "5", "--json"])
            assert res.exit_code == 0, res.output
        else:
            manifest = convert(f"{base}/src/{name}", out, runner="direct", **settings)
            assert manifest.dumps() == local.dumps()
        assert _url_tree(out) == want, name
    with pytest.raises(InputError, match="--image-column reads image files beside the table"):
        convert(f"{base}/src/plain.csv", f"{base}/x", runner="direct", image_column="word")
    tf.io.gfile.rmtree(base)
