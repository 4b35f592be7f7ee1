"""Run a conversion plan as an Apache Beam pipeline (DirectRunner, Dataflow, Flink, Spark).

The plan is the local converter's plan, computed up front by `convert()`: the
same shards, each with the same ordered inputs. Beam only changes who writes
them:

1. the launcher writes each shard's input list to ``OUT/.tfpipe-convert/beam/inputs/``
   (so the job graph carries shard names, not millions of inputs);
2. a Beam step per shard reads its list back (checked against the plan's digest),
   encodes it with the local converter's own per-shard encoder and writes the
   shard under a temporary name ``.tfpipe-convert/beam/tmp/<shard>.<attempt>``;
3. one final step renames every shard to its final name, in plan order, and
   writes the manifest with the local converter's finalization.

So a failed or retried bundle never leaves anything under a final name, the
shards and manifest are byte-identical to ``runner="local"``, and a failed run
is finished with ``resume=True``. ``apache_beam`` is imported only here and only
when a Beam runner is asked for; see docs/scale.md.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tfpipe.convert._plan import Item, Plan, ShardPlan, canonical_json
from tfpipe.convert._run import (STATE_DIR, ShardResult, _sha256_file, _write_json,
                                 drop_incomplete, finalize, prepare, record_finished,
                                 write_planned_shard)
from tfpipe.convert._source import Enumeration, Source
from tfpipe.errors import ConfigError, InputError, TfpipeError
from tfpipe.records import Manifest, Schema, shard_name

RUNNERS = ("local", "direct", "dataflow", "flink", "spark")
_BEAM_RUNNERS = {"direct": "DirectRunner", "dataflow": "DataflowRunner",
                 "flink": "FlinkRunner", "spark": "SparkRunner"}
BEAM_DIR = "beam"  # under STATE_DIR: shard input lists and uncommitted shards
FAILURE_FILE = "failed.json"  # under BEAM_DIR: the on_error="raise" error of the last step
INSTALL_HINT = "pip install 'tfpipe[beam]'"


def _import_beam() -> Any:
    try:
        import apache_beam
    except ImportError as exc:
        raise ConfigError(f"the Beam runners need Apache Beam, which is not installed "
                          f"({exc}); install it with: {INSTALL_HINT}") from None
    return apache_beam


def pipeline_flags(runner: str, pipeline_options: str | Sequence[str] | None) -> list[str]:
    """Beam's command-line flags for `runner` plus the user's options; checks Beam is installed.

    `pipeline_options` is one shell-quoted string (``"--project=p --region=r"``) or a
    list of flags, passed to Beam's `PipelineOptions` unchanged.
    """
    if runner not in RUNNERS:
        raise ConfigError(f"runner must be one of {', '.join(RUNNERS)}, got {runner!r}")
    if isinstance(pipeline_options, str):
        try:
            flags = shlex.split(pipeline_options)
        except ValueError as exc:
            raise ConfigError(f"pipeline_options: cannot split {pipeline_options!r}: "
                              f"{exc}") from None
    else:
        flags = [str(f) for f in pipeline_options or ()]
    if runner == "local":
        if flags:
            raise ConfigError("pipeline_options apply to the Beam runners "
                              f"({', '.join(RUNNERS[1:])}), not runner 'local'")
        return []
    for flag in flags:
        if flag == "--runner" or flag.startswith("--runner="):
            raise ConfigError(f"pipeline_options: give the runner as runner= / --runner "
                              f"{'|'.join(RUNNERS)}, not as {flag!r}")
    _import_beam()
    return [f"--runner={_BEAM_RUNNERS[runner]}", *flags]


def check_paths(runner: str, *paths: str | os.PathLike[str]) -> None:
    """tfpipe lists, reads and writes through the OS, so Beam runners need POSIX paths too."""
    for path in paths:
        text = os.fspath(path)
        if "://" in text:
            raise InputError(
                f"{text}: tfpipe convert reads the source and writes OUT as local (POSIX) "
                f"paths, also with runner {runner!r}; for a cluster, mount the bucket or "
                "share (gcsfuse, NFS, ...) at the same path on the launcher and every "
                "worker and pass that path (docs/scale.md)")


# ----------------------------------------------------------------------------- plan files
def _bytes_hook(obj: dict[str, Any]) -> Any:
    # canonical_json writes bytes as {"__bytes__": hex}. Unambiguous for payloads:
    # no source puts a dict {"__bytes__": <str>} in one (table rows hold text as
    # bytes). The digest check in _read_inputs catches an edited or truncated file.
    if len(obj) == 1 and "__bytes__" in obj and isinstance(obj["__bytes__"], str):
        return bytes.fromhex(obj["__bytes__"])
    return obj


def _inputs_path(out: Path, name: str) -> Path:
    return out / STATE_DIR / BEAM_DIR / "inputs" / f"{name}.json"


def _write_inputs(out: Path, shard: ShardPlan, name: str) -> None:
    path = _inputs_path(out, name)
    rows = [[it.key, it.size, it.payload, it.name] for it in shard.items]
    path.write_text(canonical_json(rows) + "\n")


def _read_inputs(out: Path, task: dict[str, Any]) -> ShardPlan:
    path = _inputs_path(out, task["name"])
    try:
        rows = json.loads(path.read_text(), object_hook=_bytes_hook)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the shard's input list: {exc}") from None
    shard = ShardPlan(task["split"], task["index"], task["count"],
                      tuple(Item(key, size, payload, name) for key, size, payload, name in rows))
    if shard.digest() != task["inputs"]:
        raise InputError(f"{path}: does not hold the planned inputs of {task['name']} "
                         "(digest mismatch); rerun the conversion")
    return shard


# ----------------------------------------------------------------------------- Beam steps
# Plain module functions bound with functools.partial: picklable by reference, and no
# beam.DoFn subclass at import time, so this module imports without apache_beam.
@dataclass(frozen=True)
class _Job:
    out: str
    source: Source  # pickles without its table rows / COCO lists (they travel in plan files)
    schema: dict[str, Any]
    compression: str | None
    on_error: str


def _write_task(job: _Job, task: dict[str, Any]) -> dict[str, Any]:
    """Beam step: one shard, under a temporary name unique to this attempt."""
    out = Path(job.out)
    shard = _read_inputs(out, task)
    temp = Path(STATE_DIR, BEAM_DIR, "tmp", f"{task['name']}.{uuid.uuid4().hex}")
    result = write_planned_shard(job.source, Schema.from_json(job.schema), shard,
                                 str(out / temp), job.compression, job.on_error)
    result.name = task["name"]
    return {"temp": temp.as_posix(), "result": result.to_json()}


@dataclass(frozen=True)
class _Commit:
    out: str
    source: Source
    enumeration: Enumeration  # bad / ignored only
    plan: Plan  # shards without their items
    keep: dict[str, ShardResult]
    schema: dict[str, Any]
    compression: str | None
    settings: dict[str, Any]
    plan_id: str
    split_of: dict[str, str]
    on_error: str


def _commit(job: _Commit, written: list[dict[str, Any]]) -> None:
    """Beam's last step: rename the shards into place in plan order, then the manifest.

    Idempotent, since a runner may retry it: a shard already renamed by an earlier
    attempt is recognised by its sha256.
    """
    out = Path(job.out)
    by_name = {}
    for entry in written:
        result = ShardResult.from_json(entry["result"])
        by_name[result.name] = (out / entry["temp"], result)
    results = dict(job.keep)
    for shard in job.plan.shards:
        name = shard_name(shard.split, shard.index, shard.count, job.compression)
        if name in results:
            continue
        if name not in by_name:
            raise InputError(f"{out}: the Beam pipeline returned no result for {name}")
        temp, result = by_name[name]
        if not temp.exists() and _sha256_file(out / name) == result.sha256:
            pass  # a retry of this step: an earlier attempt already renamed it
        else:
            try:
                size = os.stat(temp).st_size
            except OSError as exc:
                raise InputError(f"{temp}: the shard written by the pipeline is gone "
                                 f"({exc.strerror}); rerun with resume") from None
            if size != result.num_bytes:
                raise InputError(f"{temp}: {size} bytes, but its writer reported "
                                 f"{result.num_bytes}; rerun with resume")
            os.replace(temp, out / name)
        if not (job.on_error == "raise" and result.skipped):  # incomplete: redo on resume
            record_finished(out, result)
        results[name] = result
    _fsync_dir(out)
    if job.on_error == "raise":
        failure = drop_incomplete(job.enumeration, job.plan, results, out, job.compression)
        if failure is not None:
            # Reported by the launcher, whole: Beam's wrapped errors keep one line.
            _write_json(out / STATE_DIR / BEAM_DIR / FAILURE_FILE, {"error": str(failure)})
            return
    finalize(job.source, job.enumeration, job.plan, results, out,
             schema=Schema.from_json(job.schema), compression=job.compression,
             settings=job.settings, plan_id=job.plan_id, split_of=job.split_of.__getitem__)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _pipeline_error(runner: str, exc: BaseException) -> TfpipeError:
    """The first tfpipe error inside Beam's wrapped traceback, as one line."""
    text = str(exc)
    for cls in ("InputError", "ConfigError", "RecordError", "SchemaError"):
        marker = f"tfpipe.errors.{cls}: "
        if marker in text:
            line = text.split(marker, 1)[1].splitlines()[0].strip()
            line = re.sub(r"\s*\[while running '[^']*'\]$", "", line)
            return (InputError if cls != "ConfigError" else ConfigError)(line)
    first = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), repr(exc))
    return InputError(f"Beam runner {runner!r}: the pipeline failed: {first}")


