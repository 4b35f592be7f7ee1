"""Shard writers: TFRecord framing written by us, atomically, byte-identical run to run.

A shard is written under a hidden temporary name in its final directory,
fsynced, then renamed with `os.replace`, so a crash never leaves a half shard
under a final name. GZIP output uses a fixed header (mtime 0, no file name),
so the same records give the same bytes on every run and machine.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, BinaryIO

from tfpipe.errors import ConfigError
from tfpipe.records.framing import encode_frame, normalize_compression

DEFAULT_SHARD_SIZE = 256 << 20
GZIP_LEVEL = 6  # zlib's default: most of level 9's ratio at a fraction of the CPU


@dataclass(frozen=True)
class ShardInfo:
    """A finished shard: final path, record count, size on disk, sha256 of the file."""

    path: str
    num_records: int
    num_bytes: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def shard_name(split: str, index: int, count: int, compression: str | None = None) -> str:
    """``{split}-{index:05d}-of-{count:05d}.tfrecord`` (``.tfrecord.gz`` for GZIP)."""
    if not 0 <= index < count:
        raise ValueError(f"shard index must be in [0, {count}), got {index}")
    suffix = ".tfrecord.gz" if normalize_compression(compression) == "gzip" else ".tfrecord"
    return f"{split}-{index:05d}-of-{count:05d}{suffix}"


SHARD_NAME_RE = re.compile(r"^(?P<split>.+)-(?P<index>\d{5,})-of-(?P<count>\d{5,})\.tfrecord(\.gz)?$")

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def parse_size(value: str | int) -> int:
    """Bytes from an int or a string like ``"256MB"`` (10^6), ``"1GiB"`` (2^30)
    or ``"512M"`` (bare K/M/G/T are binary, as in ``ls -h``)."""
    if isinstance(value, bool):
        raise ConfigError(f"size must be an int or a string like '256MiB', got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise ConfigError(f"size must be > 0 bytes, got {value}")
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(value))
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise ConfigError(f"size {value!r} not understood; use bytes or a number with one of "
                          "B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB or K, M, G, T "
                          "(powers of 1024), e.g. '256MiB'")
    n = int(float(m.group(1)) * _UNITS[unit])
    if n <= 0:
        raise ConfigError(f"size must be > 0 bytes, got {value!r}")
    return n


class _HashingSink:
    """File wrapper that hashes and counts exactly the bytes that reach the disk."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.sha = hashlib.sha256()
        self.num_bytes = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.num_bytes += len(data)
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()


def _temp_path(final: str) -> str:
    d, name = os.path.split(final)
    return os.path.join(d, f".{name}.tmp-{os.getpid()}-{threading.get_ident()}")


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on directories
        pass
    finally:
        os.close(fd)


class _ShardFile:
    """One shard being written under a temporary name."""

    def __init__(self, temp: str, compression: str | None) -> None:
        self.temp = temp
        self._raw = open(temp, "wb")
        self._sink = _HashingSink(self._raw)
        self._gz: gzip.GzipFile | None = None
        if compression == "gzip":
            # filename="" and mtime=0 keep the header identical run to run.
            self._gz = gzip.GzipFile(filename="", mode="wb", fileobj=self._sink,  # type: ignore[arg-type]
                                     compresslevel=GZIP_LEVEL, mtime=0)
        self.num_records = 0
        self.frame_bytes = 0

    @property
    def bytes_on_disk(self) -> int:
        return self._sink.num_bytes

    def write(self, record: bytes) -> None:
        frame = encode_frame(bytes(record))
        if self._gz is not None:
            self._gz.write(frame)
        else:
            self._sink.write(frame)
        self.num_records += 1
        self.frame_bytes += len(frame)

    def write_frames(self, data: Any, count: int) -> None:
        """Append `count` records that are already framed, back to back in `data`."""
        view = memoryview(data).cast("B")
        if self._gz is not None:
            self._gz.write(view)
        else:
            self._sink.write(view)
        self.num_records += count
        self.frame_bytes += len(view)

    def finish(self) -> tuple[int, int, str]:
        """Flush, fsync and close; return (num_records, num_bytes, sha256)."""
        if self._gz is not None:
            self._gz.close()  # writes the trailer into the sink, leaves the file open
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()
        return self.num_records, self._sink.num_bytes, self._sink.sha.hexdigest()

    def abort(self) -> None:
        try:
            if self._gz is not None:
                self._gz.close()
        except Exception:  # noqa: BLE001 - cleanup must not mask the original error
            pass
        self._raw.close()
        try:
            os.remove(self.temp)
        except FileNotFoundError:
            pass


