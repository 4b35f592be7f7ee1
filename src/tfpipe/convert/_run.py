"""Execute a conversion plan: one independent task per shard, then the manifest.

Each shard's bytes depend only on its planned inputs, so shards can be written
in any order by any number of processes, and `resume` keeps every shard whose
file still matches the sha256 recorded when it was finished.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfpipe.convert._plan import Plan, ShardPlan, canonical_json
from tfpipe.convert._source import BadInput, Enumeration, Source
from tfpipe.convert._tfds import write_tfds_metadata
from tfpipe.errors import ConfigError, InputError
from tfpipe.records import (MANIFEST_NAME, Manifest, Schema, ShardEntry, SkippedInput,
                            SplitInfo, encode_example, shard_name, write_shard,
                            write_shard_frames)

STATE_DIR = ".tfpipe-convert"  # plan + per-shard completion records, removed at the end
PLAN_FILE = "plan.json"
_TEMP_RE = re.compile(r"^\..+\.tfrecord(\.gz)?\.tmp-\d+-\d+$")
_SHARD_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*-\d{5}-of-\d{5}\.tfrecord(\.gz)?$")
ON_ERROR = ("skip", "raise")


@dataclass
class ShardResult:
    split: str
    index: int
    name: str
    num_records: int
    num_bytes: int
    sha256: str
    skipped: list[tuple[str, str]] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"split": self.split, "index": self.index, "name": self.name,
                "num_records": self.num_records, "num_bytes": self.num_bytes,
                "sha256": self.sha256, "skipped": [list(s) for s in self.skipped],
                "stats": dict(sorted(self.stats.items()))}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ShardResult:
        return cls(obj["split"], int(obj["index"]), obj["name"], int(obj["num_records"]),
                   int(obj["num_bytes"]), obj["sha256"],
                   [(str(a), str(b)) for a, b in obj["skipped"]],
                   {str(k): int(v) for k, v in obj["stats"].items()})


# ----------------------------------------------------------------------------- workers
# Spawned workers get the source and schema once (initializer), then only shard plans.
_WORKER: dict[str, Any] = {}


def _init_worker(source: Source, schema_json: dict[str, Any]) -> None:
    _WORKER["source"] = source
    _WORKER["schema"] = Schema.from_json(schema_json)


def _write_one(shard: ShardPlan, path: str, compression: str | None,
               on_error: str) -> ShardResult:
    return write_planned_shard(_WORKER["source"], _WORKER["schema"], shard, path,
                               compression, on_error)


def write_planned_shard(source: Source, schema: Schema, shard: ShardPlan, path: str,
                        compression: str | None, on_error: str) -> ShardResult:
    """Encode `shard`'s inputs in plan order and write them atomically to `path`.

    The one per-shard encoder: the local pool and the Beam runner both call it, so
    a shard's bytes, skipped inputs and counters never depend on the executor.
    """
    skipped: list[tuple[str, str]] = []
    stats: dict[str, int] = {}

    def records() -> Iterator[bytes]:
        for item in shard.items:
            try:
                values, counts = source.encode_values(item)
            except BadInput as exc:
                # Listed under either policy: with on_error="raise", `execute`
                # stops once every shard is done, naming every bad input at once.
                skipped.append((item.label, str(exc)))
                continue
            for key, n in counts.items():
                stats[key] = stats.get(key, 0) + n
            yield encode_example(values, schema)

    # Tables encode a shard column by column (the same bytes, ~50x less CPU).
    columnar = getattr(source, "encoded_frames", None)
    frames = columnar(shard, schema) if columnar is not None else None
    if frames is not None:
        info = write_shard_frames(path, frames, compression)
        stats.update(source.shard_stats(shard))  # packed tables: rows
    else:
        info = write_shard(path, records(), compression)
    return ShardResult(shard.split, shard.index, os.path.basename(path), info.num_records,
                       info.num_bytes, info.sha256, skipped, stats)


# ----------------------------------------------------------------------------- helpers
def _sha256_file(path: Path) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def _write_json(path: Path, obj: Any) -> None:
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temp.write_text(json.dumps(obj, sort_keys=True, indent=1) + "\n")
    os.replace(temp, path)


def _sidecar(state: Path, name: str) -> Path:
    return state / f"{name}.done.json"


def plan_record(plan: Plan, identity: dict[str, Any], compression: str | None) -> dict[str, Any]:
    """What a resumed run must agree with: settings, schema and every shard's inputs."""
    # Shards hash independently: two at a time (a table's digest is Arrow reads, C and
    # sha256, which all release the GIL), in plan order in the record.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        digests = list(pool.map(lambda s: s.digest(), plan.shards))
    shards = [{"name": shard_name(s.split, s.index, s.count, compression),
               "inputs": digest, "num_inputs": len(s.items)}
              for s, digest in zip(plan.shards, digests)]
    plan_id = hashlib.sha256(canonical_json([identity, shards]).encode()).hexdigest()
    return {"plan_id": plan_id, "identity": identity, "shards": shards}


