"""manifest.json: what a dataset directory holds, checked before anything is read.

The JSON is deterministic (sorted keys, fixed indentation, no timestamps), so
converting the same inputs twice gives byte-identical manifests. Counts are
stored per shard only; split totals are derived (one source of truth).
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from tfpipe._version import __version__
from tfpipe.errors import ManifestError, SchemaError
from tfpipe.records.framing import normalize_compression
from tfpipe.records.schema import SCHEMA_VERSION, Schema

MANIFEST_NAME = "manifest.json"
MAX_MANIFEST_BYTES = 64 << 20  # a million shards fit in far less; refuse anything bigger
MAX_SHARD_BYTES = 1 << 50
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_SPLIT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


@dataclass
class ShardEntry:
    """One shard: ``path`` relative to the dataset directory."""

    path: str
    num_records: int
    num_bytes: int
    sha256: str

    @classmethod
    def from_info(cls, info: Any, directory: str | os.PathLike[str]) -> ShardEntry:
        """From a writer's `ShardInfo`, with the path made relative to ``directory``."""
        rel = os.path.relpath(os.path.abspath(info.path), os.path.abspath(os.fspath(directory)))
        return cls(rel.replace(os.sep, "/"), info.num_records, info.num_bytes, info.sha256)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "num_records": self.num_records,
                "num_bytes": self.num_bytes, "sha256": self.sha256}


@dataclass
class SkippedInput:
    """An input the converter skipped, and why."""

    input: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"input": self.input, "reason": self.reason}


@dataclass
class SplitInfo:
    shards: list[ShardEntry] = field(default_factory=list)
    skipped: list[SkippedInput] = field(default_factory=list)

    @property
    def num_records(self) -> int:
        return sum(s.num_records for s in self.shards)

    @property
    def num_bytes(self) -> int:
        return sum(s.num_bytes for s in self.shards)

    def to_json(self) -> dict[str, Any]:
        return {"shards": [s.to_json() for s in self.shards],
                "skipped": [s.to_json() for s in self.skipped]}


