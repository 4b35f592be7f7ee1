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

SRC (image folders, CSV / Parquet tables) and OUT may also be URLs of a
filesystem TensorFlow knows (``gs://``, ``ram://``; ``s3://`` with
tensorflow-io): the launcher and the
workers list, read, upload and rename through `tf.io.gfile`, shards are still
written under a temporary name and renamed at the commit, and the bytes are the
local converter's (each shard is encoded into a local temporary file first).
"""

from __future__ import annotations

import importlib
import json
import os
import posixpath
import re
import shlex
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tfpipe.convert._image import BadImage, probe
from tfpipe.convert._plan import Item, Plan, ShardPlan, canonical_json
from tfpipe.convert._run import (_SHARD_RE, _TEMP_RE, PLAN_FILE, STATE_DIR, Prepared,
                                 ShardResult, _sha256_file, _write_json, bad_inputs_error,
                                 drop_incomplete, finalize, plan_record, prepare,
                                 record_finished, write_planned_shard)
from tfpipe.convert._source import MAX_INPUT_BYTES, BadInput, Enumeration, Source, image_values
from tfpipe.convert.folder import FolderSource
from tfpipe.errors import ConfigError, InputError, TfpipeError
from tfpipe.records import MANIFEST_NAME, Manifest, Schema, shard_name

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


def is_url(path: str | os.PathLike[str]) -> bool:
    return "://" in os.fspath(path)


# Filesystems TensorFlow (2.21: gs:// and ram:// built in) registers only once this
# module is imported.
_PLUGINS = {scheme: ("tensorflow_io", "tensorflow-io") for scheme in ("s3", "az", "hdfs")}


def _gfile() -> Any:
    import tensorflow as tf

    return tf.io.gfile


def check_url(url: str) -> None:
    """`url`'s filesystem is available in this process (a plugin imported), else a clear error."""
    import tensorflow as tf

    scheme = url.split("://", 1)[0]
    if scheme in _PLUGINS:
        module, package = _PLUGINS[scheme]
        try:
            importlib.import_module(module)
        except ImportError:
            raise ConfigError(f"{url}: TensorFlow reads {scheme}:// through {package}, which "
                              f"is not installed; pip install {package} (on the launcher "
                              "and every worker)") from None
    try:
        tf.io.gfile.exists(url)
    except tf.errors.UnimplementedError:
        raise ConfigError(f"{url}: TensorFlow has no filesystem for {scheme}:// here; use "
                          "gs://, ram:// (one process), s3:// / az:// / hdfs:// (with "
                          "tensorflow-io) or a local path") from None
    except tf.errors.OpError as exc:
        raise InputError(f"{url}: cannot reach it: {exc.message.splitlines()[0]}") from None


def check_paths(runner: str, *paths: str | os.PathLike[str], images: Any = None,
                fmt: str = "auto") -> None:
    """URLs: Beam runners only, image folders and OUT only, filesystem available."""
    urls = [os.fspath(p) for p in paths if is_url(p)]
    if images is not None and is_url(images):
        raise InputError(f"{os.fspath(images)}: COCO images= must be a local (POSIX) path; "
                         "a URL source is implemented for image folders only (docs/scale.md)")
    if not urls:
        return
    if runner == "local":
        raise InputError(f"{urls[0]}: runner 'local' reads and writes local (POSIX) paths; "
                         "URLs (gs://, s3://, ram://) need a Beam runner (docs/scale.md)")
    src = os.fspath(paths[0])
    if is_url(src) and fmt not in ("auto", "folder", "csv", "parquet"):
        raise InputError(f"{src}: a URL source is implemented for image folders and csv / "
                         f"parquet tables, not format {fmt!r}; copy the file to a local path "
                         "or a mounted share")
    for url in urls:
        check_url(url)


