"""`tfpipe check` for a tabular config (a `features:` section; docs/check.md, "Tables").

The image checklist swaps image bytes, counts augmented images and compares
image hashes; a table has none of these. Here the same questions are asked of
rows: the batches are `(features, label)` (taken as one dict, `label` beside the
outputs), rows are compared by the bytes of every output at that row, and what
only a table has is checked from the statistics file the transforms are built from.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from typing import Any

import numpy as np

from tfpipe.bench._check_core import (STATEFUL_RULES, CheckResult, Context, _bits,
                                     _plain_count, check_epochs, check_memory,
                                     check_multiworker, diff_batches, take)

_SERIAL = ["pipeline.num_parallel_calls=1", "pipeline.deterministic=true"]
# every row of a split, in file order: what the counting checks read
_WHOLE = ["pipeline.drop_remainder=false", "pipeline.shuffle_buffer=0"]


def row_hashes(batches: list[dict[str, np.ndarray]]) -> list[bytes]:
    """One digest per row: every output's bytes at that row, keys in order."""
    out = []
    for b in batches:
        keys = sorted(b)
        for j in range(len(b["label"])):
            h = hashlib.sha1()
            for k in keys:
                h.update(k.encode() + b"\0" + _bits(b[k][j]))
            out.append(h.digest())
    return out


def check_reproducible(ctx: Context) -> CheckResult:
    """No stateful random op (doctor); a build with num_parallel_calls=1 gives the
    same batches bit for bit; with deterministic=false every batch holds the same
    rows (docs/tabular.md: only the order of batches may change)."""
    name = "reproducible"
    from tfpipe import doctor

    problems = []
    found = [f for f in doctor.check(ctx.first_dataset()) if f.rule in STATEFUL_RULES]
    if found:
        problems.append(f"stateful random ops in the pipeline graph ({found[0].rule}): "
                        f"{found[0].message.split(':')[0]}")
    first = ctx.first_batches()
    serial = take(ctx.build(ctx.variant(_SERIAL)), ctx.batches)
    problem = diff_batches(first, serial)
    if problem:
        problems.append(f"num_parallel_calls=1 gives other batches: {problem}")
    npc = 3 if ctx.settings.num_parallel_calls != 3 else 5
    loose = take(ctx.build(ctx.variant([f"pipeline.num_parallel_calls={npc}",
                                        "pipeline.deterministic=false"])), ctx.batches)
    # any order of batches, never another batch: compare each batch's rows as a set
    want = sorted(sorted(row_hashes([b])) for b in first)
    got = sorted(sorted(row_hashes([b])) for b in loose)
    if want != got:
        problems.append(f"num_parallel_calls={npc}, deterministic=false delivers batches "
                        "holding other rows")
    if problems:
        return CheckResult(name, False, "; ".join(problems) + ". See docs/check.md.")
    return CheckResult(name, True, f"seed {ctx.settings.seed}: no stateful random op; "
                       f"num_parallel_calls=1 bit-identical over {len(first)} batches; "
                       f"num_parallel_calls={npc}, deterministic=false: the same rows per batch")


def check_dtypes(ctx: Context) -> CheckResult:
    """Every output has the dtype and shape `output_info` declares (what a model's
    `keras.Input` is built from), the label one value per row, floats finite."""
    name = "dtypes and shapes"
    from tfpipe.pipeline import tabular_transforms

    s = ctx.settings
    info = tabular_transforms(ctx.config).output_info
    batches = ctx.first_batches()
    if not batches:
        return CheckResult(name, False, "the pipeline produced no batch")
    problems = []
    for i, b in enumerate(batches):
        n = len(b["label"])
        if b["label"].shape != (n,):
            problems.append(f"batch {i}: label shape {list(b['label'].shape)}, want [{n}]")
        if s.drop_remainder and n != s.batch_size:
            problems.append(f"batch {i}: {n} rows, pipeline.batch_size={s.batch_size}")
        for out, spec in info.items():
            v = b.get(out)
            if v is None:
                problems.append(f"batch {i}: no output {out!r}")
                continue
            want = [n, *spec.shape]
            if v.dtype != np.dtype(spec.dtype) or list(v.shape) != want:
                problems.append(f"batch {i}: {out} {v.dtype}{list(v.shape)}, declared "
                                f"{spec.dtype}{want}")
            elif v.dtype.kind == "f" and not np.isfinite(v).all():
                rows = sorted({int(r) for r in np.argwhere(~np.isfinite(v))[:, 0]})[:5]
                problems.append(f"batch {i}: {out} has NaN/inf at rows {rows}")
            elif spec.cardinality and ((v < 0).any() or (v >= spec.cardinality).any()):
                problems.append(f"batch {i}: {out} indices outside [0, {spec.cardinality})")
    if problems:
        return CheckResult(name, False, "; ".join(problems[:5]))
    b = batches[0]
    return CheckResult(name, True, f"{len(info)} outputs as declared, label "
                       f"{b['label'].dtype}[{len(b['label'])}]: " + ", ".join(
                           f"{k} {v.dtype}{list(v.shape)}" for k, v in sorted(b.items())))


