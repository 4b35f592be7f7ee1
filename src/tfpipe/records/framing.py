"""TFRecord framing: write, read and scan, with every CRC checked.

A TFRecord file is a sequence of frames::

    uint64 length (little endian)
    uint32 masked_crc32c(length bytes)
    bytes  data[length]
    uint32 masked_crc32c(data)

This module reads that format without TensorFlow, so it can say exactly where a
file is damaged (record index and byte offset) and carry on past the damage,
which `tf.data` cannot. Lengths read from a file are bounded by the bytes that
remain before anything is allocated.
"""

from __future__ import annotations

import gzip
import io
import mmap
import os
import struct
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import BinaryIO, Literal

import google_crc32c
import numpy as np

from tfpipe.errors import RecordError

_MASK_DELTA = 0xA282EAD8
_LEN = struct.Struct("<Q")
_CRC = struct.Struct("<I")
HEADER_SIZE = 12  # length + its CRC
FOOTER_SIZE = 4  # CRC of the data
FRAME_OVERHEAD = HEADER_SIZE + FOOTER_SIZE
GZIP_MAGIC = b"\x1f\x8b"
# Reads of untrusted lengths go through chunks of at most this size, so a
# garbage length in a compressed stream (whose size is unknown) cannot make
# Python allocate it up front.
_READ_CHUNK = 16 << 20

FindingKind = Literal["corrupted-length", "corrupted-data", "truncated",
                      "not-a-tfrecord", "empty"]
FINDING_KINDS: tuple[str, ...] = ("corrupted-length", "corrupted-data", "truncated",
                                  "not-a-tfrecord", "empty")