class UrlFolderSource(FolderSource):
    """`FolderSource` under a URL, through `tf.io.gfile`: the same items (keys, sizes,
    labels, order) and the same feature values, so the same plan and bytes."""

    def __init__(self, root: str) -> None:  # noqa: D107 - FolderSource's, without resolve()
        gfile = _gfile()
        self.root = root.rstrip("/")
        if not gfile.isdir(self.root):
            raise InputError(f"{root}: not a directory (the folder format needs "
                             "root/<class>/<image>)")
        self.class_names = sorted(
            n.rstrip("/") for n in gfile.listdir(self.root)
            if not n.startswith(".") and gfile.isdir(posixpath.join(self.root, n)))
        if not self.class_names:
            raise InputError(f"{root}: no class folders found; the folder format expects "
                             "root/<class>/<image>")

    def _paths(self) -> list[str]:
        gfile = _gfile()
        found = []
        for dirpath, dirnames, filenames in gfile.walk(self.root):
            rel = dirpath.rstrip("/")[len(self.root):].strip("/")
            if any(part.startswith(".") for part in rel.split("/") if part):
                continue  # os.walk's pruning of hidden folders
            found += [posixpath.join(rel, n.rstrip("/")) if rel else n.rstrip("/")
                      for n in filenames if not n.startswith(".")]
        return sorted(found)

    def _stat(self, path: str) -> tuple[int, str | None]:
        try:
            return _gfile().stat(posixpath.join(self.root, path)).length, None
        except Exception as exc:  # noqa: BLE001 - tf.errors.* of the filesystem
            return 0, _tf_reason(exc)

    def encode_values(self, item: Item) -> tuple[dict[str, Any], dict[str, int]]:
        import tensorflow as tf

        relpath, label = item.payload
        path = posixpath.join(self.root, relpath)
        try:
            size = tf.io.gfile.stat(path).length
            if size > MAX_INPUT_BYTES:
                raise BadInput(f"file is {size} bytes, over the {MAX_INPUT_BYTES}-byte limit")
            with tf.io.gfile.GFile(path, "rb") as f:
                data = f.read()
        except tf.errors.NotFoundError:
            raise BadInput("file not found") from None
        except tf.errors.OpError as exc:
            raise BadInput(f"cannot read file: {_tf_reason(exc)}") from None
        try:
            info = probe(data)
        except BadImage as exc:
            raise BadInput(str(exc)) from None
        values = image_values(data, info, relpath, relpath)
        values["image/class/label"] = label
        values["image/class/text"] = self.class_names[label].encode()
        return values, {}


def _tf_reason(exc: BaseException) -> str:
    return (getattr(exc, "message", None) or str(exc)).splitlines()[0]


TABLE_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def url_source(src: str, fmt: str = "auto", *, image_column: str | None = None,
               label_column: str | None = None, **table: Any) -> Source:
    """The source for a URL `src`: an image folder, or a CSV / Parquet table read
    through tf.io.gfile (by suffix under format "auto")."""
    check_url(src)
    if fmt == "auto":
        suffix = posixpath.splitext(src.rstrip("/"))[1].lower()
        fmt = TABLE_SUFFIXES.get(suffix, "folder")
    if fmt == "folder":
        if image_column or label_column or any(
                v not in (None, (), "drop-element", "s") for v in table.values()):
            raise ConfigError("image_column / label_column / table options apply to csv and "
                              "parquet, not an image folder")
        return UrlFolderSource(src)
    from tfpipe.convert._table_normalize import parse_keep_float64
    from tfpipe.convert.table import TableSource

    if not _gfile().exists(src) or _gfile().isdir(src):
        raise InputError(f"{src}: not a file (format {fmt!r} reads one table file)")
    table["keep_float64"] = parse_keep_float64(table.get("keep_float64"))
    return TableSource(src, fmt, image_column=image_column, label_column=label_column, **table)


# Text files and directories of OUT, local or URL (the local path keeps os calls).
def _join(out: str, *parts: str) -> str:
    return posixpath.join(out, *parts) if is_url(out) else os.path.join(out, *parts)


def _write_text(path: str, text: str) -> None:
    if is_url(path):
        with _gfile().GFile(path, "w") as f:
            f.write(text)
    else:
        Path(path).write_text(text)


def _read_text(path: str) -> str:
    if is_url(path):
        import tensorflow as tf

        try:
            with tf.io.gfile.GFile(path, "r") as f:
                return f.read()
        except tf.errors.OpError as exc:
            raise OSError(_tf_reason(exc)) from None
    return Path(path).read_text()


# ----------------------------------------------------------------------------- plan files
def _bytes_hook(obj: dict[str, Any]) -> Any:
    # canonical_json writes bytes as {"__bytes__": hex}. Unambiguous for payloads:
    # no source puts a dict {"__bytes__": <str>} in one (table rows hold text as
    # bytes). The digest check in _read_inputs catches an edited or truncated file.
    if len(obj) == 1 and "__bytes__" in obj and isinstance(obj["__bytes__"], str):
        return bytes.fromhex(obj["__bytes__"])
    return obj


def _inputs_path(out: str | Path, name: str) -> str:
    return _join(os.fspath(out), STATE_DIR, BEAM_DIR, "inputs", f"{name}.json")