def check_label(ctx: Context) -> CheckResult:
    """The label column: in the statistics, never null (a null label has no target),
    and what its values are (the positive share of a 0/1 label)."""
    name = "label"
    from tfpipe.pipeline import tabular_source

    src = tabular_source(ctx.config)
    if src.statistics is None:
        return CheckResult(name, False, f"no statistics to read the label from: {src.problem}")
    col = src.statistics.columns.get(src.label)
    if col is None:
        return CheckResult(name, False, f"features.label {src.label!r} is not a column of "
                           f"{src.statistics_path}; columns: {', '.join(src.statistics.columns)}")
    stats = col.numeric or col.categorical
    total = stats.count + stats.missing
    share = stats.count / total if total else 0.0
    if stats.missing:
        return CheckResult(name, False, f"label {src.label!r}: {stats.missing} of {total} train "
                           f"rows are null (non-null share {share:.4f}); drop them at "
                           "convert (tfpipe convert --label-column) or fill them in the table")
    ys = np.concatenate([b["label"] for b in ctx.first_batches()]) if ctx.first_batches() \
        else np.zeros(0)
    values = Counter(ys.tolist())
    if ys.size and ys.dtype.kind == "f" and not np.isfinite(ys).all():
        return CheckResult(name, False, f"label {src.label!r}: NaN/inf in the first batches")
    what = (f"positive share {values.get(1, 0) / ys.size:.3f} in the first {ys.size} rows"
            if set(values) <= {0, 1} and ys.size else
            f"{len(values)} distinct values in the first {ys.size} rows")
    return CheckResult(name, True, f"label {src.label!r} ({col.dtype}): non-null in all "
                       f"{stats.count:,} train rows (share 1.0); {what}")


def check_statistics(ctx: Context) -> CheckResult:
    """The statistics file: present, the one the manifest recorded (same SHA-256),
    computed on the train split, holding every column the transforms read."""
    name = "statistics"
    from tfpipe.pipeline import tabular_source

    src = tabular_source(ctx.config)
    if src.statistics is None:
        return CheckResult(name, False, src.problem or f"{src.statistics_path}: unreadable")
    st = src.statistics
    problems = []
    if src.manifest_sha256 is None:
        note = "the manifest records no statistics hash (converted without --stats?)"
    elif src.manifest_sha256 != st.sha256:
        problems.append(f"{src.statistics_path}: sha256 {st.sha256[:12]}, the dataset's "
                        f"manifest records {src.manifest_sha256[:12]}: the statistics are of "
                        "another conversion; recompute them (tfpipe convert ... --stats) or "
                        "point features.statistics at the right file")
        note = ""
    else:
        note = f"sha256 {st.sha256[:12]} as the manifest records"
    if st.split != "train":
        problems.append(f"{src.statistics_path}: computed on split {st.split!r}, not 'train'")
    need = sorted({c for spec in src.specs for c in spec.columns} | {src.label})
    absent = [c for c in need if c not in st.columns]
    if absent:
        problems.append(f"{src.statistics_path}: no statistics for {', '.join(absent)}")
    if problems:
        return CheckResult(name, False, "; ".join(problems))
    return CheckResult(name, True, f"{src.statistics_path}: {st.num_rows:,} train rows, "
                       f"{len(need)} columns the config reads; {note}")