def _completed_from_manifest(out: Path, plan: Plan, compression: str | None,
                             plan_id: str) -> dict[str, ShardResult]:
    """Shards of a finished earlier run with the same plan (resume after completion)."""
    try:
        manifest = Manifest.load(out)
    except Exception:  # noqa: BLE001 - an unreadable manifest just means "redo"
        return {}
    if manifest.settings.get("plan_id") != plan_id:
        raise ConfigError(
            f"{out}: holds a dataset converted from different inputs or settings, so "
            "--resume cannot reuse it; convert into a fresh output directory (or delete it)")
    # Skipped inputs are listed per split; the plan says which shard each came from
    # (only those are looked up: a table's shards read their rows to list them).
    skipped = {skip.input for info in manifest.splits.values() for skip in info.skipped}
    shard_of = {item.label: shard_name(s.split, s.index, s.count, compression)
                for s in plan.shards for item in (s.items if skipped else ())
                if item.label in skipped}
    stats = manifest.settings.get("shard_stats", {})
    done: dict[str, ShardResult] = {}
    for split, info in manifest.splits.items():
        for i, entry in enumerate(info.shards):
            done[entry.path] = ShardResult(split, i, entry.path, entry.num_records,
                                           entry.num_bytes, entry.sha256, [],
                                           dict(stats.get(entry.path, {})))
        for skip in info.skipped:
            name = shard_of.get(skip.input)
            if name in done:
                done[name].skipped.append((skip.input, skip.reason))
    return done


def _prepare_out(out: Path, record: dict[str, Any], resume: bool, plan: Plan,
                 compression: str | None) -> dict[str, ShardResult]:
    """Create OUT and the state dir; on resume return the shards that can be kept."""
    state = out / STATE_DIR
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out}: exists and is not a directory")
    existing = sorted(p.name for p in out.iterdir()) if out.exists() else []
    if existing and not resume and _unfinished_run(out, existing):
        # What an interrupted or failed run left (its state dir, shards, temp
        # files, nothing else): a plain rerun starts over instead of refusing.
        for name in existing:
            path = out / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        existing = []
    if existing and not resume:
        raise ConfigError(
            f"{out}: is not empty ({len(existing)} entries, e.g. {existing[0]!r}); "
            "convert into a fresh directory, or pass --resume to finish an interrupted run")
    out.mkdir(parents=True, exist_ok=True)
    keep: dict[str, ShardResult] = {}
    if resume and existing:
        plan_path = state / PLAN_FILE
        if plan_path.exists():
            try:
                old = json.loads(plan_path.read_text())
            except ValueError:
                old = {}
            if old.get("plan_id") != record["plan_id"] and old.get("identity") != record["identity"]:
                raise ConfigError(
                    f"{out}: was started with different settings (plan "
                    f"{str(old.get('plan_id'))[:12]} vs {record['plan_id'][:12]}), so --resume "
                    "cannot reuse it; rerun with the original settings, or convert "
                    "into a fresh output directory")
            # Same settings; inputs may have changed since (a bad input fixed or
            # removed): a finished shard is kept only if its planned inputs are
            # the same, since a shard's bytes depend on nothing else.
            old_inputs = {sh.get("name"): sh.get("inputs") for sh in old.get("shards", [])}
            unchanged = {sh["name"] for sh in record["shards"]
                         if old_inputs.get(sh["name"]) == sh["inputs"]}
            for path in sorted(state.glob("*.done.json")):
                try:
                    result = ShardResult.from_json(json.loads(path.read_text()))
                except (ValueError, KeyError, TypeError):
                    continue
                if result.name in unchanged:
                    keep[result.name] = result
            # Shards of the old plan that the new one does not have: unlisted leftovers.
            planned_names = {sh["name"] for sh in record["shards"]}
            for name in existing:
                if _SHARD_RE.match(name) and name not in planned_names:
                    (out / name).unlink(missing_ok=True)
        elif (out / MANIFEST_NAME).exists():
            keep = _completed_from_manifest(out, plan, compression, record["plan_id"])
        # Half-written shards of the interrupted run: never renamed, never trusted.
        for name in existing:
            if _TEMP_RE.match(name):
                (out / name).unlink(missing_ok=True)
        planned = {s["name"] for s in record["shards"]}
        keep = {name: r for name, r in keep.items()
                if name in planned and _sha256_file(out / name) == r.sha256}
    state.mkdir(exist_ok=True)
    _write_json(state / PLAN_FILE, record)
    return keep