def masked_crc32c(data: bytes) -> int:
    """The CRC32C of ``data``, masked the way TFRecord stores it."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def encode_frame(data: bytes) -> bytes:
    """One complete TFRecord frame around ``data``."""
    header = _LEN.pack(len(data))
    return b"".join((header, _CRC.pack(masked_crc32c(header)), data,
                     _CRC.pack(masked_crc32c(data))))


@dataclass(frozen=True)
class Finding:
    """One problem found in a file.

    ``index`` is the record ordinal and ``offset`` the byte offset of the frame
    start. Records after a resynchronisation are counted as found (the number
    lost inside garbage is unknowable). For GZIP files ``offset_space`` is
    ``"decompressed"``: offsets count bytes of the decompressed stream.
    ``end`` is where readable data resumes (exclusive end of the lost range).
    """

    kind: str
    path: str
    index: int | None
    offset: int | None
    message: str
    offset_space: str = "file"
    end: int | None = None
    records_lost: int | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def location(self) -> str:
        parts = [self.path]
        if self.index is not None:
            parts.append(f"record {self.index}")
        if self.offset is not None:
            space = " (decompressed)" if self.offset_space == "decompressed" else ""
            parts.append(f"byte {self.offset}{space}")
        return ", ".join(parts)

    def __str__(self) -> str:
        return f"{self.kind}: {self.location()}: {self.message}"


def is_gzip_file(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts with the GZIP magic bytes."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def detect_compression(path: str | os.PathLike[str],
                       compression: str | None = "auto") -> str | None:
    """Resolve ``"auto"`` to ``"gzip"`` (by suffix or magic) or ``None``."""
    if compression == "auto":
        p = os.fspath(path)
        if p.endswith(".gz") or (os.path.getsize(p) >= 2 and is_gzip_file(p)):
            return "gzip"
        return None
    return normalize_compression(compression)


def normalize_compression(compression: str | None) -> str | None:
    """Map None/""/"none"/"gzip"/"GZIP" to None or "gzip"; reject the rest."""
    if compression is None or compression == "" or str(compression).lower() == "none":
        return None
    if str(compression).lower() == "gzip":
        return "gzip"
    raise ValueError(f"compression must be one of None, 'gzip'; got {compression!r}")


# --------------------------------------------------------------------------- reading

def _read_up_to(f: BinaryIO, n: int) -> bytes:
    """Read n bytes (fewer at EOF) in bounded chunks, never allocating n blindly."""
    if n <= _READ_CHUNK:
        return f.read(n)
    parts = []
    left = n
    while left > 0:
        chunk = f.read(min(left, _READ_CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def iter_frames(path: str | os.PathLike[str],
                compression: str | None = "auto") -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(index, offset, data)`` for each record, checking both CRCs.

    Raises `RecordError` (with ``path``, ``index``, ``offset``) at the first
    damaged frame. Offsets in GZIP files are in the decompressed stream.
    """
    p = os.fspath(path)
    comp = detect_compression(p, compression)
    space = " (decompressed stream)" if comp == "gzip" else ""
    with open(p, "rb") as raw:
        f: BinaryIO = gzip.GzipFile(fileobj=raw, mode="rb") if comp == "gzip" else raw  # type: ignore[assignment]
        remaining: int | None = os.fstat(raw.fileno()).st_size if comp is None else None
        offset = 0
        index = 0

        def fail(msg: str) -> RecordError:
            return RecordError(f"{p}: record {index} at byte {offset}{space}: {msg}",
                               path=p, index=index, offset=offset)

        try:
            while True:
                header = f.read(HEADER_SIZE)
                if not header:
                    return
                if len(header) < HEADER_SIZE:
                    raise fail(f"truncated: {len(header)} of {HEADER_SIZE} header bytes")
                length, = _LEN.unpack_from(header)
                if masked_crc32c(header[:8]) != _CRC.unpack_from(header, 8)[0]:
                    what = ("not a TFRecord file (first length CRC does not match)"
                            if index == 0 else "corrupted length (length CRC mismatch)")
                    raise fail(what)
                if remaining is not None and length + FRAME_OVERHEAD > remaining - offset:
                    raise fail(f"truncated: record declares {length} bytes, "
                               f"{remaining - offset - HEADER_SIZE} remain")
                body = _read_up_to(f, length + FOOTER_SIZE)
                if len(body) < length + FOOTER_SIZE:
                    raise fail(f"truncated: record declares {length} bytes, "
                               f"{max(len(body) - FOOTER_SIZE, 0)} remain")
                data = body[:length]
                if masked_crc32c(data) != _CRC.unpack_from(body, length)[0]:
                    raise fail("corrupted data (data CRC mismatch)")
                yield index, offset, data
                offset += length + FRAME_OVERHEAD
                index += 1
        except (OSError, EOFError, zlib.error) as e:  # damaged GZIP stream
            if isinstance(e, RecordError):
                raise
            raise fail(f"GZIP stream damaged: {e}") from e
        finally:
            if f is not raw:
                f.close()


def count_records(path: str | os.PathLike[str], compression: str | None = "auto") -> int:
    """Number of records, following the length fields only (no data CRC).

    Plain files are walked with seeks, so this is cheap; GZIP files are
    decompressed. Raises `RecordError` on a bad length.
    """
    p = os.fspath(path)
    comp = detect_compression(p, compression)
    if comp == "gzip":
        return sum(1 for _ in iter_frames(p, "gzip"))
    size = os.path.getsize(p)
    n = 0
    offset = 0
    with open(p, "rb") as f:
        while offset < size:
            header = f.read(HEADER_SIZE)
            if len(header) < HEADER_SIZE or \
                    masked_crc32c(header[:8]) != _CRC.unpack_from(header, 8)[0]:
                raise RecordError(f"{p}: record {n} at byte {offset}: bad or truncated header",
                                  path=p, index=n, offset=offset)
            length, = _LEN.unpack_from(header)
            if length + FRAME_OVERHEAD > size - offset:
                raise RecordError(f"{p}: record {n} at byte {offset}: truncated",
                                  path=p, index=n, offset=offset)
            offset += length + FRAME_OVERHEAD
            f.seek(offset)
            n += 1
    return n


# --------------------------------------------------------------------------- scanning

@dataclass(frozen=True)
class _Record:
    index: int
    offset: int
    start: int  # data start
    length: int


