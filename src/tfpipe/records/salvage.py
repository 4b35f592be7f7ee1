"""`salvage`: copy every intact record of a damaged shard into a new shard.

Unlike ``tf.data``'s ``ignore_errors()``, which stops reading a file at its
first bad record, salvage walks past damage: a record whose data CRC fails
is skipped by its (CRC-checked) length; after a bad length it scans forward
byte by byte for the next offset where a length, its CRC and the data CRC all
validate, and resumes there. The report lists each lost byte range.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from tfpipe.records.framing import Finding, _Buffer, _Record, detect_compression, walk
from tfpipe.records.writer import ShardInfo, write_shard


@dataclass
class SalvageReport:
    """What was kept and what was lost.

    ``lost`` holds one finding per damaged range (``offset``..``end``), with
    ``records_lost`` when the count is knowable (a bad data CRC loses exactly
    one record; garbage skipped by resynchronisation hides how many frames it
    held). Offsets of GZIP inputs are in the decompressed stream.
    """

    source: str
    out: ShardInfo
    records_kept: int
    lost: list[Finding] = field(default_factory=list)

    @property
    def bytes_lost(self) -> int:
        return sum((f.end or 0) - (f.offset or 0) for f in self.lost
                   if f.end is not None and f.offset is not None)

    @property
    def records_lost_known(self) -> int:
        return sum(f.records_lost or 0 for f in self.lost)

    @property
    def records_lost_exact(self) -> bool:
        """True when every lost range has a known record count."""
        return all(f.records_lost is not None for f in self.lost)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "out": self.out.to_dict(),
                "records_kept": self.records_kept, "bytes_lost": self.bytes_lost,
                "records_lost_known": self.records_lost_known,
                "records_lost_exact": self.records_lost_exact,
                "lost": [f.to_dict() for f in self.lost]}


def salvage(shard_path: str | os.PathLike[str], out_path: str | os.PathLike[str],
            compression: str | None = "auto") -> SalvageReport:
    """Write every intact record of ``shard_path`` to ``out_path`` (atomically).

    The input's compression is detected (suffix or magic bytes); the output is
    GZIP when ``out_path`` ends in ``.gz``, plain otherwise.
    """
    src = os.fspath(shard_path)
    out = os.fspath(out_path)
    if os.path.abspath(src) == os.path.abspath(out):
        raise ValueError(f"salvage would overwrite its input {src}; choose another out_path")
    comp = detect_compression(src, compression)
    lost: list[Finding] = []
    with _Buffer(src, comp) as buf:
        def records() -> Any:
            for item in walk(buf):
                if isinstance(item, _Record):
                    yield bytes(buf.mm[item.start:item.start + item.length])
                elif item.kind != "empty":
                    lost.append(item)

        info = write_shard(out, records(), "gzip" if out.endswith(".gz") else None)
    return SalvageReport(source=src, out=info, records_kept=info.num_records, lost=lost)


# What `salvage_dataset` repairs: damaged frames, missing shards, and shards the
# manifest describes wrongly (their records are rewritten or linked, the new
# manifest says what they hold). Bad images / boxes / labels and leftover files it
# cannot repair; an unreadable manifest leaves it without a schema.
SALVAGEABLE = ("missing-file", "size-mismatch", "checksum-mismatch", "count-mismatch")


@dataclass
class DatasetSalvageReport:
    """What `salvage_dataset` did: the verify report it acted on, one
    `SalvageReport` per damaged shard (rewritten), the intact shards linked or
    copied (``copied``: source -> output path) and the shards that were missing
    (``missing``: path -> records the manifest listed). ``records_lost`` uses the
    manifest's count where there is one (kept vs listed settles what the bytes
    cannot)."""

    source: str
    out_dir: str
    verify: Any  # VerifyReport
    shards: list[SalvageReport] = field(default_factory=list)
    manifest_path: str | None = None
    copied: dict[str, str] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)

    @property
    def intact(self) -> bool:
        """True when there was nothing to repair (nothing was written)."""
        return not self.shards and not self.copied and not self.missing

    def records_lost(self, s: SalvageReport) -> tuple[int, bool]:
        """(records lost, exact?) for one salvaged shard."""
        expected = self.verify.expected_records.get(s.source)
        if expected is not None:
            return expected - s.records_kept, True
        return s.records_lost_known, s.records_lost_exact

    def to_dict(self) -> dict[str, Any]:
        shards = []
        for s in self.shards:
            d = s.to_dict()
            expected = self.verify.expected_records.get(s.source)
            d["records_lost_per_manifest"] = None if expected is None else expected - s.records_kept
            shards.append(d)
        return {"source": self.source, "out_dir": self.out_dir, "intact": self.intact,
                "manifest": self.manifest_path, "salvaged": shards, "copied": self.copied,
                "missing": self.missing}


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link `src` as `dst` (no second copy of the bytes), else copy it."""
    import shutil

    if os.path.lexists(dst):
        os.remove(dst)
    try:
        os.link(src, dst)
    except OSError:  # another file system, or links not allowed
        shutil.copyfile(src, dst)