def _unfinished_run(out: Path, existing: list[str]) -> bool:
    """OUT holds only an unfinished conversion: its state dir, shards and temp files."""
    return (STATE_DIR in existing and MANIFEST_NAME not in existing
            and all(name == STATE_DIR or _SHARD_RE.match(name) or _TEMP_RE.match(name)
                    for name in existing))


def drop_incomplete(enumeration: Enumeration, plan: Plan, results: dict[str, ShardResult],
                    out: Path, compression: str | None) -> InputError | None:
    """on_error="raise", after every shard ran: None when no input was bad, else
    delete the shards that miss inputs (never trusted by --resume) and return the
    one error listing every bad input. Shared by the local and Beam runners."""
    names = [shard_name(s.split, s.index, s.count, compression) for s in plan.shards]
    bad = [(item.label, reason) for item, reason in enumeration.bad]
    bad += [b for name in names for b in results[name].skipped]
    if not bad:
        return None
    for name in names:
        if results[name].skipped:
            (out / name).unlink(missing_ok=True)
    return bad_inputs_error(bad, sum(not results[n].skipped for n in names))


def bad_inputs_error(bad: list[tuple[str, str]], kept: int) -> InputError:
    """The one error of an on_error="raise" run: every bad input with its reason."""
    listed = "\n".join(f"  {label}: {reason}" for label, reason in bad)
    again = (f"; --resume keeps the {kept} finished shard(s)" if kept else "")
    return InputError(f"{len(bad)} bad input(s) (on_error=raise), no manifest written:\n"
                      f"{listed}\nfix or remove them and rerun{again}, or convert with "
                      "on_error=skip to list them in the manifest instead")