def run_beam(source: Source, enumeration: Enumeration, plan: Plan,
             out: str | os.PathLike[str], *, settings: dict[str, Any],
             compression: str | None, on_error: str, resume: bool,
             split_of: Callable[[str], str], runner: str, flags: Sequence[str],
             progress: Callable[[int, int], None] | None = None) -> Manifest:
    """`execute()`'s twin on Beam: same plan, same shard encoder, same finalization."""
    beam = _import_beam()
    from apache_beam.options.pipeline_options import PipelineOptions

    out_path = Path(out).resolve()
    prepared = prepare(source, plan, out_path, settings=settings, compression=compression,
                       resume=resume)
    if progress:
        progress(prepared.done_inputs, prepared.total)
    work = out_path / STATE_DIR / BEAM_DIR
    # Input lists and uncommitted shards of an earlier, failed run: never trusted.
    shutil.rmtree(work, ignore_errors=True)
    (work / "inputs").mkdir(parents=True)
    (work / "tmp").mkdir()
    tasks = []
    for shard, name in prepared.todo:
        _write_inputs(out_path, shard, name)
        tasks.append({"name": name, "split": shard.split, "index": shard.index,
                      "count": shard.count, "inputs": shard.digest()})
    keys = [item.key for item, _ in enumeration.bad] + [p for p, _ in enumeration.ignored]
    commit = _Commit(
        out=str(out_path), source=source,
        enumeration=Enumeration(bad=enumeration.bad, ignored=enumeration.ignored),
        plan=Plan([ShardPlan(s.split, s.index, s.count, ()) for s in plan.shards],
                  list(plan.splits)),
        keep=prepared.keep, schema=prepared.schema.to_json(), compression=compression,
        settings=settings, plan_id=prepared.record["plan_id"],
        split_of={key: split_of(key) for key in keys}, on_error=on_error)
    job = _Job(str(out_path), source, prepared.schema.to_json(), compression, on_error)

    pipeline = beam.Pipeline(options=PipelineOptions(list(flags)))
    _ = (pipeline
         | "Shards" >> beam.Create(tasks)
         # Spread shards over workers: without it a runner may fuse Create with the
         # writer and run every shard in one bundle.
         | "Spread" >> beam.Reshuffle()
         | "WriteShard" >> beam.Map(partial(_write_task, job))
         | "Gather" >> beam.combiners.ToList()
         | "Commit" >> beam.Map(partial(_commit, commit)))
    try:
        state = pipeline.run().wait_until_finish()
    except TfpipeError:
        raise
    except Exception as exc:  # noqa: BLE001 - Beam wraps worker errors in its own types
        raise _pipeline_error(runner, exc) from exc
    if state is not None and str(state).rsplit(".", 1)[-1] != "DONE":
        raise InputError(f"Beam runner {runner!r}: the pipeline ended in state {state}, "
                         f"not DONE; nothing was committed to {out_path} (rerun with resume)")
    failed = work / FAILURE_FILE
    if failed.exists():
        raise InputError(json.loads(failed.read_text())["error"])
    manifest = Manifest.load(out_path)
    if progress:
        progress(prepared.total, prepared.total)
    return manifest