class _Buffer:
    """The bytes to scan: an mmap of a plain file, or of a decompressed GZIP copy."""

    def __init__(self, path: str, compression: str | None) -> None:
        self.path = path
        self.compression = compression
        self.stream_error: Finding | None = None
        self._tmp: BinaryIO | None = None
        self._file: BinaryIO
        if compression == "gzip":
            self._tmp = tempfile.TemporaryFile(prefix="tfpipe-scan-")
            self._gunzip_into(self._tmp)
            self._file = self._tmp
        else:
            self._file = open(path, "rb")
        self._file.seek(0, io.SEEK_END)
        self.size = self._file.tell()
        self.mm: mmap.mmap | bytes = (
            mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self.size else b"")

    def _gunzip_into(self, out: BinaryIO) -> None:
        """Decompress member after member; record where and how the stream broke."""
        produced = 0
        consumed = 0
        d = zlib.decompressobj(wbits=31)
        started = False
        with open(self.path, "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                data = chunk
                while data:
                    started = True
                    try:
                        piece = d.decompress(data)
                    except zlib.error as e:
                        if produced == 0 and consumed == 0:
                            self.stream_error = Finding(
                                "not-a-tfrecord", self.path, 0, 0,
                                f"expected a GZIP-compressed TFRecord file, but it is not "
                                f"GZIP ({e}); if it is a plain shard, drop the .gz suffix "
                                "or the compression setting")
                            return
                        self.stream_error = Finding(
                            "corrupted-data", self.path, None, produced,
                            f"GZIP stream damaged near compressed byte {consumed} ({e}); "
                            f"everything after decompressed byte {produced} is unreadable "
                            "(a deflate stream cannot be resynchronised)",
                            offset_space="decompressed")
                        return
                    out.write(piece)
                    produced += len(piece)
                    used = len(data) - len(d.unused_data)
                    consumed += used
                    if d.eof:
                        data = d.unused_data
                        d = zlib.decompressobj(wbits=31)
                        started = False
                    else:
                        data = b""
        if started and not d.eof:
            tail = d.flush()
            out.write(tail)
            produced += len(tail)
            self.stream_error = Finding(
                "truncated", self.path, None, produced,
                f"GZIP stream ends without its end marker after {consumed} compressed bytes; "
                f"decompressed data stops at byte {produced}", offset_space="decompressed")

    def close(self) -> None:
        if isinstance(self.mm, mmap.mmap):
            self.mm.close()
        self._file.close()

    def __enter__(self) -> _Buffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _frame_at(mm: mmap.mmap | bytes, size: int, q: int) -> int | None:
    """Length of a complete, fully valid frame at q, else None."""
    if size - q < FRAME_OVERHEAD:
        return None
    header = mm[q:q + 8]
    if masked_crc32c(header) != _CRC.unpack_from(mm, q + 8)[0]:
        return None
    length, = _LEN.unpack(header)
    if length > size - q - FRAME_OVERHEAD:
        return None
    if masked_crc32c(mm[q + HEADER_SIZE:q + HEADER_SIZE + length]) != \
            _CRC.unpack_from(mm, q + HEADER_SIZE + length)[0]:
        return None
    return length


def resync(mm: mmap.mmap | bytes, size: int, start: int) -> int | None:
    """First offset >= start where a whole valid frame begins, else None.

    Scans byte by byte, but a candidate must have a length that fits in the
    file, so its high bytes are zero: NumPy finds those positions a chunk at a
    time and only they get the CRC checks.
    """
    # Any length that fits in the remaining bytes of a file < 1 TiB has its
    # top 3 bytes zero (bytes 5..7 of the header).
    chunk = 8 << 20
    pos = start
    while pos <= size - FRAME_OVERHEAD:
        end = min(size, pos + chunk + 12)
        arr = np.frombuffer(mm, dtype=np.uint8, count=end - pos, offset=pos)
        z = arr == 0
        n = len(arr) - 12 if end < size else len(arr) - 8
        if n <= 0:
            break
        top_zero = z[5:5 + n] & z[6:6 + n] & z[7:7 + n]
        # An all-zero header is never valid (length 0 has a non-zero masked CRC),
        # so zero-filled regions (a common crash artefact) cost no Python work.
        zp = np.concatenate([z, np.zeros(12, bool)])  # past EOF counts as non-zero
        all_zero = top_zero.copy()
        for k in (0, 1, 2, 3, 4, 8, 9, 10, 11):
            all_zero &= zp[k:k + n]
        cand = np.flatnonzero(top_zero & ~all_zero)
        for c in cand:
            q = pos + int(c)
            if q > size - FRAME_OVERHEAD:
                return None
            if _frame_at(mm, size, q) is not None:
                return q
        pos += n
    return None


def walk(buf: _Buffer) -> Iterator[_Record | Finding]:
    """Every intact record and every finding of a buffer, in file order."""
    mm, size, path = buf.mm, buf.size, buf.path
    space = "decompressed" if buf.compression == "gzip" else "file"
    if size == 0:
        if buf.stream_error is None:
            yield Finding("empty", path, None, 0, "file holds no records (0 bytes)",
                          offset_space=space, end=0, records_lost=0)
        else:
            yield buf.stream_error
        return
    p = 0
    index = 0
    while p < size:
        if size - p < HEADER_SIZE:
            yield Finding("truncated", path, index, p,
                          f"file ends inside a record header ({size - p} of {HEADER_SIZE} bytes)",
                          offset_space=space, end=size, records_lost=1)
            return
        header = mm[p:p + 8]
        length, = _LEN.unpack(header)
        if masked_crc32c(header) != _CRC.unpack_from(mm, p + 8)[0]:
            q = resync(mm, size, p + 1)
            if p == 0 and q is None:
                yield Finding("not-a-tfrecord", path, 0, 0,
                              "no valid TFRecord frame anywhere in the file "
                              f"(starts with {bytes(mm[:8]).hex()})",
                              offset_space=space, end=size)
                return
            end = size if q is None else q
            yield Finding("corrupted-length", path, index, p,
                          f"length CRC mismatch; {end - p} bytes lost"
                          + ("" if q is None else f", frames resume at byte {q}"),
                          offset_space=space, end=end)
            if q is None:
                return
            p = q
            continue
        if length > size - p - FRAME_OVERHEAD:
            q = resync(mm, size, p + 1)
            end = size if q is None else q
            yield Finding("truncated", path, index, p,
                          f"record declares {length} bytes but only "
                          f"{size - p - HEADER_SIZE} bytes follow its header",
                          offset_space=space, end=end, records_lost=1 if q is None else None)
            if q is None:
                return
            p = q
            continue
        start = p + HEADER_SIZE
        if masked_crc32c(mm[start:start + length]) != _CRC.unpack_from(mm, start + length)[0]:
            yield Finding("corrupted-data", path, index, p,
                          f"data CRC mismatch in a {length}-byte record",
                          offset_space=space, end=start + length + FOOTER_SIZE, records_lost=1)
        else:
            yield _Record(index, p, start, length)
        p = start + length + FOOTER_SIZE
        index += 1
    if buf.stream_error is not None:
        yield buf.stream_error


@dataclass
class ScanResult:
    """What a full scan of one file found."""

    path: str
    compression: str | None
    size: int  # bytes scanned (decompressed size for GZIP)
    num_records: int  # intact records
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return not self.findings


def scan(path: str | os.PathLike[str], compression: str | None = "auto") -> ScanResult:
    """Check every frame of a file, resynchronising after damage."""
    p = os.fspath(path)
    comp = detect_compression(p, compression)
    findings: list[Finding] = []
    n = 0
    with _Buffer(p, comp) as buf:
        for item in walk(buf):
            if isinstance(item, Finding):
                findings.append(item)
            else:
                n += 1
        size = buf.size
    return ScanResult(p, comp, size, n, findings)


def scan_file(path: str | os.PathLike[str], compression: str | None = "auto") -> list[Finding]:
    """Every problem in a TFRecord file (empty list when intact)."""
    return scan(path, compression).findings
