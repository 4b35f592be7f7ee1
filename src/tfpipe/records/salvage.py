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
