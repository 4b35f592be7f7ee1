"""`adopt`: a tfpipe manifest for shards tfpipe did not write, without rewriting them.

Every shard is read once, frame by frame with both CRCs checked (a damaged shard
is refused, by name: adopting it would promise records it does not hold), and
hashed; every record is decoded to infer the schema over ALL records (a feature
absent from some, or of varying length, is ``var``; one value everywhere is a
fixed scalar; a key's dtype must agree across shards), the split of each shard
comes from its file name (`records.splits`), and the labels are counted so that
a label range that cannot fit ``num_classes`` is caught before training. The
manifest is data (JSON, `Manifest.save`), never code; after it, `verify`,
`check`, cardinality and exact resume work as for converted data.
"""

from __future__ import annotations

import glob as globlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfpipe.errors import InputError, ManifestError, RecordError
from tfpipe.records.codec import _KIND_DTYPE, _example_pb2
from tfpipe.records.framing import detect_compression, iter_frames
from tfpipe.records.manifest import MANIFEST_NAME, Manifest, ShardEntry, SplitInfo
from tfpipe.records.schema import VERSION_KEY, FeatureSpec, Schema, known_feature
from tfpipe.records.splits import directory_shards, split_of
from tfpipe.records.verify import _sha256

# int64 scalar keys whose values are class indices, first found wins
LABEL_KEYS = ("image/class/label", "label")
# the text of each class index, beside the label key
CLASS_TEXT_KEYS = {"image/class/label": "image/class/text", "label": "label_text"}


@dataclass
class _Feature:
    dtypes: set[str] = field(default_factory=set)
    min_len: int | None = None
    max_len: int = 0
    records: int = 0  # records holding it


@dataclass
class AdoptReport:
    """What `adopt` wrote: the manifest, where, and what it learned."""

    manifest: Manifest
    manifest_path: str
    out_dir: str
    linked: list[str] = field(default_factory=list)  # shards hard-linked into out_dir
    label_key: str | None = None
    label_counts: dict[int, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"manifest": self.manifest_path, "out_dir": self.out_dir,
                "splits": {k: {"shards": len(v.shards), "records": v.num_records,
                               "bytes": v.num_bytes}
                           for k, v in sorted(self.manifest.splits.items())},
                "schema": self.manifest.schema.to_json(),
                "class_names": list(self.manifest.class_names),
                "label_key": self.label_key,
                "label_counts": {str(k): v for k, v in sorted(self.label_counts.items())},
                "linked": self.linked}


def _files(path: str) -> tuple[list[str], str]:
    """The shards to adopt and the directory holding them (all in one)."""
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, MANIFEST_NAME)):
            raise ManifestError(f"{path} already has a {MANIFEST_NAME}: nothing to adopt "
                                f"(`tfpipe verify {path}` checks it)")
        files = directory_shards(path)
        if not files:
            raise InputError(f"{path}: no TFRecord shards (*.tfrecord, *.tfrecord.gz, *.tfrec, "
                             "NAME-SPLIT.tfrecord-00000-of-00004) to adopt")
    else:
        files = sorted(f for f in globlib.glob(path) if os.path.isfile(f)
                       and os.path.basename(f) != MANIFEST_NAME)
        if not files:
            raise InputError(f"no files match {path!r}; pass a directory of shards or a "
                             "glob of them (quoted)")
    dirs = sorted({os.path.dirname(os.path.abspath(f)) for f in files})
    if len(dirs) > 1:
        raise InputError(f"{path!r}: the shards lie in {len(dirs)} directories ({dirs[:3]}); "
                         "a manifest lists the shards of one directory: adopt each, or "
                         "gather them in one")
    return files, dirs[0]


def _place(files: list[str], src_dir: str, out_dir: str) -> tuple[list[str], list[str]]:
    """The shards as the manifest in `out_dir` will find them: themselves when
    `out_dir` is their directory, else hard links in `out_dir` (same bytes, no
    copy; a manifest's shard paths may not leave its directory)."""
    if os.path.realpath(out_dir) == os.path.realpath(src_dir):
        return files, []
    os.makedirs(out_dir, exist_ok=True)
    if os.path.isfile(os.path.join(out_dir, MANIFEST_NAME)):
        raise ManifestError(f"{out_dir} already has a {MANIFEST_NAME}; choose an empty --out")
    placed, linked = [], []
    for f in files:
        target = os.path.join(out_dir, os.path.basename(f))
        if os.path.exists(target):
            if not os.path.samefile(target, f):
                raise InputError(f"{target} exists and is not {f}; choose an empty --out")
        else:
            try:
                os.link(f, target)
            except OSError as e:
                raise InputError(
                    f"cannot hard-link {f} into {out_dir} ({e.strerror}): --out must be on "
                    "the same file system as the shards (a manifest lists files inside its "
                    "own directory; adopting never copies or rewrites the data), or leave "
                    f"--out out to write {MANIFEST_NAME} beside the shards") from e
            linked.append(target)
        placed.append(target)
    return placed, linked


