"""Pre-flight checklist: things to know before starting a long training run.

Each check is a function `(ctx) -> CheckResult(name, passed, detail)`; `run_checks`
runs them in order over a few batches of the configured pipeline. docs/check.md
says what each one checks, why, and with which tolerance.

`builder` is the hook that builds a pipeline (default `tfpipe.build_pipeline`);
tests pass a deliberately broken one to see the checks fail.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tfpipe.bench._check_core import (  # noqa: F401 - also this module's names
    STATEFUL_RULES, Builder, CheckResult, Context, _bits, _plain_count, _ram_budget_mb,
    _record_stats, check_epochs, check_memory, check_multiworker, diff_batches, take)


def default_builder(config: Any, split: str = "train", epoch: int = 0, worker: Any = None,
                    **kw: Any) -> Any:
    from tfpipe.pipeline import build_pipeline

    return build_pipeline(config, split=split, epoch=epoch, worker=worker, **kw)


# ---------------------------------------------------------------------------- checks

# Parallelism other than the configured one: sequential, and an odd count that a
# config rarely uses, with the order left to thread timing.
_SERIAL = ("pipeline.num_parallel_calls=1", "pipeline.deterministic=true")


def _other_parallelism(s: Any) -> list[str]:
    npc = 3 if s.num_parallel_calls != 3 else 5
    return [f"pipeline.num_parallel_calls={npc}", "pipeline.deterministic=false"]


def _samples(batches: list[dict[str, np.ndarray]]) -> dict[int, dict[str, bytes]]:
    """Global sample index -> each key's row, as bytes (batches need an 'index' key)."""
    out: dict[int, dict[str, bytes]] = {}
    for b in batches:
        idx = b["index"]
        for j, i in enumerate(idx.tolist()):
            out[int(i)] = {k: _bits(v[j]) for k, v in b.items()
                           if k != "index" and v.ndim and v.shape[0] == len(idx)}
    return out


def diff_samples(a: list[dict[str, np.ndarray]], b: list[dict[str, np.ndarray]],
                 ) -> tuple[str | None, int]:
    """Compare the samples both runs delivered, matched by global index.

    Returns (the first difference or None, how many samples were compared).
    """
    sa, sb = _samples(a), _samples(b)
    common = sorted(set(sa) & set(sb))
    for i in common:
        for key in sorted(set(sa[i]) | set(sb[i])):
            if sa[i].get(key) != sb[i].get(key):
                return f"sample {i} (global index): key {key!r} differs", len(common)
    return None, len(common)