def _write_inputs(out: str | Path, shard: ShardPlan, name: str) -> None:
    path = _inputs_path(out, name)
    rows = [[it.key, it.size, it.payload, it.name] for it in shard.items]
    _write_text(path, canonical_json(rows) + "\n")


def _read_inputs(out: str | Path, task: dict[str, Any]) -> ShardPlan:
    path = _inputs_path(out, task["name"])
    try:
        rows = json.loads(_read_text(path), object_hook=_bytes_hook)
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
    shard = _read_inputs(job.out, task)
    temp = Path(STATE_DIR, BEAM_DIR, "tmp", f"{task['name']}.{uuid.uuid4().hex}")
    if not is_url(job.out):
        result = write_planned_shard(job.source, Schema.from_json(job.schema), shard,
                                     str(Path(job.out) / temp), job.compression, job.on_error)
    else:
        # Encoded into a local file by the same writer, then uploaded whole: an
        # object store cannot append, and the bytes stay the local converter's.
        with tempfile.TemporaryDirectory(prefix="tfpipe-shard-") as local:
            path = os.path.join(local, task["name"])
            result = write_planned_shard(job.source, Schema.from_json(job.schema), shard,
                                         path, job.compression, job.on_error)
            _gfile().copy(path, _join(job.out, temp.as_posix()), overwrite=True)
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
    if is_url(job.out):
        return _commit_url(job, written)
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