def salvage_dataset(path: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                    report: Any = None, deep: bool = False) -> DatasetSalvageReport:
    """Write a complete, readable copy of a dataset whose shards are damaged,
    missing or described wrongly by its manifest.

    ``report`` is a `verify` report of ``path`` (made here when not given). For
    a dataset (manifest.json), every split goes to ``out_dir``: each damaged
    shard rewritten with every intact record (`salvage`), each intact shard
    hard-linked (or copied), a missing shard left out; the shards are named
    ``{split}-{i:05d}-of-{n:05d}`` again over those written, and
    ``out_dir/manifest.json`` lists them with their true counts, sizes and
    sha256 (schema, class names, compression and the converter's skipped inputs
    kept; what salvage lost added under each split's ``skipped``;
    ``source.kind`` is ``salvage``). `build_pipeline` reads it like any converted
    dataset. Without a manifest (a shard, a glob, a directory of shards), the
    damaged shards are rewritten and the intact ones linked under their names.
    A dataset with nothing to repair writes nothing (``.intact``).
    """
    from tfpipe.records.manifest import Manifest, ShardEntry, SkippedInput, SplitInfo
    from tfpipe.records.verify import verify
    from tfpipe.records.writer import shard_name

    src = os.fspath(path)
    out = os.fspath(out_dir)
    if report is None:
        report = verify(src, deep=deep)
    result = DatasetSalvageReport(source=src, out_dir=out, verify=report)
    damaged = set(report.damaged_files)
    if not damaged and not any(f.kind in SALVAGEABLE for f in report.findings):
        return result
    base = src if os.path.isdir(src) else os.path.dirname(src) or "."
    if os.path.isdir(out) and os.path.samefile(out, base):
        raise ValueError(f"salvage would write into the dataset it reads ({src}); "
                         "choose another output directory")
    os.makedirs(out, exist_ok=True)
    if not report.manifest:
        for f in sorted(report.file_records):
            dst = os.path.join(out, os.path.basename(f))
            if f in damaged:
                result.shards.append(salvage(f, dst))
            else:
                _link_or_copy(f, dst)
                result.copied[f] = dst
        return result
    manifest = Manifest.load(src)
    splits: dict[str, SplitInfo] = {}
    for split in sorted(manifest.splits):
        listed = manifest.splits[split]
        info = SplitInfo(skipped=list(listed.skipped))
        paths = manifest.shard_paths(base, split)
        present = [(e, f) for e, f in zip(listed.shards, paths) if os.path.isfile(f)]
        for i, (entry, f) in enumerate(present):
            dst = os.path.join(out, shard_name(split, i, len(present), manifest.compression))
            if f in damaged:
                s = salvage(f, dst)
                result.shards.append(s)
                info.shards.append(ShardEntry.from_info(s.out, out))
                lost, _ = result.records_lost(s)
                for finding in s.lost:
                    info.skipped.append(SkippedInput(
                        f"{os.path.basename(f)}@{finding.offset}",
                        f"{finding.kind}: bytes [{finding.offset}, {finding.end}) lost by "
                        f"salvage ({finding.message})"))
                if not s.lost and lost:
                    info.skipped.append(SkippedInput(os.path.basename(f),
                                                     f"{lost} records lost by salvage"))
                continue
            _link_or_copy(f, dst)
            result.copied[f] = dst
            # the file's own count and hash, as verify found them (not the manifest's)
            info.shards.append(ShardEntry(os.path.basename(dst), report.file_records[f],
                                          os.path.getsize(dst), report.file_sha256[f]))
        for entry, f in zip(listed.shards, paths):
            if not os.path.isfile(f):
                result.missing[f] = entry.num_records
                info.skipped.append(SkippedInput(
                    os.path.basename(f), f"shard missing: its {entry.num_records} records "
                    "(as the manifest listed them) lost; salvage left it out"))
        splits[split] = info
    salvaged = Manifest(schema=manifest.schema, splits=splits,
                        class_names=list(manifest.class_names),
                        compression=manifest.compression,
                        schema_version=manifest.schema_version,
                        source={"kind": "salvage", "salvaged_from": os.path.abspath(src),
                                "original_source": manifest.source},
                        settings={k: v for k, v in manifest.settings.items()
                                  if k != "stats"})  # per-split counts of the original
    result.manifest_path = salvaged.save(out)
    return result