@dataclass
class Manifest:
    """Everything a reader needs to trust a dataset directory."""

    schema: Schema
    splits: dict[str, SplitInfo] = field(default_factory=dict)
    class_names: list[str] = field(default_factory=list)
    compression: str | None = None
    tool_version: str = __version__
    schema_version: int = SCHEMA_VERSION
    source: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    # ----------------------------------------------------------------- serialisation
    def to_json(self) -> dict[str, Any]:
        return {
            "tool_version": self.tool_version,
            "schema_version": self.schema_version,
            "schema": self.schema.to_json(),
            "class_names": list(self.class_names),
            "compression": self.compression,
            "splits": {name: info.to_json() for name, info in sorted(self.splits.items())},
            "source": self.source,
            "settings": self.settings,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, indent=2, ensure_ascii=False) + "\n"

    def save(self, directory: str | os.PathLike[str]) -> str:
        """Write ``directory/manifest.json`` atomically; return its path."""
        d = os.fspath(directory)
        os.makedirs(d, exist_ok=True)
        final = os.path.join(d, MANIFEST_NAME)
        temp = os.path.join(d, f".{MANIFEST_NAME}.tmp-{os.getpid()}-{threading.get_ident()}")
        data = self.dumps().encode("utf-8")
        try:
            with open(temp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, final)
        except BaseException:
            if os.path.exists(temp):
                os.remove(temp)
            raise
        return final

    @classmethod
    def from_json(cls, obj: Any, where: str = MANIFEST_NAME) -> Manifest:
        """Build and validate; errors name the key path (``splits.train.shards[2].path``)."""

        def err(key: str, msg: str) -> ManifestError:
            return ManifestError(f"{where}: {key}: {msg}")

        if not isinstance(obj, dict):
            raise err("(top level)", f"expected a JSON object, got {type(obj).__name__}")
        missing = [k for k in ("tool_version", "schema_version", "schema", "splits") if k not in obj]
        if missing:
            raise err("(top level)", f"missing required keys {missing}")
        sv = obj["schema_version"]
        if not isinstance(sv, int) or isinstance(sv, bool) or sv < 0:
            raise err("schema_version", f"must be an int >= 0, got {sv!r}")
        if not isinstance(obj["tool_version"], str):
            raise err("tool_version", f"must be a string, got {obj['tool_version']!r}")
        try:
            schema = Schema.from_json(obj["schema"])
        except SchemaError as e:
            raise err("schema", str(e)) from e
        class_names = obj.get("class_names", [])
        if not isinstance(class_names, list) or not all(isinstance(c, str) for c in class_names):
            raise err("class_names", "must be a list of strings")
        try:
            compression = normalize_compression(obj.get("compression"))
        except ValueError as e:
            raise err("compression", str(e)) from e
        for key in ("source", "settings"):
            if not isinstance(obj.get(key, {}), dict):
                raise err(key, "must be an object")
        splits_obj = obj["splits"]
        if not isinstance(splits_obj, dict):
            raise err("splits", "must be an object split name -> {shards, skipped}")
        splits: dict[str, SplitInfo] = {}
        for name, sobj in splits_obj.items():
            if not _SPLIT_RE.match(name):
                raise err(f"splits.{name}", "split names are letters, digits, '_', '-', '.'")
            if not isinstance(sobj, dict) or not isinstance(sobj.get("shards"), list):
                raise err(f"splits.{name}", "must be an object with a 'shards' list")
            shards = []
            for i, e in enumerate(sobj["shards"]):
                key = f"splits.{name}.shards[{i}]"
                if not isinstance(e, dict):
                    raise err(key, "must be an object")
                for k, typ in (("path", str), ("num_records", int), ("num_bytes", int),
                               ("sha256", str)):
                    if k not in e:
                        raise err(key, f"missing {k!r}")
                    if not isinstance(e[k], typ) or isinstance(e[k], bool):
                        raise err(f"{key}.{k}", f"must be {typ.__name__}, got {e[k]!r}")
                if e["num_records"] < 0:
                    raise err(f"{key}.num_records", f"must be >= 0, got {e['num_records']}")
                if not 0 <= e["num_bytes"] <= MAX_SHARD_BYTES:
                    raise err(f"{key}.num_bytes",
                              f"must be in [0, {MAX_SHARD_BYTES}], got {e['num_bytes']}")
                if e["num_records"] > e["num_bytes"]:
                    raise err(f"{key}.num_records", f"{e['num_records']} records cannot fit "
                              f"in {e['num_bytes']} bytes")
                if not _SHA_RE.match(e["sha256"]):
                    raise err(f"{key}.sha256", "must be 64 lowercase hex digits")
                _check_relative(e["path"], err, f"{key}.path")
                shards.append(ShardEntry(e["path"], e["num_records"], e["num_bytes"], e["sha256"]))
            skipped = []
            for i, s in enumerate(sobj.get("skipped", [])):
                if not isinstance(s, dict) or not isinstance(s.get("input"), str) \
                        or not isinstance(s.get("reason"), str):
                    raise err(f"splits.{name}.skipped[{i}]", "must be {input: str, reason: str}")
                skipped.append(SkippedInput(s["input"], s["reason"]))
            splits[name] = SplitInfo(shards, skipped)
        return cls(schema=schema, splits=splits, class_names=class_names,
                   compression=compression, tool_version=obj["tool_version"],
                   schema_version=sv, source=obj.get("source", {}),
                   settings=obj.get("settings", {}))

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> Manifest:
        """Read and validate ``directory/manifest.json`` (or a manifest file path).

        Rejects malformed JSON, missing keys, bad types and sizes, and shard
        paths that would resolve outside the dataset directory (``..``,
        absolute paths, symlinks pointing elsewhere).
        """
        d = os.fspath(directory)
        path = d if os.path.isfile(d) else os.path.join(d, MANIFEST_NAME)
        base = os.path.dirname(os.path.abspath(path))
        if not os.path.isfile(path):
            raise ManifestError(f"no {MANIFEST_NAME} in {d}; convert the data with "
                                "`tfpipe convert`, or read bare shards with a glob "
                                f"such as '{os.path.join(d, '*.tfrecord')}'")
        size = os.path.getsize(path)
        if size > MAX_MANIFEST_BYTES:
            raise ManifestError(f"{path}: {size} bytes is larger than any real manifest "
                                f"(limit {MAX_MANIFEST_BYTES}); refusing to read it")
        try:
            with open(path, encoding="utf-8") as f:
                obj = json.load(f)
        except UnicodeDecodeError as e:
            raise ManifestError(f"{path}: not UTF-8 text ({e})") from e
        except json.JSONDecodeError as e:
            raise ManifestError(f"{path}: malformed JSON at line {e.lineno}, column {e.colno}: "
                                f"{e.msg}") from e
        manifest = cls.from_json(obj, where=path)
        real_base = os.path.realpath(base)
        for name, info in manifest.splits.items():
            for i, s in enumerate(info.shards):
                resolved = os.path.realpath(os.path.join(real_base, s.path))
                if os.path.commonpath([real_base, resolved]) != real_base:
                    raise ManifestError(f"{path}: splits.{name}.shards[{i}].path: {s.path!r} "
                                        f"resolves to {resolved}, outside the dataset "
                                        f"directory {real_base}; refusing to read it")
        return manifest

    # ----------------------------------------------------------------- helpers
    def shard_paths(self, directory: str | os.PathLike[str], split: str) -> list[str]:
        """Absolute paths of a split's shards (after `load` validated them)."""
        if split not in self.splits:
            raise ManifestError(f"split {split!r} is not in the manifest; "
                                f"available: {sorted(self.splits)}")
        base = os.fspath(directory)
        if os.path.isfile(base):
            base = os.path.dirname(base)
        return [os.path.join(os.path.abspath(base), s.path) for s in self.splits[split].shards]

    @property
    def num_records(self) -> dict[str, int]:
        return {name: info.num_records for name, info in self.splits.items()}


def _check_relative(p: str, err: Any, key: str) -> None:
    if not p or "\x00" in p:
        raise err(key, "must be a non-empty path")
    if os.path.isabs(p) or p.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", p):
        raise err(key, f"{p!r} is absolute; shard paths are relative to the dataset directory")
    parts = re.split(r"[\\/]", p)
    if ".." in parts:
        raise err(key, f"{p!r} contains '..'; shard paths must stay inside the dataset directory")
