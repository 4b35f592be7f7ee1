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


@dataclass
class DatasetSalvageReport:
    """What `salvage_dataset` did: the verify report it acted on and one
    `SalvageReport` per damaged shard. ``records_lost`` uses the manifest's
    count where there is one (kept vs listed settles what the bytes cannot)."""

    source: str
    out_dir: str
    verify: Any  # VerifyReport
    shards: list[SalvageReport] = field(default_factory=list)
    manifest_path: str | None = None

    @property
    def intact(self) -> bool:
        """True when no shard had framing damage (nothing was written)."""
        return not self.shards

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
                "manifest": self.manifest_path, "salvaged": shards}


def salvage_dataset(path: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                    report: Any = None, deep: bool = False) -> DatasetSalvageReport:
    """Salvage every shard of a dataset (or a lone shard) whose framing is damaged.

    ``report`` is a `verify` report of ``path`` (made here when not given).
    Each damaged shard is rewritten under ``out_dir`` with the same name and
    every intact record; for a dataset, ``out_dir/manifest.json`` lists those
    shards (same schema, class names and compression; the lost byte ranges
    under each split's ``skipped``) so ``verify(out_dir)`` checks them. An
    intact dataset writes nothing (``.intact``).
    """
    from tfpipe.records.manifest import Manifest, ShardEntry, SkippedInput, SplitInfo
    from tfpipe.records.verify import verify

    src = os.fspath(path)
    out = os.fspath(out_dir)
    if report is None:
        report = verify(src, deep=deep)
    result = DatasetSalvageReport(source=src, out_dir=out, verify=report)
    damaged = report.damaged_files
    if not damaged:
        return result
    if os.path.isdir(out) and os.path.samefile(out, src if os.path.isdir(src)
                                               else os.path.dirname(src) or "."):
        raise ValueError(f"salvage would write into the dataset it reads ({src}); "
                         "choose another output directory")
    os.makedirs(out, exist_ok=True)
    for f in damaged:
        result.shards.append(salvage(f, os.path.join(out, os.path.basename(f))))
    if not report.manifest:
        return result
    manifest = Manifest.load(src)
    directory = src if os.path.isdir(src) else os.path.dirname(src)
    by_path = {os.path.abspath(p): name for name in manifest.splits
               for p in manifest.shard_paths(directory, name)}
    splits: dict[str, SplitInfo] = {}
    for s in result.shards:
        split = by_path.get(os.path.abspath(s.source))
        if split is None:  # damage in a file the manifest does not list
            continue
        info = splits.setdefault(split, SplitInfo())
        info.shards.append(ShardEntry.from_info(s.out, out))
        lost, exact = result.records_lost(s)
        for f in s.lost:
            info.skipped.append(SkippedInput(
                f"{os.path.basename(s.source)}@{f.offset}",
                f"{f.kind}: bytes [{f.offset}, {f.end}) lost by salvage ({f.message})"))
        if not s.lost and lost:
            info.skipped.append(SkippedInput(os.path.basename(s.source),
                                             f"{lost} records lost by salvage"))
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