def write_shard(path: str | os.PathLike[str], records: Iterable[bytes],
                compression: str | None = None) -> ShardInfo:
    """Write ``records`` as one TFRecord shard at ``path``, atomically.

    Frames are written by tfpipe (length, masked CRC32C, data, masked CRC32C);
    ``compression="gzip"`` gives a byte-identical GZIP stream on every run.
    The returned sha256 and size are those of the file on disk.
    """
    return _write_atomically(path, compression,
                             lambda shard: [shard.write(r) for r in records])


def write_shard_frames(path: str | os.PathLike[str], chunks: Iterable[tuple[Any, int]],
                       compression: str | None = None) -> ShardInfo:
    """`write_shard` for records already framed: `chunks` are (bytes-like holding
    whole TFRecord frames, how many) pairs, e.g. from `tfpipe.records.columnar`.
    Same file, same atomic rename, same sha256 as framing record by record."""
    return _write_atomically(path, compression,
                             lambda shard: [shard.write_frames(d, c) for d, c in chunks])


def _write_atomically(path: str | os.PathLike[str], compression: str | None,
                      fill: Callable[[_ShardFile], Any]) -> ShardInfo:
    """A temp file beside ``path`` filled by ``fill``, then renamed into place."""
    final = os.fspath(path)
    directory = os.path.dirname(final) or "."
    os.makedirs(directory, exist_ok=True)
    shard = _ShardFile(_temp_path(final), normalize_compression(compression))
    try:
        fill(shard)
        n, size, sha = shard.finish()
        os.replace(shard.temp, final)
    except BaseException:
        shard.abort()
        raise
    _fsync_dir(directory)
    return ShardInfo(final, n, size, sha)


class ShardedWriter:
    """Streaming writer that rolls to a new shard at ``shard_size_bytes``.

    ``with ShardedWriter(out, "train") as w: w.write(record)``; on close every
    shard is renamed to ``{split}-{i:05d}-of-{n:05d}.tfrecord[.gz]`` and
    `infos` holds their `ShardInfo`. A shard closes before a record would take
    it past the target, so shards exceed the target only when a single record
    does. For GZIP the target applies to the uncompressed frames: zlib buffers
    its output, so the compressed size is only known once a shard is closed. An exception
    inside the ``with`` block deletes the temporary files and renames nothing.
    Writing no record produces no shard.
    """

    def __init__(self, out_dir: str | os.PathLike[str], split: str,
                 shard_size_bytes: int | str = DEFAULT_SHARD_SIZE,
                 compression: str | None = None) -> None:
        if not split or "/" in split or split.startswith("."):
            raise ConfigError(f"split name must be a plain name, got {split!r}")
        self.out_dir = os.fspath(out_dir)
        self.split = split
        self.shard_size_bytes = parse_size(shard_size_bytes)
        self.compression = normalize_compression(compression)
        self.infos: list[ShardInfo] = []
        self._done: list[tuple[str, int, int, str]] = []
        self._current: _ShardFile | None = None
        self._closed = False
        os.makedirs(self.out_dir, exist_ok=True)

    def __enter__(self) -> ShardedWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _temp_for(self, i: int) -> str:
        return os.path.join(self.out_dir, f".{self.split}-{i:05d}.tfrecord.tmp-"
                                          f"{os.getpid()}-{threading.get_ident()}")

    def _roll(self) -> None:
        if self._current is not None:
            n, size, sha = self._current.finish()
            self._done.append((self._current.temp, n, size, sha))
            self._current = None

    def write(self, record: bytes) -> None:
        if self._closed:
            raise ValueError("ShardedWriter is closed")
        cur = self._current
        if cur is not None and cur.num_records and \
                cur.frame_bytes + len(record) + 16 > self.shard_size_bytes:
            self._roll()
            cur = None
        if cur is None:
            cur = self._current = _ShardFile(self._temp_for(len(self._done)), self.compression)
        cur.write(record)

    def close(self) -> list[ShardInfo]:
        """Finish the last shard and rename all to their final names."""
        if self._closed:
            return self.infos
        self._roll()
        self._closed = True
        count = len(self._done)
        for i, (temp, n, size, sha) in enumerate(self._done):
            final = os.path.join(self.out_dir, shard_name(self.split, i, count, self.compression))
            os.replace(temp, final)
            self.infos.append(ShardInfo(final, n, size, sha))
        _fsync_dir(self.out_dir)
        return self.infos

    def abort(self) -> None:
        """Delete every temporary file; nothing appears under a final name."""
        self._closed = True
        if self._current is not None:
            self._current.abort()
            self._current = None
        for temp, *_ in self._done:
            try:
                os.remove(temp)
            except FileNotFoundError:
                pass
        self._done = []