def check_vocabulary(ctx: Context) -> CheckResult:
    """Per vocabulary / embedding_id output: the share of train values its kept
    vocabulary covers (the rest share the OOV indices). Fails when a vocabulary
    keeps no value (min_frequency above every count); low coverage is reported."""
    name = "vocabulary coverage"
    from tfpipe.pipeline import tabular_source

    src = tabular_source(ctx.config)
    lookups = [s for s in src.specs if s.kind in ("vocabulary", "embedding_id")]
    if not lookups:
        return CheckResult(name, True, "no vocabulary or embedding_id transform", skipped=True)
    if src.statistics is None:
        return CheckResult(name, False, f"no statistics: {src.problem}")
    parts, problems = [], []
    for spec in lookups:
        cat = src.statistics.columns[spec.columns[0]].categorical
        top_k = spec.params.get("top_k")
        min_freq = spec.params.get("min_frequency", 1)
        kept = [f for _, f in cat.vocabulary if f >= min_freq][:top_k]
        cover = sum(kept) / cat.count if cat.count else 0.0
        parts.append(f"{spec.name} {len(kept):,} values cover {cover:.1%}")
        if not kept:
            problems.append(f"{spec.name}: keeps no value of {spec.columns[0]!r} "
                            f"(min_frequency {min_freq} above every count): every row is OOV")
    if problems:
        return CheckResult(name, False, "; ".join(problems))
    low = [p for p in parts if float(p.rsplit(" ", 1)[1].rstrip("%")) < 50]
    tail = (f" (under half: {'; '.join(low)}: most rows share the OOV index; a larger "
            "top_k, or hash, may serve better)" if low else "")
    return CheckResult(name, True, "; ".join(parts) + tail)


def _rows(ctx: Context, split: str, worker: Any = None) -> list[bytes]:
    return row_hashes(take(ctx.build(ctx.variant(_WHOLE), split=split, worker=worker), None))


def check_records(ctx: Context) -> CheckResult:
    """Every row the manifest lists comes out of one pass of each split (parsed and
    transformed: a table's rows cost little), compared with the manifest's counts;
    a short split names the shards a plain tf.data read finds short."""
    name = "records vs manifest"
    from tfpipe.errors import ManifestError
    from tfpipe.records import Manifest

    s = ctx.settings
    try:
        manifest = Manifest.load(s.data_path)
    except ManifestError as exc:
        return CheckResult(name, True, f"no manifest to compare with ({str(exc)[:120]})",
                           skipped=True)
    seen, problems = [], []
    for split, info in manifest.splits.items():
        if not info.shards:
            continue
        got, want = len(_rows(ctx, split)), info.num_records
        seen.append(f"{split} {got} of {want}")
        if got != want:
            short = []
            for entry in info.shards:
                n, err = _plain_count(os.path.join(str(s.data_path), entry.path),
                                      manifest.compression)
                if n < entry.num_records:
                    short.append(f"{entry.path}: {n} of {entry.num_records}"
                                 + (f" ({err})" if err else ""))
            problems.append(f"split {split!r}: the pipeline delivers {got} of the {want} rows "
                            "the manifest lists" + (f"; short shards: {'; '.join(short)}"
                                                     if short else "")
                            + f". Run `tfpipe verify {s.data_path}`")
    if problems:
        return CheckResult(name, False, "; ".join(problems))
    return CheckResult(name, True, "every row the manifest lists is delivered (" +
                       ", ".join(seen) + ")")


def check_workers(ctx: Context) -> CheckResult:
    """Worker 0/2 and 1/2 over one epoch, unshuffled: together exactly the rows of
    one worker alone (as a multiset: a table may hold equal rows)."""
    name = "two workers"
    try:
        r0, r1 = _rows(ctx, "train", (0, 2)), _rows(ctx, "train", (1, 2))
        everything = _rows(ctx, "train")
    except Exception as exc:  # noqa: BLE001
        return CheckResult(name, False, f"building per-worker pipelines failed: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    if sorted(r0 + r1) != sorted(everything):
        extra = Counter(r0 + r1) - Counter(everything)
        lost = Counter(everything) - Counter(r0 + r1)
        return CheckResult(name, False, f"workers together gave {len(r0) + len(r1)} rows, one "
                           f"worker alone {len(everything)}: {sum(extra.values())} delivered "
                           f"twice or extra, {sum(lost.values())} never")
    return CheckResult(name, True, f"worker 0/2: {len(r0)} rows, 1/2: {len(r1)}, together = "
                       f"all {len(everything)}")


def _not_for_tables(name: str, why: str) -> Any:
    return lambda ctx: CheckResult(name, True, why, skipped=True)


CHECKS = {
    "reproducible": check_reproducible,
    "epochs": check_epochs,
    "dtypes": check_dtypes,
    "labels": check_label,
    "statistics": check_statistics,
    "vocabulary": check_vocabulary,
    "memory": check_memory,
    "records": check_records,
    "bad_input": _not_for_tables("bad input (on_error: skip)", "image records only (the "
                                 "self-test swaps image bytes); a table's damaged records "
                                 "follow pipeline.on_error (docs/tabular.md, Pipeline)"),
    "workers": check_workers,
    "enable_rate": _not_for_tables("enable_rate", "a table has no augmentation"),
    "multiworker": check_multiworker,
}