def _without_index(batches: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    return [{k: v for k, v in b.items() if k != "index"} for b in batches]


def check_reproducible(ctx: Context) -> CheckResult:
    """Three ways a run stops being reproducible, each checked on its own:

    1. a stateful random op in any tf.data function (doctor's scan of the graph):
       with a global seed set two builds draw the same numbers, so comparing
       builds alone cannot see it, but the draws still depend on thread timing
       and on how far the iterator got (a resume differs);
    2. another build, with `num_parallel_calls=1, deterministic=true`: the
       same batches bit for bit (when not, a second build of the configured
       pipeline says whether builds differ or parallelism changes the batches);
    3. other parallelism with the order left to thread timing:
       `num_parallel_calls=3, deterministic=false` gives
       the same samples (matched by global index; batch ops such as mixup mix
       samples within a batch, so both sides are built without them there).
    """
    name = "reproducible"
    s = ctx.settings
    from tfpipe import doctor

    problems: list[str] = []
    try:
        found = [f for f in doctor.check(ctx.first_dataset()) if f.rule in STATEFUL_RULES]
    except (ValueError, TypeError) as exc:  # a graph doctor cannot read: say so, go on
        found = []
        problems.append(f"doctor could not read the pipeline graph ({str(exc)[:120]})")
    if found:
        ops = "; ".join(f"{f.message.split(':')[0]}" for f in found[:4])
        problems.append(f"stateful random ops in the pipeline graph (tfpipe doctor, "
                        f"{found[0].rule}): {ops}. Use the stateless twin "
                        "(tf.random.stateless_*, tf.image.stateless_*) with a seed from "
                        "tfpipe.seeds")
    first = ctx.first_batches()
    serial = take(ctx.build_indexed(ctx.variant(list(_SERIAL))), ctx.batches)
    problem = diff_batches(_without_index(first), _without_index(serial))
    if problem:
        # Which is it: builds that differ, or parallelism? A second build of the
        # configured pipeline tells them apart (only paid when something differs).
        again = diff_batches(first, take(ctx.build(), ctx.batches))
        if again:
            problems.append(f"two builds with seed {s.seed} differ: {again}")
        else:
            problems.append(f"num_parallel_calls=1 (deterministic) gives other batches than "
                            f"the configured parallelism: {problem}")
    # by sample, with the order left to thread timing
    no_batch_ops = [f"augment.batch.{op.name}.enabled=false" for op in s.active("batch")]
    other = _other_parallelism(s)
    ref = serial if not no_batch_ops else take(
        ctx.build_indexed(ctx.variant(list(_SERIAL) + no_batch_ops)), ctx.batches)
    loose = take(ctx.build_indexed(ctx.variant(other + no_batch_ops)), ctx.batches)
    compared = 0
    if ref and loose and "index" in ref[0] and "index" in loose[0]:
        problem, compared = diff_samples(ref, loose)
        if problem:
            problems.append(f"{', '.join(o.split('.', 1)[1] for o in other)} changes "
                            f"samples: {problem}")
        elif compared == 0:
            problems.append("num_parallel_calls=3, deterministic=false delivered none of the "
                            "samples of the sequential build in its first batches")
    else:  # no global index: the same multiset of samples is all one can ask
        problem = None if sorted(_image_hashes(ref)) == sorted(_image_hashes(loose)) else (
            "the images differ (no sample index to match them by)")
        if problem:
            problems.append(f"{', '.join(o.split('.', 1)[1] for o in other)}: {problem}")
    if problems:
        return CheckResult(name, False, "; ".join(problems) + ". See docs/check.md "
                           "(reproducible) and run `tfpipe doctor` on the pipeline.")
    by = f"{compared} samples matched by global index" if compared else "same images"
    return CheckResult(name, True, f"seed {s.seed}: no stateful random op (doctor); a build with "
                       f"num_parallel_calls=1 bit-identical over {len(first)} batches; "
                       f"{', '.join(o.split('.', 1)[1] for o in other)}: {by}"
                       + (" (batch ops off for that comparison)" if no_batch_ops else ""))


def _count(ds: Any) -> int:
    import tensorflow as tf

    ones = ds.map(lambda *e: tf.constant(1, tf.int64))
    return int(ones.reduce(tf.constant(0, tf.int64), lambda n, one: n + one).numpy())


def _missing_data_path(path: str) -> str | None:
    """Why `path` (a dataset directory, or a glob of shards) names no data; None when
    it does."""
    import glob

    import tensorflow as tf

    try:
        if tf.io.gfile.exists(path):
            return None
        if glob.has_magic(path):
            if tf.io.gfile.glob(path):
                return None
            return f"data.path {path} matches no file: check the pattern (--set data.path=GLOB)"
    except tf.errors.OpError:
        pass
    return (f"data.path {path} does not exist: give the directory `tfpipe convert` wrote "
            "(--set data.path=DIR)")


def check_records(ctx: Context) -> CheckResult:
    """Every record the manifest lists must come out of the pipeline's reader.

    Per split: count what the pipeline reads in one epoch (the `read` stage of
    `tfpipe.pipeline.build_stages`, nothing decoded, under on_error=skip so that
    damage is counted instead of raised) and compare with the manifest's count.
    When records are missing, each shard is read with a plain
    `tf.data.TFRecordDataset` and compared with its own manifest count, to name
    the damaged shards and where the damage starts. This check reads the data
    with tfpipe's own reader whatever `builder` the checklist was given.
    """
    name = "records vs manifest"
    s = ctx.settings
    from tfpipe.errors import ManifestError
    from tfpipe.pipeline import build_stages, framing_losses, reset_skipped_counts
    from tfpipe.records import load_manifest, scan_file

    missing = _missing_data_path(str(s.data_path))
    if missing:
        return CheckResult(name, False, missing)
    try:  # manifest.json, or the one a TFDS-prepared directory's metadata gives
        manifest = load_manifest(s.data_path)
    except ManifestError as exc:
        return CheckResult(name, True, f"no manifest to compare with ({str(exc)[:120]})",
                           skipped=True)
    cfg = ctx.variant(["pipeline.on_error=skip"])
    problems, seen = [], []
    base = Path(s.data_path)
    for split, info in manifest.splits.items():
        want = info.num_records
        if not info.shards:
            continue
        read = dict(build_stages(cfg, split=split, until="read"))["read"]
        reset_skipped_counts()  # framing_losses() then describes this read only
        got = _count(read)
        seen.append(f"{split} {got} of {want}")
        if got == want:
            continue
        if got > want:
            problems.append(f"split {split!r}: the pipeline read {got} records, the manifest "
                            f"lists {want}: the manifest is stale; rerun `tfpipe convert`")
            continue
        shards = []
        # what the reader itself reported for damaged shards (tfpipe.pipeline.framing_losses):
        # with the native walk it resynchronised, so only the damaged frames are lost
        losses = {os.path.realpath(k): v for k, v in framing_losses().items()}
        for entry in info.shards:
            path = str(base / entry.path)
            loss = losses.get(os.path.realpath(path))
            if loss is not None and loss.get("records_lost", 0) > 0:
                shards.append(
                    f"{entry.path}: {loss['records_lost']} of {entry.num_records} lost to "
                    f"framing damage at byte {loss['offset']:,} ({loss['recovered']} read "
                    "after it by resynchronising)")
                continue
            n, err = _plain_count(path, manifest.compression)
            if n >= entry.num_records:
                continue
            where = ""
            try:
                finding = next(iter(scan_file(path)), None)
                if finding is not None and finding.offset is not None:
                    where = f", {finding.kind} at byte {finding.offset:,} (record {finding.index})"
            except Exception:  # noqa: BLE001 - the count is the finding; the offset a bonus
                pass
            shards.append(f"{entry.path}: {entry.num_records - n} of {entry.num_records} "
                          f"missing (a plain tf.data read stops after {n}{where})")
        problems.append(
            f"split {split!r}: the pipeline delivers {got} of the {want} records the manifest "
            f"lists ({want - got} missing); " + ("; ".join(shards) if shards else
                                                  "no single shard reads short")
            + f". Run `tfpipe verify {s.data_path}` to see the damage and "
            f"`tfpipe verify {s.data_path} --salvage OUT` to recover the readable records")
    if problems:
        return CheckResult(name, False, "; ".join(problems))
    return CheckResult(name, True, "every record the manifest lists is read (" +
                       ", ".join(seen) + ")")


def check_dtypes_shapes(ctx: Context) -> CheckResult:
    from tfpipe.pipeline import task_of

    name = "dtypes and shapes"
    s = ctx.settings
    task = task_of(s)
    problems = []
    h, w = s.image_size
    batches = ctx.first_batches()
    if not batches:
        return CheckResult(name, False, "the pipeline produced no batch")
    want_image = np.dtype(s.output_dtype)
    for i, b in enumerate(batches):
        img = b.get("image")
        if img is None:
            problems.append(f"batch {i}: no 'image' key (keys: {sorted(b)})")
            continue
        if img.dtype != want_image:
            problems.append(f"batch {i}: image dtype {img.dtype}, configured {want_image}")
        n = img.shape[0]
        if list(img.shape[1:]) != [h, w, s.channels]:
            problems.append(f"batch {i}: image shape {list(img.shape)}, want [B, {h}, {w}, "
                            f"{s.channels}]")
        if s.drop_remainder and n != s.batch_size:
            problems.append(f"batch {i}: {n} images, pipeline.batch_size={s.batch_size}")
        if img.dtype.kind == "f" and not np.isfinite(img).all():
            problems.append(f"batch {i}: image has NaN/Inf")
        label = b.get("label")
        if not task.labels:
            pass
        elif label is None:
            problems.append(f"batch {i}: no 'label' key")
        elif s.one_hot:
            if label.dtype != np.float32 or label.ndim != 2 or label.shape[0] != n:
                problems.append(f"batch {i}: one-hot label {label.dtype}{list(label.shape)}, "
                                f"want float32 [{n}, num_classes]")
        elif label.dtype != np.int64 or list(label.shape) != [n]:
            problems.append(f"batch {i}: label {label.dtype}{list(label.shape)}, "
                            f"want int64 [{n}]")
        for key, shape in task.targets(s, n).items():  # the task's own targets
            if key not in b:
                problems.append(f"batch {i}: no {key!r} key")
            elif list(b[key].shape) != shape:
                problems.append(f"batch {i}: {key} shape {list(b[key].shape)}, want {shape}")
    if problems:
        return CheckResult(name, False, "; ".join(problems[:5]))
    b = batches[0]
    desc = ", ".join(f"{k} {v.dtype}{list(v.shape)}" for k, v in sorted(b.items()))
    return CheckResult(name, True, desc)


# records whose labels `check` reads (the whole split when it is smaller): ~1 s of
# protobuf decoding; a manifest's label range (tfpipe adopt) covers every record
LABEL_SCAN_LIMIT = 20_000


def scan_labels(s: Any, limit: int = LABEL_SCAN_LIMIT) -> tuple[list[str], int, int]:
    """Read the stored labels of the train split's first `limit` records:
    (problems naming shard, record, value, range and fix; records scanned; records
    in the split). Labels minus `data.label_offset` must lie in [0, num_classes)."""
    from tfpipe.pipeline import label_fix_text as fix_text
    from tfpipe.records import decode_example, iter_frames, open_source

    src = open_source(s.data_path, split="train")
    source = src.manifest.source if src.manifest is not None else {}
    stats = source.get("labels")
    derived = source.get("keys") if source.get("format") == "tfds" else None
    key = (s.keys or {}).get("label") or (derived or {}).get("label")
    key = key or (stats.get("key") if isinstance(stats, dict) else None)
    key = key or ("image/class/label" if "image/class/label" in src.schema else "label")
    n = s.num_classes or len(src.class_names) or None
    off = s.label_offset
    problems: list[str] = []
    lo = hi = None
    scanned = 0
    for f in src.files:
        for index, _, data in iter_frames(f, src.compression):
            if scanned >= limit:
                break
            scanned += 1
            for v in decode_example(data).get(key, []):
                lo = v if lo is None else min(lo, v)
                hi = v if hi is None else max(hi, v)
                if (v - off < 0 or (n is not None and v - off >= n)) and len(problems) < 3:
                    problems.append(f"record {index} of {f}: {key} {v}"
                                    + (f" (minus data.label_offset {off}: {v - off})" if off else "")
                                    + f" outside [0, {n if n else '?'})")
        if scanned >= limit:
            break
    if problems and lo is not None and hi is not None:
        problems.append(f"labels found: [{lo}, {hi}] in {scanned} records; "
                        f"{fix_text(lo, hi, n or hi + 1, off)}")
    return problems, scanned, src.num_records


def check_labels(ctx: Context) -> CheckResult:
    from tfpipe.pipeline import task_of

    name = "labels"
    s = ctx.settings
    task = task_of(s)
    if not task.labels:  # per-object / per-pixel classes: checked with the shapes
        return CheckResult(name, True, f"{task.name}: classes checked with shapes",
                           skipped=True)
    stored, scanned, total = scan_labels(s)
    if stored:  # before building: the batches would stop at the first such label
        return CheckResult(name, False, "; ".join(stored))
    mixing = [op.name for op in s.active("batch") if op.name in ("mixup", "cutmix")]
    problems = []
    for i, b in enumerate(ctx.first_batches()):
        y = b.get("label")
        if y is None:
            continue
        if y.ndim == 2:
            sums = y.astype(np.float64).sum(axis=1)
            bad = np.abs(sums - 1.0) > 1e-5
            if bad.any():
                j = int(np.argmax(bad))
                problems.append(f"batch {i}, row {j}: label sums to {sums[j]:.6f} (want 1 "
                                f"+- 1e-5)")
            if (y < -1e-6).any() or (y > 1 + 1e-6).any():
                problems.append(f"batch {i}: label values outside [0, 1]")
            if not mixing and not np.isin(y, (0.0, 1.0)).all():
                problems.append(f"batch {i}: one-hot labels are not 0/1 without mixup/cutmix")
        else:
            n = s.num_classes
            if (y < 0).any() or (n is not None and (y >= n).any()):
                problems.append(f"batch {i}: labels outside [0, {n}): {sorted(set(y.tolist()))[:8]}")
    if problems:
        return CheckResult(name, False, "; ".join(problems[:5]))
    if mixing:
        return CheckResult(name, True, f"{'+'.join(mixing)} on: every label row sums to 1 "
                           "(+- 1e-5), values in [0, 1]")
    return CheckResult(name, True, "labels valid (one-hot rows sum to 1 / indices in range)")


def _with_image_bytes(record: bytes, data: bytes) -> bytes:
    import tensorflow as tf

    ex = tf.train.Example.FromString(record)
    ex.features.feature["image/encoded"].bytes_list.value[:] = [data]
    return ex.SerializeToString()


def check_bad_input(ctx: Context) -> CheckResult:
    """Copy a few records into two temp shards: one undecodable image (shard 0) and one
    frame with a damaged payload CRC (shard 1); run under on_error=skip."""
    name = "bad input (on_error: skip)"
    s = ctx.settings
    from tfpipe.pipeline import reset_skipped_counts, skipped_counts
    from tfpipe.records import Manifest, ShardEntry, SplitInfo, iter_frames, open_source
    from tfpipe.records.writer import shard_name, write_shard

    src = open_source(s.data_path, split="train")
    records: list[bytes] = []
    for f in src.files:  # the copies are written uncompressed whatever the source
        for _, _, data in iter_frames(f):
            records.append(bytes(data))
            if len(records) >= 16:
                break
        if len(records) >= 16:
            break
    if len(records) < 6:
        return CheckResult(name, True, f"only {len(records)} records: too few to test",
                           skipped=True)
    half = len(records) // 2
    shard_a = records[:half]
    shard_a[1] = _with_image_bytes(shard_a[1], b"this is not an image")
    shard_b = records[half:]
    damaged = len(shard_b) // 2
    tmp = Path(tempfile.mkdtemp(prefix="tfpipe-check-"))
    try:
        entries = []
        for i, recs in enumerate((shard_a, shard_b)):
            info = write_shard(str(tmp / shard_name("train", i, 2, None)), recs)
            entries.append(ShardEntry.from_info(info, tmp))
        # Flip one payload byte of record `damaged` in shard 1: the length stays valid,
        # the data CRC does not (framing: 8 length + 4 crc, data, 4 crc per record).
        path_b = tmp / shard_name("train", 1, 2, None)
        raw = bytearray(path_b.read_bytes())
        offset = sum(16 + len(r) for r in shard_b[:damaged]) + 12 + len(shard_b[damaged]) // 2
        raw[offset] ^= 0xFF
        path_b.write_bytes(bytes(raw))
        manifest = src.manifest or Manifest(schema=src.schema)
        # the source travels too: keypoint names / skeleton live there (data.keypoints)
        Manifest(schema=manifest.schema, splits={"train": SplitInfo(shards=entries)},
                 class_names=list(manifest.class_names), source=dict(manifest.source)).save(tmp)
        # the damaged shard's sha256 in the manifest is the undamaged one, like real bit rot
        cfg = ctx.variant([f"data.path={tmp}", "pipeline.on_error=skip",
                           "pipeline.batch_size=1", "pipeline.drop_remainder=false",
                           "pipeline.shuffle_buffer=1"] + _num_classes_override(ctx, src))
        reset_skipped_counts()
        # The pipeline reports the two faults on stderr (file descriptor 2, from its
        # graph), naming these temporary shards: captured, so that the user does not
        # read them as damage in their own data, and checked here instead.
        with _fd2_captured() as lines:
            try:
                got = sum(b["image"].shape[0] for b in take(ctx.build(cfg), None))
            except Exception as exc:  # noqa: BLE001 - the check reports any death
                return CheckResult(name, False, f"the pipeline died: {type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0][:200]}")
        def about_ours(ln: str) -> bool:
            # tfpipe's lines name the temporary shards; TF's own reader warns about
            # the damaged frame without a path ("ignore_errors_dataset_op.cc] Error
            # raised with error message corrupted record at N", an absl line that
            # TF_CPP_MIN_LOG_LEVEL does not reach: tensorflow#100442)
            return str(tmp) in ln or "ignore_errors_dataset_op" in ln

        ours = [ln for ln in lines if about_ours(ln)]
        for ln in lines:  # anything else written meanwhile is not ours to hide
            if not about_ours(ln) and ln != _NOT_CAPTURED:
                print(ln, file=sys.stderr)
        unreported = [what for what, i in (("the undecodable image", 0), ("the damaged frame", 1))
                      if not any(shard_name("train", i, 2, None) in ln for ln in ours)
                      and _NOT_CAPTURED not in lines]
        counts = skipped_counts()
        counted = sum(counts.values())
        readable = len(records) - 2          # every record but the two damaged ones
        lost_after_frame = len(shard_b) - damaged - 1
        want_min = readable - lost_after_frame
        detail = (f"{len(records)} records in 2 shards, 1 undecodable image + 1 damaged frame: "
                  f"{got} delivered, {counted} counted as skipped")
        if counted < 1:
            return CheckResult(name, False, detail + "; the undecodable image was not counted "
                               "(tfpipe.pipeline.skipped_counts())")
        if unreported:
            return CheckResult(name, False, detail + f"; {' and '.join(unreported)} not "
                               "reported on stderr (on_error: skip logs each skip)")
        if _NOT_CAPTURED not in lines:
            detail += ("; the pipeline reported both, naming the synthetic shards (its "
                       "messages are kept out of this output)")
        if got < want_min:
            return CheckResult(name, False, detail + f"; expected at least {want_min}")
        if got < readable:
            detail += (f"; the {readable - got} readable records after the damaged frame were "
                       "dropped with the rest of that shard (resynchronising needs the "
                       "native library; `tfpipe verify --salvage` recovers them)")
        return CheckResult(name, True, detail)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_NOT_CAPTURED = "\0(stderr not capturable)"


@contextlib.contextmanager
def _fd2_captured() -> Iterator[list[str]]:
    """The lines written to file descriptor 2 inside the block (the graph's tf.print
    writes there from C++, below Python's sys.stderr), filled in on exit."""
    lines: list[str] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no file descriptor 2: nothing to capture
        lines.append(_NOT_CAPTURED)
        yield lines
        return
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield lines
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                sink.seek(0)
                lines.extend(sink.read().decode("utf-8", "replace").splitlines())
    finally:
        os.close(saved)


def _num_classes_override(ctx: Context, src: Any) -> list[str]:
    n = ctx.settings.num_classes
    if n is None and src.manifest is not None and src.manifest.class_names:
        n = len(src.manifest.class_names)
    return [f"data.num_classes={n}"] if n else []


def _image_hashes(batches: list[dict[str, np.ndarray]]) -> list[bytes]:
    import hashlib

    return [hashlib.sha1(_bits(img)).digest() for b in batches for img in b["image"]]


def check_workers(ctx: Context) -> CheckResult:
    """Worker 0/2 and 1/2 over one epoch with augmentation off: no image delivered
    to both (hashes), together exactly the single-worker multiset, and disjoint
    global sample indices (the input of every sample seed)."""
    name = "two workers"
    plain = ctx.variant(["augment.enable_rate=0", "pipeline.drop_remainder=false"])
    try:
        try:
            w0 = take(ctx.build(plain, worker=(0, 2), keep_index=True), None)
            w1 = take(ctx.build(plain, worker=(1, 2), keep_index=True), None)
        except TypeError:  # a builder without keep_index: content checks only
            w0 = take(ctx.build(plain, worker=(0, 2)), None)
            w1 = take(ctx.build(plain, worker=(1, 2)), None)
        everything = take(ctx.build(plain), None)
    except Exception as exc:  # noqa: BLE001
        return CheckResult(name, False, f"building per-worker pipelines failed: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    h0, h1, hall = _image_hashes(w0), _image_hashes(w1), _image_hashes(everything)
    shared = set(h0) & set(h1)
    problems = []
    if shared:
        problems.append(f"{len(shared)} images delivered to both workers")
    if sorted(h0 + h1) != sorted(hall):
        problems.append(f"workers together gave {len(h0) + len(h1)} images, one worker alone "
                        f"{len(hall)} (not the same multiset)")
    seed_note = "; (no sample indices: seed disjointness not checked)"
    if w0 and w1 and "index" in w0[0]:
        i0 = {int(i) for x in w0 for i in x["index"]}
        i1 = {int(i) for x in w1 for i in x["index"]}
        if i0 & i1:
            problems.append(f"sample indices (seed inputs) shared: {sorted(i0 & i1)[:5]}")
        seed_note = "; global sample indices (seed inputs) disjoint"
    if problems:
        return CheckResult(name, False, "; ".join(problems))
    balance = ""
    if min(len(h0), len(h1)) and max(len(h0), len(h1)) > 1.1 * min(len(h0), len(h1)):
        # Not wrong, but synchronous multi-worker training stops (or hangs) when the
        # smallest worker runs out: worth knowing before a long run.
        balance = (f"; unbalanced ({len(h0)} vs {len(h1)}): whole shards go to workers, so "
                   "write at least 10 shards per worker for an even split")
    return CheckResult(name, True, f"worker 0/2: {len(h0)} images, 1/2: {len(h1)}, disjoint, "
                       f"together = all {len(hall)} (augmentation off){seed_note}{balance}")


def check_enable_rate(ctx: Context) -> CheckResult:
    """Batches that differ from the same pipeline with augmentation off are the augmented
    ones; their fraction must be within 3 sigma (binomial) + 1 batch of enable_rate."""
    name = "enable_rate"
    s = ctx.settings
    rate = s.enable_rate
    ops = s.active("geometry") + s.active("pixel") + s.active("batch")
    if not ops:
        return CheckResult(name, True, "no augmentation configured", skipped=True)
    # Batches of one sample: the most coin draws per epoch, and a batch is then
    # augmented exactly when its sample is, whether the pipeline decides per batch
    # or per sample. Batch ops alone (mixup/cutmix) need two samples to mix. A rate
    # of exactly 0 or 1 has no variance, so a few batches decide it; other rates
    # get up to 48 draws.
    per_sample = bool(s.active("geometry") + s.active("pixel"))
    small = [f"pipeline.batch_size={1 if per_sample else 2}", "pipeline.drop_remainder=true"]
    on = ctx.variant(small)
    off = ctx.variant(small + ["augment.enable_rate=0"])
    want = 8 if rate in (0.0, 1.0) else 48
    augmented = total = 0
    epoch = 0
    deadline = time.monotonic() + 120
    while total < want and epoch < 6 and time.monotonic() < deadline:
        a = take(ctx.build(on, epoch=epoch), want - total)
        b = take(ctx.build(off, epoch=epoch), len(a))
        if not a:
            break
        for x, y in zip(a, b):
            total += 1
            augmented += _bits(x["image"]) != _bits(y["image"])
        epoch += 1
    if total == 0:
        return CheckResult(name, False, "no batches")
    expected = rate * total
    tol = 3 * math.sqrt(total * rate * (1 - rate)) + 1
    detail = (f"{augmented} of {total} batches augmented, enable_rate {rate} expects "
              f"{expected:.1f} +- {tol:.1f} (3 sigma binomial + 1)")
    return CheckResult(name, abs(augmented - expected) <= tol, detail)


CHECKS: dict[str, Callable[[Context], CheckResult]] = {
    "reproducible": check_reproducible,
    "epochs": check_epochs,
    "dtypes": check_dtypes_shapes,
    "labels": check_labels,
    "memory": check_memory,
    "records": check_records,
    "bad_input": check_bad_input,
    "workers": check_workers,
    "enable_rate": check_enable_rate,
    "multiworker": check_multiworker,
}


# checks that read no batch of the train pipeline
_NO_BATCHES = ("records", "multiworker", "masks")


def _no_batch(ctx: Context) -> str:
    """Why a train epoch had no batch, with the records counted (no manifest)."""
    from tfpipe.records import open_source

    s = ctx.settings
    try:
        n = open_source(s.data_path, split="train").num_records  # framing walk, no decode
    except Exception:  # noqa: BLE001 - the count is a bonus; the finding stands
        return (f"the train pipeline produced no batch: with pipeline.drop_remainder "
                f"{s.drop_remainder}, fewer records than pipeline.batch_size: {s.batch_size} "
                "give none; set a smaller pipeline.batch_size or pipeline.drop_remainder: false")
    if s.drop_remainder and n < s.batch_size:
        return (f"the train pipeline produced no batch: pipeline.batch_size: {s.batch_size} is "
                f"more than the {n} records of split 'train' (counted: no manifest), and "
                f"pipeline.drop_remainder is true; set pipeline.batch_size to at most {n} or "
                "pipeline.drop_remainder: false")
    return (f"the train pipeline produced no batch from {n} records (pipeline.batch_size: "
            f"{s.batch_size}); is every record skipped as bad? run `tfpipe verify`")


def _preflight(ctx: Context, names: Sequence[str]) -> None:
    """One error, before any check, for a train epoch of no batch (each check would
    otherwise FAIL on it, or pass vacuously over 0 batches)."""
    from tfpipe.errors import ConfigError
    from tfpipe.pipeline import batches_per_pass

    if all(x in _NO_BATCHES for x in names):  # e.g. --only records: the data, not batches
        return
    try:  # with a manifest: ConfigError naming pipeline.batch_size and the count
        n = batches_per_pass(ctx.config)
    except ConfigError:
        raise
    except Exception:  # noqa: BLE001 - a missing or damaged dataset: the checks report it
        return
    if n is not None:
        return
    try:
        empty = not ctx.first_batches()
    except Exception:  # noqa: BLE001 - a pipeline that fails: the checks report it
        return
    if empty:
        raise ConfigError(_no_batch(ctx))


def run_checks(config: Any, overrides: Sequence[str] = (), *, batches: int = 3,
               builder: Builder | None = None, only: Sequence[str] | None = None,
               progress: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """Run the checklist (or the `only` subset of `CHECKS`) on `config`."""
    from tfpipe.bench._build import resolve_config
    from tfpipe.pipeline import settings

    cfg = resolve_config(config, overrides)
    s = settings(cfg)
    if not s.data_path:
        raise ValueError("data.path is not set: give the converted dataset, e.g. --set data.path=DIR")
    from tfpipe.bench._check_segment import segmentation_checks

    segment_checks = segmentation_checks(CHECKS)
    from tfpipe.bench._check_tabular import CHECKS as TABULAR_CHECKS

    # a table's checklist asks the same questions of rows, plus what only a table has;
    # segmentation's knows masks (range, ignore share, alignment)
    from tfpipe.pipeline import task_of

    checks = (TABULAR_CHECKS if s.features is not None else
              segment_checks if "mask" in task_of(s).targets(s, 1) else CHECKS)
    known = list(dict.fromkeys([*CHECKS, *segment_checks, *TABULAR_CHECKS]))
    names = list(only) if only else list(checks)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; allowed: {known}")
    ctx = Context(cfg, s, builder or default_builder, batches=batches)
    _preflight(ctx, names)
    results = []
    for n in names:
        if n not in checks:
            only_for = ("segmentation only (data.task: segmentation)" if n in segment_checks
                        else "tables only (a features: section)")
            results.append(CheckResult(n, True, only_for, skipped=True))
            continue
        try:
            r = checks[n](ctx)
        except Exception as exc:  # noqa: BLE001 - one broken check must not hide the others
            r = CheckResult(n, False, f"check raised {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0][:300] if str(exc) else ''}")
        results.append(r)
        if progress:
            progress(r)
    return results
