"""Columnar Example encoder: an Arrow RecordBatch -> TFRecord frames, in C.

`encode_example` builds one record at a time in Python (~100+ us per table
row); `ColumnarEncoder` writes the same bytes straight from the Arrow buffers
(a small C library, `_columnar.c`, called through ctypes, which releases the
GIL, so row ranges encode on several threads). It takes columns already in
their stored types (docs/convert.md "Tables"):

    int64 / float32 / binary or string            one value per row
    list<...>, large_list<...>, fixed_size_list<...> of those (no null elements)

A null row is an empty feature list (as `encode_example` writes `[]`). Anything
else raises `TypeError`: the caller normalizes first. Without a C compiler (or
with TFPIPE_NATIVE=0) the same bytes come from `encode_example` row by row.

The library is plain C with no TensorFlow or Python headers, so it is built in
a second or two and loaded without importing TensorFlow (conversion workers
never do): next to this file by `python -m tfpipe.records build`
(`make native` runs it), else into the per-user cache on first use, under the
same switches and cache directory as `tfpipe.native`.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from tfpipe.records import _wire
from tfpipe.records.codec import encode_example
from tfpipe.records.framing import encode_frame
from tfpipe.records.schema import SCHEMA_VERSION, VERSION_KEY, Schema

log = logging.getLogger("tfpipe.records")

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "_columnar.c"
# -O2 and no -march: the library runs on any machine of this architecture; the
# crc32c instruction is picked at run time.
FLAGS = ("-std=c99", "-O2", "-fPIC", "-shared")
_K_CONST, _K_INT, _K_FLOAT, _K_BYTES, _K_DOUBLE = 0, 1, 2, 3, 4


class _Column(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("is_list", ctypes.c_int32),
                ("key", ctypes.c_void_p), ("key_len", ctypes.c_int64),
                ("valid", ctypes.c_void_p), ("row_offsets", ctypes.c_void_p),
                ("values", ctypes.c_void_p), ("value_offsets", ctypes.c_void_p)]


# ----------------------------------------------------------------------------- build
def _key() -> str:
    h = hashlib.sha256()
    for part in (platform.machine(), *FLAGS):
        h.update(part.encode() + b"\0")
    h.update(SOURCE.read_bytes())
    return h.hexdigest()[:16]


def _cache_dir() -> Path:
    from tfpipe import switches

    root = switches.get("TFPIPE_NATIVE_CACHE")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "tfpipe" / "native"


def _compiler() -> list[str] | None:
    import shlex

    if os.environ.get("CC"):
        return shlex.split(os.environ["CC"])
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return [found]
    return None


def _compile(target: Path) -> None:
    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc, clang; or set CC)")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        out = work / target.name
        proc = subprocess.run([*cc, *FLAGS, str(SOURCE), "-o", str(out)],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling {SOURCE.name} failed: {proc.stderr.strip()[:500]}")
        os.replace(out, target)  # atomic: a concurrent loader sees no file or all of it
    finally:
        shutil.rmtree(work, ignore_errors=True)


def package_library() -> Path:
    return HERE / f"_columnar-{_key()}.so"


def build() -> Path:
    """Ahead-of-time build next to this file (else into the cache); returns the path."""
    target = package_library()
    if os.access(HERE, os.W_OK):
        if not target.exists():
            _compile(target)
            for old in HERE.glob("_columnar-*.so"):
                if old != target:
                    old.unlink(missing_ok=True)
        return target
    return _cached(build=True)


def _cached(build: bool) -> Path:
    target = _cache_dir() / f"columnar-{_key()}" / "_columnar.so"
    if target.exists() or not build:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(target.parent / ".lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # processes starting together compile once
        try:
            if not target.exists():
                _compile(target)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return target


_lib_lock = threading.Lock()
_lib: dict[str, Any] = {}


def library() -> Any:
    """The loaded C library, or None (no compiler, TFPIPE_NATIVE=0, a failed build:
    the reason is logged once and `reason()` returns it)."""
    with _lib_lock:
        if "lib" in _lib:
            return _lib["lib"]
        lib, why = None, ""
        from tfpipe import switches

        try:
            if not switches.get("TFPIPE_NATIVE"):
                why = "TFPIPE_NATIVE=0"
            else:
                path = package_library()
                if not path.exists():
                    path = _cached(build=bool(switches.get("TFPIPE_NATIVE_BUILD")))
                if not path.exists():
                    why = "not built and TFPIPE_NATIVE_BUILD=0"
                else:
                    lib = ctypes.CDLL(str(path))
                    lib.tfp_measure.restype = ctypes.c_int64
                    lib.tfp_measure.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                                                ctypes.c_int64, ctypes.c_int32]
                    lib.tfp_encode.restype = ctypes.c_int64
                    lib.tfp_encode.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                                               ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p,
                                               ctypes.c_int64, ctypes.c_void_p]
                    lib.tfp_json_rows.restype = ctypes.c_int64
                    lib.tfp_json_rows.argtypes = [ctypes.c_void_p, ctypes.c_int32,
                                                  ctypes.c_int64, ctypes.c_int64,
                                                  ctypes.c_void_p, ctypes.c_void_p,
                                                  ctypes.c_int64]
                    lib.tfp_unit_hashes.restype = None
                    lib.tfp_unit_hashes.argtypes = [ctypes.c_char_p, ctypes.c_int64,
                                                    ctypes.c_void_p, ctypes.c_int64,
                                                    ctypes.c_void_p]
        except Exception as exc:  # noqa: BLE001 - any failure means the Python encoder
            lib, why = None, f"{type(exc).__name__}: {exc}"
        if lib is None and why != "TFPIPE_NATIVE=0":
            log.warning("tfpipe: the columnar table encoder is not available (%s); tables "
                        "are encoded in Python (same bytes, ~50x slower). Install a C "
                        "compiler and run `python -m tfpipe.records build`.", why)
        _lib["lib"], _lib["reason"] = lib, why
        return lib


def reason() -> str:
    """Why `library()` is None ('' when it loaded)."""
    library()
    return str(_lib.get("reason", ""))


# ----------------------------------------------------------------------------- encoder
def _key_field(name: str) -> bytes:
    raw = name.encode("utf-8")
    return b"\x0a" + _wire._varint(len(raw)) + raw


def _version_entry() -> bytes:
    feature = _wire.feature(VERSION_KEY, "int64", [SCHEMA_VERSION])
    body = _key_field(VERSION_KEY) + b"\x12" + _wire._varint(len(feature)) + feature
    return b"\x0a" + _wire._varint(len(body)) + body


def _view(buf: Any, dtype: Any, start: int, count: int) -> np.ndarray:
    return np.frombuffer(buf, dtype=dtype, count=start + count)[start:]


class ColumnarEncoder:
    """Encode RecordBatches of stored-type columns as `schema` records.

    `frames(batch)` returns the TFRecord frames of every row, back to back (the
    bytes `write_shard` writes for `encode_example` of each row); `examples(batch)`
    the serialized Examples. `threads` row ranges encode at once (C path).
    """

    def __init__(self, schema: Schema, threads: int | None = None,
                 native: bool | None = None) -> None:
        self.schema = schema
        self.names = [n for n in schema if n != VERSION_KEY]
        self.threads = max(1, threads if threads is not None else min(2, os.cpu_count() or 1))
        self._lib = library() if native is not False else None
        if native and self._lib is None:
            raise RuntimeError(f"the columnar C encoder is not available: {reason()}")
        order = sorted([*self.names, VERSION_KEY], key=lambda k: k.encode("utf-8"))
        self._order = order
        self._keys = {n: _key_field(n) for n in self.names}
        self._version = _version_entry()

    @property
    def native(self) -> bool:
        return self._lib is not None

    # -------------------------------------------------------------- checking
    def check(self, batch: Any) -> None:
        """TypeError naming the column when `batch` is not in stored types for the
        schema (the caller falls back or normalizes)."""
        for name in self.names:
            if name not in batch.schema.names:
                raise TypeError(f"column {name!r} of the schema is missing from the batch")
            self._column_parts(name, batch.column(batch.schema.get_field_index(name)),
                               dry=True)

    def _column_parts(self, name: str, arr: Any, dry: bool = False) -> Any:
        import pyarrow as pa

        spec = self.schema[name]
        t = arr.type
        is_list = (pa.types.is_list(t) or pa.types.is_large_list(t)
                   or pa.types.is_fixed_size_list(t))
        inner = t.value_type if is_list else t
        want = {"int64": pa.types.is_int64, "float32": pa.types.is_float32,
                "string": lambda x: (pa.types.is_binary(x) or pa.types.is_string(x)
                                     or pa.types.is_large_binary(x)
                                     or pa.types.is_large_string(x))}[spec.dtype]
        if not want(inner):
            raise TypeError(f"column {name!r}: Arrow type {t} is not the stored type of a "
                            f"{spec.dtype} feature")
        if spec.kind == "fixed":
            n = max(spec.num_elements, 1)
            if not is_list or pa.types.is_fixed_size_list(t):
                ok = arr.null_count == 0 and (t.list_size if is_list else 1) == n
            else:  # var-length lists that hold n values in every row
                import pyarrow.compute as pc

                lengths = pc.list_value_length(arr)
                ok = arr.null_count == 0 and (len(arr) == 0 or pc.min_max(lengths).as_py()
                                              == {"min": n, "max": n})
            if not ok:
                raise TypeError(f"column {name!r}: a fixed {spec.shape} feature needs "
                                f"{n} value(s) in every row")
        child = None
        if is_list:
            child = arr.flatten()  # the elements of these rows only
            if child.null_count:
                raise TypeError(f"column {name!r}: null elements inside lists")
        if dry:
            return None
        return self._buffers(arr, spec.dtype, is_list)

    @staticmethod
    def _buffers(arr: Any, dtype: str, is_list: bool) -> tuple[_Column, list[Any]]:
        import pyarrow as pa
        import pyarrow.compute as pc

        keep: list[Any] = [arr]
        n = len(arr)
        col = _Column()
        col.kind = {"int64": _K_INT, "float32": _K_FLOAT, "string": _K_BYTES,
                    "float64": _K_DOUBLE}[dtype]
        if arr.null_count:
            valid = np.ascontiguousarray(
                arr.is_valid().to_numpy(zero_copy_only=False), dtype=np.uint8)
            keep.append(valid)
            col.valid = valid.ctypes.data
        if is_list:
            t = arr.type
            if pa.types.is_fixed_size_list(t):
                k = t.list_size
                offsets = (np.arange(n + 1, dtype=np.int64) + arr.offset) * k
                values = arr.values  # the child array, unsliced
            else:
                off_dtype = np.int64 if pa.types.is_large_list(t) else np.int32
                offsets = _view(arr.buffers()[1], off_dtype, arr.offset, n + 1)
                values = arr.values
            lo, hi = int(offsets[0]), int(offsets[-1])
            if hi - lo >= (1 << 31):
                raise TypeError("a list column chunk of 2**31 values or more")
            # The child sliced to these rows: the shifted row offsets index it.
            values = values.slice(lo, hi - lo)
            offsets = np.ascontiguousarray(offsets - lo, dtype=np.int32)
            keep.append(offsets)
            col.is_list = 1
            col.row_offsets = offsets.ctypes.data
        else:
            values = arr
        if dtype == "string":
            if not (pa.types.is_binary(values.type) or pa.types.is_string(values.type)):
                values = pc.cast(values, pa.binary())  # large -> 32-bit offsets
            keep.append(values)
            m = len(values)
            voff = _view(values.buffers()[1], np.int32, values.offset, m + 1)
            data = values.buffers()[2]
            keep.append(voff)
            col.value_offsets = voff.ctypes.data
            col.values = data.address if data is not None and data.size else 0
            if m and not col.values:
                empty = np.zeros(1, np.uint8)
                keep.append(empty)
                col.values = empty.ctypes.data
        else:
            np_dtype = {"int64": np.int64, "float32": np.float32, "float64": np.float64}[dtype]
            buf = values.buffers()[1]
            v = (_view(buf, np_dtype, values.offset, len(values)) if buf is not None
                 else np.zeros(0, np_dtype))
            keep.append(v)
            col.values = v.ctypes.data if len(v) else 0
        return col, keep

    # -------------------------------------------------------------- encoding
    def _native_columns(self, batch: Any) -> tuple[Any, list[Any]]:
        cols = (_Column * len(self._order))()
        keep: list[Any] = []
        for k, name in enumerate(self._order):
            if name == VERSION_KEY:
                raw = self._version
                cols[k].kind = _K_CONST
            else:
                arr = batch.column(batch.schema.get_field_index(name))
                col, held = self._column_parts(name, arr)  # checks the type first
                keep += held
                cols[k] = col
                raw = self._keys[name]
            buf = ctypes.create_string_buffer(raw, len(raw))
            keep.append(buf)
            cols[k].key = ctypes.addressof(buf)
            cols[k].key_len = len(raw)
        return cols, keep

    def _encode_range(self, cols: Any, r0: int, r1: int, framed: bool,
                      ends: np.ndarray | None) -> np.ndarray:
        lib = self._lib
        size = lib.tfp_measure(cols, len(cols), r0, r1, int(framed))
        out = np.empty(size, dtype=np.uint8)
        wrote = lib.tfp_encode(cols, len(cols), r0, r1, int(framed), out.ctypes.data, size,
                               None if ends is None else ends.ctypes.data)
        if wrote != size:  # pragma: no cover - measure and encode disagree: a bug
            raise RuntimeError(f"columnar encoder wrote {wrote} bytes, measured {size}")
        return out

    def _chunks(self, batch: Any, framed: bool, ends: bool = False) -> list[Any]:
        n = batch.num_rows
        cols, keep = self._native_columns(batch)
        parts = min(self.threads, max(1, n // 512))
        cuts = [n * i // parts for i in range(parts + 1)]
        ranges = list(zip(cuts[:-1], cuts[1:]))
        res: list[Any] = []

        def one(r: tuple[int, int]) -> Any:
            e = np.empty(r[1] - r[0], np.int64) if ends else None
            return self._encode_range(cols, r[0], r[1], framed, e), e

        if parts == 1:
            res = [one(ranges[0])]
        else:
            with ThreadPoolExecutor(parts) as pool:
                res = list(pool.map(one, ranges))
        del keep
        return res

    def frames(self, batch: Any) -> list[Any]:
        """The TFRecord frames of every row of `batch`, in row order, as a few
        contiguous buffers (bytes-like) to write one after another."""
        if batch.num_rows == 0:
            return []
        if self._lib is None:
            self.check(batch)
            return [b"".join(encode_frame(r) for r in self._python_examples(batch))]
        return [buf for buf, _ in self._chunks(batch, framed=True)]

    def examples(self, batch: Any) -> list[bytes]:
        """The serialized Example of every row of `batch`."""
        if batch.num_rows == 0:
            return []
        if self._lib is None:
            self.check(batch)
            return self._python_examples(batch)
        out: list[bytes] = []
        for buf, ends in self._chunks(batch, framed=False, ends=True):
            raw = buf.tobytes()
            start = 0
            for end in ends.tolist():
                out.append(raw[start:end])
                start = end
        return out

    def _python_examples(self, batch: Any) -> list[bytes]:
        """`encode_example` row by row: the reference the C path must equal."""
        cols = {name: batch.column(batch.schema.get_field_index(name)).to_pylist()
                for name in self.names}
        out = []
        for r in range(batch.num_rows):
            values = {name: ([] if cols[name][r] is None else cols[name][r])
                      for name in self.names}
            out.append(encode_example(values, self.schema))
        return out


def json_rows(batch: Any, rows: np.ndarray) -> memoryview | None:
    """`canonical_json([f"row:{i}", [i, {column: value}]]) + "\\n"` of every row
    of `batch` (`rows`: each row's table index), concatenated (a buffer), the bytes
    `tfpipe.convert`'s plan digest hashes; None without the C library.

    Columns are int64, float64 (as Python floats), binary (as bytes), or lists of
    them without null elements; a null is JSON null. Keys come sorted as Python
    sorts them.
    """
    import json
    import pyarrow as pa

    lib = library()
    if lib is None:
        return None
    names = sorted(batch.schema.names)
    cols = (_Column * len(names))()
    keep: list[Any] = []
    for k, name in enumerate(names):
        arr = batch.column(batch.schema.get_field_index(name))
        t = arr.type
        is_list = (pa.types.is_list(t) or pa.types.is_large_list(t)
                   or pa.types.is_fixed_size_list(t))
        inner = t.value_type if is_list else t
        dtype = ("int64" if pa.types.is_int64(inner) else "float64"
                 if pa.types.is_float64(inner) else "string")
        if dtype == "string" and not pa.types.is_binary(inner):
            raise TypeError(f"column {name!r}: {t} is not int64, float64 or binary")
        if is_list and arr.flatten().null_count:
            raise TypeError(f"column {name!r}: null elements inside lists")
        col, held = ColumnarEncoder._buffers(arr, dtype, is_list)
        cols[k] = col
        keep += held
        key = (json.dumps(name) + ":").encode("ascii")
        buf = ctypes.create_string_buffer(key, len(key))
        keep.append(buf)
        cols[k].key = ctypes.addressof(buf)
        cols[k].key_len = len(key)
    index = np.ascontiguousarray(rows, dtype=np.int64)
    cap = batch.num_rows * 256 + batch.get_total_buffer_size() * 3
    while True:
        out = np.empty(cap, np.uint8)
        n = lib.tfp_json_rows(cols, len(names), 0, batch.num_rows, index.ctypes.data,
                              out.ctypes.data, cap)
        if n >= 0:
            return memoryview(out[:n])  # no copy: hashlib takes any buffer
        cap *= 2


def unit_hashes(prefix: str, rows: np.ndarray) -> np.ndarray | None:
    """`int.from_bytes(sha256(f"{prefix}{i}")[:8], "big") / 2**64` for each row index i
    (float64), computed in C; None without the library. The conversion plan's
    `unit_hash(seed, domain, f"row:{i}")` with prefix f"{seed}:{domain}:row:"."""
    lib = library()
    raw = prefix.encode("utf-8")
    if lib is None or len(raw) > 1000:
        return None
    index = np.ascontiguousarray(rows, dtype=np.int64)
    out = np.empty(len(index), np.float64)

    def one(lo: int, hi: int) -> None:
        lib.tfp_unit_hashes(raw, len(raw), index[lo:].ctypes.data, hi - lo,
                            out[lo:].ctypes.data)

    threads = min(2, os.cpu_count() or 1) if len(index) >= 100_000 else 1
    cuts = [len(index) * i // threads for i in range(threads + 1)]
    if threads == 1:
        one(0, len(index))
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, cuts[:-1], cuts[1:]))
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m tfpipe.records build`: the ahead-of-time build (`make native`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv != ["build"]:
        print("usage: python -m tfpipe.records build", file=sys.stderr)
        return 2
    try:
        path = build()
        ctypes.CDLL(str(path))
    except Exception as exc:  # noqa: BLE001 - report any failure with its reason
        print(f"tfpipe.records.columnar: {exc}", file=sys.stderr)
        return 1
    print(f"tfpipe.records.columnar: {path}")
    return 0

