"""`open_source`: the files, schema and parse function of a dataset, checked first.

A dataset directory's manifest is validated and its shards compared to it
(existence, size) before tf.data touches them; sha256 is left to `verify`
because hashing every byte on each start is too slow. A bare glob of shards, or
a directory of them without a manifest, has none: the split's files are found
by their names (`records.splits`) and the schema is guessed from the first record.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tfpipe.errors import InputError, ManifestError, RecordError, SchemaError
from tfpipe.records.codec import decode_example, schema_from_example
from tfpipe.records.framing import count_records, detect_compression, iter_frames
from tfpipe.records.manifest import MANIFEST_NAME, Manifest, ShardEntry
from tfpipe.records.splits import bare_shards
from tfpipe.records.schema import SCHEMA_VERSION, VERSION_KEY, FeatureSpec, Schema, known_feature
from tfpipe.records.tfds_dir import is_tfds_dir, load_manifest

Required = Iterable["str | FeatureSpec"] | Schema | None


@dataclass
class RecordSource:
    """Shards of one split plus how to parse them.

    ``parse(serialized)`` runs graph ops only (``tf.io.parse_single_example``):
    fixed features come back with their declared shape, var features as dense
    1-D tensors (``tf.sparse.to_dense``, padded with 0 / b""); `parse_batch`
    parses a batch with ``tf.io.parse_example`` and returns var features as
    ``tf.RaggedTensor``.
    """

    files: list[str]
    compression: str | None
    manifest: Manifest | None
    schema: Schema
    split: str
    dataset_version: int
    filled: dict[str, FeatureSpec] = field(default_factory=dict)
    _num_records: int | None = None

    @property
    def tf_compression(self) -> str:
        """``compression_type`` for ``tf.data.TFRecordDataset``: "GZIP" or ""."""
        return "GZIP" if self.compression == "gzip" else ""

    @property
    def num_records(self) -> int:
        """From the manifest; for a bare glob, counted once by walking the frames."""
        if self._num_records is None:
            self._num_records = sum(count_records(f, self.compression) for f in self.files)
        return self._num_records

    @property
    def class_names(self) -> list[str]:
        return list(self.manifest.class_names) if self.manifest else []

    def parse_spec(self, features: Iterable[str] | None = None) -> dict[str, Any]:
        """Features for ``tf.io.parse_example`` (all, or the named subset), with
        declared defaults for features filled in for older datasets."""
        names = list(self.schema) + [n for n in self.filled if n not in self.schema] \
            if features is None else list(features)
        spec = {}
        for name in names:
            fs = self.filled.get(name) or self.schema.get(name)
            if fs is None:
                raise SchemaError(f"feature {name!r} is not in the dataset schema "
                                  f"(has: {sorted(self.schema)}); list it in `required` "
                                  "with a default to read older datasets")
            spec[name] = fs.parse_feature()
        return spec

    def _var_names(self, spec: dict[str, Any]) -> list[str]:
        return [n for n in spec if (self.filled.get(n) or self.schema[n]).kind == "var"]

    def parse(self, serialized: Any, features: Iterable[str] | None = None) -> dict[str, Any]:
        """Parse one serialized example (a scalar string tensor); graph ops only.

        ``features`` parses only the named features (cheaper when a pipeline
        needs two of twelve)."""
        import tensorflow as tf

        spec = self.parse_spec(features)
        out = tf.io.parse_single_example(serialized, spec)
        for name in self._var_names(spec):
            out[name] = tf.sparse.to_dense(out[name])
        return out

    def parse_batch(self, serialized: Any,
                    features: Iterable[str] | None = None) -> dict[str, Any]:
        """Parse a batch ``[B]`` of examples; var features become RaggedTensors."""
        import tensorflow as tf

        spec = self.parse_spec(features)
        out = tf.io.parse_example(serialized, spec)
        for name in self._var_names(spec):
            out[name] = tf.RaggedTensor.from_sparse(out[name])
        return out

    def dataset(self, num_parallel_reads: int | None = None) -> Any:
        """``tf.data.TFRecordDataset`` over the files, in order (no parsing)."""
        import tensorflow as tf

        return tf.data.TFRecordDataset(self.files, compression_type=self.tf_compression,
                                       num_parallel_reads=num_parallel_reads)


def _resolve(path: str, split: str, check_files: bool = True
             ) -> tuple[list[str], Manifest | None, str | None]:
    if (os.path.isdir(path) and (os.path.isfile(os.path.join(path, MANIFEST_NAME))
                                 or is_tfds_dir(path))) \
            or os.path.basename(path) == MANIFEST_NAME:
        manifest = load_manifest(path)  # manifest.json, or made from a TFDS dir's metadata
        directory = path if os.path.isdir(path) else os.path.dirname(path)
        files = manifest.shard_paths(directory, split)
        if not files:
            raise ManifestError(f"{directory}: split {split!r} has no shards in the manifest")
        if check_files:
            problems = shard_problems(files)
            if problems:
                raise ManifestError(next(iter(problems.values())))
        return files, manifest, manifest.compression
    # a glob or a plain directory of shards: the split from the file names
    files = bare_shards(path, split)
    comps = {detect_compression(f) for f in files}
    if len(comps) > 1:
        raise InputError(f"{path!r} mixes GZIP and plain shards; read them separately")
    return files, None, comps.pop()


def _first_record(path: str, compression: str | None) -> bytes | None:
    for _, _, data in iter_frames(path, compression):
        return data
    return None


def _required_specs(required: Required) -> list[str | FeatureSpec]:
    if required is None:
        return []
    if isinstance(required, Schema):
        return list(required.values())
    if isinstance(required, (str, FeatureSpec)):
        return [required]
    return list(required)


def open_source(path_or_glob: str | os.PathLike[str], split: str = "train",
                required: Required = None, *, check_files: bool = True) -> RecordSource:
    """Open a dataset directory (manifest checked) or a glob of shards.

    ``required`` lists features the reader needs (names or `FeatureSpec`). A
    required feature the dataset lacks (written by an older schema) is filled
    with its declared default (from the given spec, else tfpipe's standard
    spec for that key); with no default, `SchemaError` names the feature and
    the shard. Datasets newer than this tfpipe's `SCHEMA_VERSION` are refused.

    ``check_files``: refuse a dataset whose shards are missing or differ in size
    from the manifest (`shard_problems`; the default). False leaves them in
    ``files`` for a reader that reads what it can and reports the rest (the
    pipeline under ``on_error: skip``).
    """
    path = os.fspath(path_or_glob)
    files, manifest, compression = _resolve(path, split, check_files)
    per_file: list[tuple[str, Schema, int]] = []
    if manifest is not None:
        schema = manifest.schema
        version = manifest.schema_version
        per_file = [(files[0], schema, version)]
    else:
        schema = Schema()
        version = SCHEMA_VERSION
        for f in files:
            try:
                rec = _first_record(f, compression)
            except RecordError as e:
                raise RecordError(f"{e} (run `tfpipe verify {f}`)", path=e.path,
                                  index=e.index, offset=e.offset) from e
            if rec is None:
                continue
            s = schema_from_example(rec)
            v = int(decode_example(rec).get(VERSION_KEY, [0])[0] or 0)
            per_file.append((f, s, v))
            if required is None:
                break  # per-file checks only matter for required features
        if not per_file:
            raise InputError(f"{path!r}: every file is empty; nothing to read")
        schema = per_file[0][1]
        version = min(v for _, _, v in per_file)
    if version > SCHEMA_VERSION:
        raise SchemaError(f"{files[0]}: dataset schema version {version} is newer than this "
                          f"tfpipe supports ({SCHEMA_VERSION}); upgrade tfpipe")
    filled: dict[str, FeatureSpec] = {}
    for req in _required_specs(required):
        name = req.name if isinstance(req, FeatureSpec) else str(req)
        for shard, s, v in per_file:
            if name in s:
                have = s[name]
                if isinstance(req, FeatureSpec) and req.dtype != have.dtype:
                    raise SchemaError(f"feature {name!r} in shard {shard} is {have.dtype}, "
                                      f"the reader needs {req.dtype}")
                continue
            spec = req if isinstance(req, FeatureSpec) else known_feature(name)
            if spec is None or (spec.default is None and spec.kind == "fixed"):
                raise SchemaError(
                    f"feature {name!r} is required but missing from shard {shard} "
                    f"(dataset schema version {v}, this tfpipe writes {SCHEMA_VERSION}) and "
                    "declares no default; re-convert the dataset or pass "
                    f"required=[FeatureSpec({name!r}, ..., default=...)]")
            filled[name] = spec
    return RecordSource(files=files, compression=compression, manifest=manifest,
                        schema=schema, split=split, dataset_version=version, filled=filled,
                        _num_records=(manifest.splits[split].num_records
                                      if manifest is not None else None))


def _manifest_entries(files: Iterable[str | os.PathLike[str]]) -> dict[str, ShardEntry]:
    """For each file listed in the manifest.json of its own directory: path (as
    given) -> its manifest entry. Files without a readable manifest, or not listed
    in it, are left out (a glob of bare shards)."""
    by_dir: dict[str, list[str]] = {}
    for f in files:
        p = os.fspath(f)
        by_dir.setdefault(os.path.dirname(os.path.abspath(p)), []).append(p)
    out: dict[str, ShardEntry] = {}
    for directory, paths in by_dir.items():
        if not os.path.isfile(os.path.join(directory, MANIFEST_NAME)) \
                and not is_tfds_dir(directory):
            continue
        try:
            manifest = load_manifest(directory)
        except ManifestError:
            continue
        listed: dict[str, ShardEntry] = {}
        for split in manifest.splits:
            for entry, f in zip(manifest.splits[split].shards,
                                manifest.shard_paths(directory, split)):
                listed[os.path.realpath(f)] = entry
        for p in paths:
            entry = listed.get(os.path.realpath(p))
            if entry is not None:
                out[p] = entry
    return out


def shard_entries(files: Iterable[str | os.PathLike[str]]) -> dict[str, ShardEntry]:
    """For each file listed in the manifest.json of its own directory: path (as
    given) -> its manifest entry (records, bytes, sha256). Files without a readable
    manifest, or not listed in it, are left out (a glob of bare shards)."""
    return _manifest_entries(files)


def shard_record_counts(files: Iterable[str | os.PathLike[str]]) -> dict[str, int]:
    """For each file listed in the manifest.json of its own directory: path (as
    given) -> the number of records the manifest says it holds. Files without a
    readable manifest, or not listed in it, are left out (a glob of bare shards)."""
    return {p: e.num_records for p, e in _manifest_entries(files).items()}


def shard_sizes(files: Iterable[str | os.PathLike[str]]) -> dict[str, tuple[int, int]]:
    """`shard_record_counts` with the bytes: path -> (records, bytes) as the
    manifest lists them (its `num_bytes`: what `check` verifies on disk)."""
    return {p: (e.num_records, e.num_bytes) for p, e in _manifest_entries(files).items()}


def shard_problems(files: Iterable[str | os.PathLike[str]]) -> dict[str, str]:
    """Shards listed in their directory's manifest that are missing or whose size
    on disk differs from it: path (as given) -> one message naming the shard, what
    is wrong with it (`describe_shard`) and the ways on. Empty when all match."""
    out: dict[str, str] = {}
    for p, entry in _manifest_entries(files).items():
        directory = os.path.dirname(os.path.abspath(p))
        ways = ("set pipeline.on_error: skip to read every readable record of the "
                "dataset (the loss is reported), or run "
                f"`tfpipe verify {directory} --salvage OUT` for a complete dataset "
                "of the readable records with a manifest that matches them")
        if not os.path.isfile(p):
            out[p] = (f"{p}: shard listed in the manifest is missing; its "
                      f"{entry.num_records} records cannot be read. Restore it, or {ways}")
            continue
        size = os.path.getsize(p)
        if size != entry.num_bytes:
            out[p] = (f"{p}: {size} bytes on disk, the manifest says {entry.num_bytes}: "
                      f"{describe_shard(p, entry)}. To go on, {ways}")
    return out


def describe_shard(path: str | os.PathLike[str], entry: ShardEntry,
                   compression: str | None = "auto") -> str:
    """What a shard that disagrees with its manifest entry holds, from one scan of
    its frames: damaged (where, how many whole records), or intact and so the
    manifest (or a rewrite of the shard) is what differs."""
    from tfpipe.records.framing import scan

    p = os.fspath(path)
    result = scan(p, compression)
    listed = entry.num_records
    bad = [f for f in result.findings if f.kind != "empty"]
    if bad:
        first = bad[0]
        what = ("it was truncated" if first.kind == "truncated"
                else f"its framing is damaged ({first.kind})")
        return (f"{what} at byte {first.offset} (record {first.index}); "
                f"{result.num_records} of the {listed} records the manifest lists are intact")
    n = result.num_records
    size = result.size
    if n == listed:
        return (f"all {n} records are intact (frames and CRCs to the end of the file) and "
                "their count matches: the shard was rewritten after conversion, or the "
                "manifest's num_bytes is wrong; the data itself is readable")
    if size < entry.num_bytes and n < listed:
        return (f"the manifest lists {listed} records, the shard holds {n} intact records "
                f"and ends cleanly on a record boundary, {entry.num_bytes - size} bytes "
                "short: it was cut between two records, or the manifest is wrong")
    return (f"the manifest lists {listed} records, the shard holds {n} intact records "
            "and ends cleanly: the shard was rewritten after conversion, or the manifest "
            "is wrong; the data itself is readable")