def _schema(features: dict[str, _Feature], total: int, first_shard: dict[str, str]) -> Schema:
    specs = []
    for name in sorted(features):
        if name == VERSION_KEY:
            continue
        st = features[name]
        if len(st.dtypes) > 1:
            raise InputError(f"feature {name!r} holds {sorted(st.dtypes)} in different records "
                             f"(first in {first_shard[name]}); a feature has one type")
        dtype = next(iter(st.dtypes))
        always_one = st.records == total and st.min_len == st.max_len == 1
        known = known_feature(name)
        fits = known is not None and known.dtype == dtype and (
            known.kind == "var" or (st.min_len == st.max_len == max(known.num_elements, 1)
                                    and (st.records == total or known.default is not None)))
        if fits:
            specs.append(known)  # tfpipe's own key, as tfpipe writes it: its standard spec
        elif always_one:
            specs.append(FeatureSpec(name, dtype, [], "fixed"))
        else:  # absent from some records, or of varying length
            specs.append(FeatureSpec(name, dtype, [], "var"))
    return Schema(specs)


def _class_names(text: dict[int, set[bytes]], counts: dict[int, int]) -> list[str]:
    """Class names from the text beside each label, when every label 0..max has
    exactly one text; else none (not derivable)."""
    if not counts or min(counts) < 0:
        return []
    n = max(counts) + 1
    if any(len(text.get(i, ())) != 1 for i in range(n)):
        return []
    return [next(iter(text[i])).decode("utf-8", "replace") for i in range(n)]


def adopt(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
          class_names: Sequence[str] | None = None,
          progress: Callable[[str], None] | None = None) -> AdoptReport:
    """Write a tfpipe manifest for existing shards (a directory or a glob).

    ``out``: where manifest.json goes (default: beside the shards); another
    directory gets hard links to the shards (never copies). ``class_names``: the
    class list (index i is class i); default derived from the text beside the
    label (``image/class/text``, ``label_text``) when that is complete, else
    none. Refuses damaged shards (`RecordError` naming the record: run `tfpipe
    verify --salvage` first), records that are no tf.train.Example, a feature
    whose type differs between records, and mixed GZIP / plain shards.
    """
    files, src_dir = _files(os.fspath(path))
    out_dir = os.path.abspath(os.fspath(out)) if out is not None else src_dir
    comps = {detect_compression(f) for f in files}
    if len(comps) > 1:
        raise InputError(f"{os.fspath(path)!r} mixes GZIP and plain shards; adopt them "
                         "separately")
    compression = comps.pop()
    pb = _example_pb2()
    features: dict[str, _Feature] = {}
    first_shard: dict[str, str] = {}
    label_key: str | None = None
    counts: dict[int, int] = {}
    texts: dict[int, set[bytes]] = {}
    entries: dict[str, list[tuple[str, int, int, str]]] = {}
    total = 0
    for f in files:
        if progress:
            progress(f)
        n = 0
        try:
            for index, offset, data in iter_frames(f, compression):
                ex = pb.Example()
                try:
                    ex.ParseFromString(data)
                except Exception as e:  # noqa: BLE001 - any protobuf failure
                    raise InputError(f"{f}: record {index} at byte {offset} is not a "
                                     f"tf.train.Example ({e}); only Example records can be "
                                     "adopted") from e
                feats = ex.features.feature
                for name in feats:
                    which = feats[name].WhichOneof("kind") or "bytes_list"
                    values = getattr(feats[name], which).value
                    st = features.get(name)
                    if st is None:
                        st = features[name] = _Feature()
                        first_shard[name] = f
                    st.dtypes.add(_KIND_DTYPE[which])
                    st.records += 1
                    st.min_len = len(values) if st.min_len is None else min(st.min_len,
                                                                            len(values))
                    st.max_len = max(st.max_len, len(values))
                if label_key is None:
                    label_key = next((k for k in LABEL_KEYS if k in feats and
                                      feats[k].WhichOneof("kind") == "int64_list"), None)
                if label_key is not None and label_key in feats:
                    vals = feats[label_key].int64_list.value
                    if len(vals) == 1:
                        counts[vals[0]] = counts.get(vals[0], 0) + 1
                        tk = CLASS_TEXT_KEYS[label_key]
                        if tk in feats and feats[tk].bytes_list.value:
                            texts.setdefault(vals[0], set()).add(feats[tk].bytes_list.value[0])
                n += 1
        except RecordError as e:
            raise RecordError(f"{e}; a damaged shard cannot be adopted: `tfpipe verify "
                              f"{src_dir} --salvage OUT` writes its readable records, then "
                              "adopt OUT", path=e.path, index=e.index, offset=e.offset) from e
        total += n
        split = split_of(f) or "train"  # unnamed shards are the training data (splits.py)
        entries.setdefault(split, []).append((f, n, os.path.getsize(f), _sha256(f)))
    if total == 0:
        raise InputError(f"{os.fspath(path)!r}: every shard is empty; nothing to adopt")
    schema = _schema(features, total, first_shard)
    placed, linked = _place(files, src_dir, out_dir)
    where = dict(zip(files, placed))
    splits = {split: SplitInfo([ShardEntry(os.path.relpath(where[f], out_dir).replace(os.sep, "/"),
                                           n, size, sha) for f, n, size, sha in shards])
              for split, shards in entries.items()}
    names = list(class_names) if class_names is not None else _class_names(texts, counts)
    source: dict[str, Any] = {"kind": "adopted", "path": os.fspath(path)}
    if label_key is not None and counts:
        # the label range, for the check against num_classes at build time
        source["labels"] = {"key": label_key, "min": min(counts), "max": max(counts),
                            "counts": {str(k): v for k, v in sorted(counts.items())}}
    manifest = Manifest(schema=schema, splits=splits, class_names=names,
                        compression=compression, source=source)
    saved = manifest.save(out_dir)
    return AdoptReport(manifest, saved, out_dir, linked, label_key, dict(sorted(counts.items())))