# ----------------------------------------------------------------------------- run
def _mp_context() -> multiprocessing.context.BaseContext:
    """forkserver with tfpipe.convert and PIL preloaded, else spawn.

    Never plain fork: the parent may hold TensorFlow's threads and locks. Both
    start workers from a clean interpreter that imports no TensorFlow; the
    forkserver imports once and forks each worker from there, which measured
    1.0 s for the first pool of 2 and 0.07-0.19 s for later ones, against 1.6 s
    for every spawn pool (2 vCPU under load).
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["tfpipe.convert", "PIL.Image"])
        return ctx
    return multiprocessing.get_context("spawn")


@dataclass
class Prepared:
    """What `prepare` settles before any shard is written."""

    schema: Schema
    record: dict[str, Any]  # plan_record(): plan id + every shard's inputs
    keep: dict[str, ShardResult]  # verified shards of an earlier run (resume)
    todo: list[tuple[ShardPlan, str]]  # (shard, final file name) still to write
    total: int  # inputs in the plan
    done_inputs: int  # inputs of the kept shards


def prepare(source: Source, plan: Plan, out: str | os.PathLike[str], *,
            settings: dict[str, Any], compression: str | None, resume: bool) -> Prepared:
    """Check / create OUT, record the plan in its state dir, find the shards left to write."""
    schema = source.schema()
    # What decides the bytes on disk (on_error does not: it only stops or not).
    identity = {"settings": {k: v for k, v in settings.items() if k != "on_error"},
                "source": source.settings(), "schema": schema.to_json(),
                "class_names": list(source.class_names or [])}
    record = plan_record(plan, identity, compression)
    keep = _prepare_out(Path(out), record, resume, plan, compression)
    todo = [(s, shard_name(s.split, s.index, s.count, compression)) for s in plan.shards]
    todo = [(s, name) for s, name in todo if name not in keep]
    total = sum(len(s.items) for s in plan.shards)
    return Prepared(schema, record, keep, todo, total,
                    total - sum(len(s.items) for s, _ in todo))


def record_finished(out: str | os.PathLike[str], result: ShardResult) -> None:
    """Note a shard under its final name as done, so `--resume` can keep it."""
    _write_json(_sidecar(Path(out) / STATE_DIR, result.name), result.to_json())


def finalize(source: Source, enumeration: Enumeration, plan: Plan,
             results: dict[str, ShardResult], out: str | os.PathLike[str], *,
             schema: Schema, compression: str | None, settings: dict[str, Any],
             plan_id: str, split_of: Callable[[str], str]) -> Manifest:
    """Write the manifest from the per-shard results, then drop the state dir.

    Shared by every runner (the Beam runner calls it from its last step), so the
    manifest depends only on the plan and the shard results. It reads only
    `plan.shards`' split/index/count and `enumeration.bad` / `.ignored`.
    """
    out_path = Path(out)
    manifest = _manifest(source, enumeration, plan, results, schema, compression,
                         settings, plan_id, split_of)
    write_tfds_metadata(out_path, manifest)  # before the manifest: it stays the last file
    manifest.save(out_path)
    shutil.rmtree(out_path / STATE_DIR, ignore_errors=True)
    return manifest


def execute(source: Source, enumeration: Enumeration, plan: Plan, out: str | os.PathLike[str],
            *, settings: dict[str, Any], compression: str | None, workers: int,
            on_error: str, resume: bool, split_of: Callable[[str], str],
            progress: Callable[[int, int], None] | None = None) -> Manifest:
    """Write every shard of `plan` (skipping verified ones on resume), then the manifest."""
    out_path = Path(out)
    prepared = prepare(source, plan, out_path, settings=settings, compression=compression,
                       resume=resume)
    schema, todo, total = prepared.schema, prepared.todo, prepared.total
    results: dict[str, ShardResult] = dict(prepared.keep)
    done_inputs = prepared.done_inputs
    if progress:
        progress(done_inputs, total)

    def finished(result: ShardResult, shard: ShardPlan) -> None:
        nonlocal done_inputs
        results[result.name] = result
        if not (on_error == "raise" and result.skipped):  # incomplete under raise: redo
            record_finished(out_path, result)
        done_inputs += len(shard.items)
        if progress:
            progress(done_inputs, total)

    workers = max(1, min(workers, len(todo)))
    if workers == 1:
        _init_worker(source, schema.to_json())
        for shard, name in todo:
            finished(_write_one(shard, str(out_path / name), compression, on_error), shard)
    else:
        with ProcessPoolExecutor(workers, mp_context=_mp_context(), initializer=_init_worker,
                                 initargs=(source, schema.to_json())) as pool:
            futures = {pool.submit(_write_one, shard, str(out_path / name), compression,
                                   on_error): shard for shard, name in todo}
            pending = set(futures)
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                    for future in sorted(done, key=lambda f: futures[f].index):
                        finished(future.result(), futures[future])
            except BaseException:
                for future in pending:
                    future.cancel()
                raise

    if on_error == "raise":
        failure = drop_incomplete(enumeration, plan, results, out_path, compression)
        if failure is not None:
            raise failure
    return finalize(source, enumeration, plan, results, out_path, schema=schema,
                    compression=compression, settings=settings,
                    plan_id=prepared.record["plan_id"], split_of=split_of)


def _manifest(source: Source, enumeration: Enumeration, plan: Plan,
              results: dict[str, ShardResult], schema: Schema, compression: str | None,
              settings: dict[str, Any], plan_id: str,
              split_of: Callable[[str], str]) -> Manifest:
    splits = {name: SplitInfo() for name in plan.splits}
    # Inputs known bad before planning, then ignored files, then what workers skipped
    # (shard order): a fixed order, whatever the worker count.
    for item, reason in enumeration.bad:
        splits[split_of(item.key)].skipped.append(SkippedInput(item.label, reason))
    for path, reason in enumeration.ignored:
        splits[split_of(path)].skipped.append(SkippedInput(path, f"ignored: {reason}"))
    shard_stats: dict[str, dict[str, int]] = {}
    split_stats: dict[str, dict[str, int]] = {}
    for shard in plan.shards:
        result = results[shard_name(shard.split, shard.index, shard.count, compression)]
        info = splits[shard.split]
        info.shards.append(ShardEntry(result.name, result.num_records, result.num_bytes,
                                      result.sha256))
        info.skipped.extend(SkippedInput(a, b) for a, b in result.skipped)
        if result.stats:
            shard_stats[result.name] = dict(sorted(result.stats.items()))
            totals = split_stats.setdefault(shard.split, {})
            for k, v in result.stats.items():
                totals[k] = totals.get(k, 0) + v
    settings = dict(settings)
    settings["plan_id"] = plan_id
    if split_stats:
        settings["stats"] = {k: dict(sorted(v.items())) for k, v in sorted(split_stats.items())}
        settings["shard_stats"] = shard_stats
    if getattr(source, "orphan_annotations", 0):
        settings["orphan_annotations"] = source.orphan_annotations
    class_names = list(source.class_names or [])
    names_of = getattr(source, "manifest_class_names", None)
    if names_of is not None:  # segmentation folders without a classes file: from the masks
        totals: dict[str, int] = {}
        for split_totals in split_stats.values():
            for k, v in split_totals.items():
                totals[k] = totals.get(k, 0) + v
        class_names = names_of(totals)
    return Manifest(schema=schema, splits=splits, class_names=class_names,
                    compression=compression, source=source.settings(), settings=settings)