def _sha256_url(url: str) -> str | None:
    import hashlib

    import tensorflow as tf

    h = hashlib.sha256()
    try:
        with tf.io.gfile.GFile(url, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except tf.errors.OpError:
        return None
    return h.hexdigest()


def _commit_url(job: _Commit, written: list[dict[str, Any]]) -> None:
    """`_commit` for a URL OUT: renames through tf.io.gfile (on object stores a copy
    that appears whole, then a delete), the manifest written locally by the local
    finalization and uploaded last. No `done` records: a URL OUT has no --resume."""
    import tensorflow as tf

    gfile = tf.io.gfile
    by_name = {ShardResult.from_json(e["result"]).name: e for e in written}
    results: dict[str, ShardResult] = {}
    for shard in job.plan.shards:
        name = shard_name(shard.split, shard.index, shard.count, job.compression)
        if name not in by_name:
            raise InputError(f"{job.out}: the Beam pipeline returned no result for {name}")
        temp = _join(job.out, by_name[name]["temp"])
        result = ShardResult.from_json(by_name[name]["result"])
        final = _join(job.out, name)
        if not gfile.exists(temp) and _sha256_url(final) == result.sha256:
            pass  # a retry of this step: an earlier attempt already renamed it
        else:
            try:
                size = gfile.stat(temp).length
            except tf.errors.OpError as exc:
                raise InputError(f"{temp}: the shard written by the pipeline is gone "
                                 f"({_tf_reason(exc)}); rerun") from None
            if size != result.num_bytes:
                raise InputError(f"{temp}: {size} bytes, but its writer reported "
                                 f"{result.num_bytes}; rerun")
            gfile.rename(temp, final, overwrite=True)
        results[name] = result
    if job.on_error == "raise":
        bad = [(item.label, reason) for item, reason in job.enumeration.bad]
        bad += [b for r in results.values() for b in r.skipped]
        if bad:  # drop_incomplete's rule: shards that miss inputs are not kept
            for name, r in results.items():
                if r.skipped:
                    gfile.remove(_join(job.out, name))
            failure = bad_inputs_error(bad, 0)
            _write_text(_join(job.out, STATE_DIR, BEAM_DIR, FAILURE_FILE),
                        json.dumps({"error": str(failure)}))
            return
    with tempfile.TemporaryDirectory(prefix="tfpipe-manifest-") as staging:
        finalize(job.source, job.enumeration, job.plan, results, staging,
                 schema=Schema.from_json(job.schema), compression=job.compression,
                 settings=job.settings, plan_id=job.plan_id, split_of=job.split_of.__getitem__)
        # the local order: TFDS files (dataset_info.json last of them), the manifest last
        files = sorted(os.listdir(staging), key=lambda n: (n == MANIFEST_NAME,
                                                           n == "dataset_info.json", n))
        for fname in files:
            target = _join(job.out, fname)
            if gfile.exists(target):  # a retried commit; ram:// appends to an existing file
                gfile.remove(target)
            gfile.copy(os.path.join(staging, fname), target)
    gfile.rmtree(_join(job.out, STATE_DIR))


def _prepare_url(source: Source, plan: Plan, out: str, *, settings: dict[str, Any],
                 compression: str | None, resume: bool) -> Prepared:
    """`prepare` for a URL OUT. What an unfinished run left (its state directory,
    shards and temporary files, no manifest) is deleted and every shard is written
    again, with or without resume (no per-shard resume here); anything else in OUT
    is refused, as locally."""
    gfile = _gfile()
    schema = source.schema()
    identity = {"settings": {k: v for k, v in settings.items() if k != "on_error"},
                "source": source.settings(), "schema": schema.to_json(),
                "class_names": list(source.class_names or [])}
    record = plan_record(plan, identity, compression)
    existing = sorted(n.rstrip("/") for n in gfile.listdir(out)) if gfile.exists(out) else []
    unfinished = (STATE_DIR in existing and MANIFEST_NAME not in existing
                  and all(n == STATE_DIR or _SHARD_RE.match(n) or _TEMP_RE.match(n)
                          for n in existing))
    if existing and not unfinished:
        raise ConfigError(f"{out}: is not empty ({len(existing)} entries, e.g. "
                          f"{existing[0]!r}); convert into a fresh location (a URL OUT is "
                          "never resumed: an unfinished run there is redone whole)")
    for name in existing:
        path = _join(out, name)
        gfile.rmtree(path) if gfile.isdir(path) else gfile.remove(path)
    gfile.makedirs(_join(out, STATE_DIR))
    _write_text(_join(out, STATE_DIR, PLAN_FILE), json.dumps(record, sort_keys=True, indent=1)
                + "\n")
    todo = [(s, shard_name(s.split, s.index, s.count, compression)) for s in plan.shards]
    total = sum(len(s.items) for s in plan.shards)
    return Prepared(schema, record, {}, todo, total, 0)


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


def run_to_done(pipeline: Any, runner: str, what: str, hint: str = "") -> None:
    """Run a Beam pipeline and wait; a worker's error or an end state other than DONE
    is one InputError naming the runner (`what` the pipeline, `hint` the advice)."""
    try:
        state = pipeline.run().wait_until_finish()
    except TfpipeError:
        raise
    except Exception as exc:  # noqa: BLE001 - Beam wraps worker errors in its own types
        raise _pipeline_error(runner, exc) from exc
    if state is not None and str(state).rsplit(".", 1)[-1] != "DONE":
        raise InputError(f"Beam runner {runner!r}: {what} ended in state {state}, "
                         f"not DONE{hint}")


def run_beam(source: Source, enumeration: Enumeration, plan: Plan,
             out: str | os.PathLike[str], *, settings: dict[str, Any],
             compression: str | None, on_error: str, resume: bool,
             split_of: Callable[[str], str], runner: str, flags: Sequence[str],
             progress: Callable[[int, int], None] | None = None) -> Manifest:
    """`execute()`'s twin on Beam: same plan, same shard encoder, same finalization."""
    beam = _import_beam()
    from apache_beam.options.pipeline_options import PipelineOptions

    url = is_url(out)
    out_path: Any = os.fspath(out).rstrip("/") if url else Path(out).resolve()
    if url:
        prepared = _prepare_url(source, plan, out_path, settings=settings,
                                compression=compression, resume=resume)
        work = _join(out_path, STATE_DIR, BEAM_DIR)
        _gfile().makedirs(_join(work, "inputs"))
        _gfile().makedirs(_join(work, "tmp"))
    else:
        prepared = prepare(source, plan, out_path, settings=settings, compression=compression,
                           resume=resume)
        work = out_path / STATE_DIR / BEAM_DIR
        # Input lists and uncommitted shards of an earlier, failed run: never trusted.
        shutil.rmtree(work, ignore_errors=True)
        (work / "inputs").mkdir(parents=True)
        (work / "tmp").mkdir()
    if progress:
        progress(prepared.done_inputs, prepared.total)
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
    run_to_done(pipeline, runner, "the pipeline",
                f"; nothing was committed to {out_path} (rerun with resume)")
    if url:
        failed = _join(work, FAILURE_FILE)
        if _gfile().exists(failed):
            raise InputError(json.loads(_read_text(failed))["error"])
        where = _join(out_path, MANIFEST_NAME)
        manifest = Manifest.from_json(json.loads(_read_text(where)), where)
        if progress:
            progress(prepared.total, prepared.total)
        return manifest
    failed = work / FAILURE_FILE
    if failed.exists():
        raise InputError(json.loads(failed.read_text())["error"])
    manifest = Manifest.load(out_path)
    if progress:
        progress(prepared.total, prepared.total)
    return manifest
