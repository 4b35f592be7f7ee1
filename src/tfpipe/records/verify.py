"""`verify`: manifest vs files, every record's CRCs, optionally every image and box.

Findings beyond the framing kinds of `scan_file`:
``manifest`` (manifest.json unreadable or invalid), ``missing-file``,
``size-mismatch``, ``checksum-mismatch``, ``count-mismatch``,
``unlisted-file`` (a shard or leftover temp file the manifest does not list),
and with ``deep=True``: ``bad-example`` (not an Example, or not matching the
manifest's schema), ``bad-image`` (does not decode, a JPEG whose strict decode
reports a libjpeg warning -- a damaged scan TF would fill with gray -- or a
decoded size that differs from the stored one), ``bad-box``, ``bad-label``,
``bad-mask`` (a segmentation mask, ``image/segmentation/class/encoded``, that
does not decode as a single-channel PNG of the image's size, or holds a class
value outside the manifest's classes other than 255 = ignore),
``bad-instance-mask`` (an instance mask, ``image/object/mask``, that does not decode
as a single-channel 0/1 PNG of the image's size, or a mask count that differs from
the box count) and ``bad-keypoint`` (``image/object/keypoint/{y,x,visibility}`` of
different lengths, not K per box -- K from the manifest's ``source.keypoints`` --,
a visibility outside {0, 1, 2}, or a coordinate outside [0, 1]).
"""

from __future__ import annotations

import glob as globlib
import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfpipe.errors import InputError, ManifestError, tf_error_text
from tfpipe.records.codec import decode_example
from tfpipe.records.framing import Finding, _Buffer, detect_compression, walk
from tfpipe.records.imagecheck import is_jpeg, jpeg_damage
from tfpipe.records.manifest import MANIFEST_NAME, Manifest
from tfpipe.records.packed import shard_rows
from tfpipe.records.schema import (AREA_KEY, INSTANCE_MASK_KEY, IS_CROWD_KEY,
                                   KEYPOINT_VISIBILITY_KEY, KEYPOINT_X_KEY, KEYPOINT_Y_KEY,
                                   MASK_KEY, Schema)
from tfpipe.records.splits import directory_shards
from tfpipe.records.writer import SHARD_NAME_RE

_KEYPOINT_KEYS = (KEYPOINT_Y_KEY, KEYPOINT_X_KEY, KEYPOINT_VISIBILITY_KEY)
RECORD_KINDS = ("corrupted-length", "corrupted-data", "truncated", "not-a-tfrecord", "empty")


@dataclass
class VerifyReport:
    """Result of `verify`; ``ok`` is True only when nothing was found."""

    path: str
    deep: bool
    findings: list[Finding] = field(default_factory=list)
    files_checked: int = 0
    records_checked: int = 0
    bytes_checked: int = 0
    manifest: bool = False
    expected_records: dict[str, int] = field(default_factory=dict)  # path -> manifest count
    # what could not be checked (no manifest: counts, sizes, sha256), one line each
    unchecked: list[str] = field(default_factory=list)
    # without a manifest: what was checked instead, one line each
    checked: list[str] = field(default_factory=list)
    # every file scanned: path -> intact records; and its sha256 where it was hashed
    file_records: dict[str, int] = field(default_factory=dict)
    file_sha256: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def damaged_files(self) -> list[str]:
        """Files whose frames are damaged (candidates for `salvage`)."""
        return sorted({f.path for f in self.findings
                       if f.kind in RECORD_KINDS and f.kind != "empty"})

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "deep": self.deep,
                "manifest": self.manifest, "files_checked": self.files_checked,
                "records_checked": self.records_checked, "bytes_checked": self.bytes_checked,
                "findings": [f.to_dict() for f in self.findings],
                "damaged_files": self.damaged_files,
                "expected_records": self.expected_records, "unchecked": self.unchecked,
                "checked": self.checked}


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(4 << 20):
            h.update(chunk)
    return h.hexdigest()


class _DeepChecker:
    """Decodes images with TensorFlow and checks boxes and labels of one record."""

    def __init__(self, num_classes: int | None, schema: Schema | None = None,
                 num_keypoints: int | None = None) -> None:
        import tensorflow as tf

        self.tf = tf
        self.num_classes = num_classes
        self.schema = schema
        self.num_keypoints = num_keypoints  # K from the manifest, when it names them
        self.block_rows: dict[str, int] = {}  # packed layout: rows per shard, as read

    def _packed_findings(self, path: str, ex: dict[str, list[Any]]) -> list[str]:
        """A block of the packed table layout (tfpipe.records.packed): every column
        holds `tfpipe/rows` values, every missing index lies in the block."""
        from tfpipe.records.packed import MISSING_PREFIX, ROWS_KEY, is_packed

        if self.schema is None or not is_packed(self.schema) or not ex.get(ROWS_KEY):
            return []
        rows = int(ex[ROWS_KEY][0])
        self.block_rows[path] = self.block_rows.get(path, 0) + rows
        problems = []
        for name in self.schema:
            if name.startswith("tfpipe/"):
                if name.startswith(MISSING_PREFIX) and any(
                        not 0 <= int(i) < rows for i in ex.get(name, [])):
                    problems.append(f"feature {name!r} holds an index outside the block's "
                                    f"{rows} rows")
                continue
            if len(ex.get(name, [])) != rows:
                problems.append(f"feature {name!r} has {len(ex.get(name, []))} values, the "
                                f"block's tfpipe/rows says {rows}")
        return problems

    def _schema_findings(self, data: bytes) -> list[str]:
        """Features missing, of the wrong type, or of the wrong size for the schema."""
        from tfpipe.records.codec import _example_pb2

        ex = _example_pb2().Example.FromString(data)
        feats = ex.features.feature
        kinds = {"string": "bytes_list", "int64": "int64_list", "float32": "float_list"}
        problems = []
        for name, spec in (self.schema or {}).items():
            if name not in feats:
                if spec.kind == "fixed" and spec.default is None:
                    problems.append(f"required feature {name!r} is missing")
                continue
            which = feats[name].WhichOneof("kind")
            n = len(getattr(feats[name], which).value) if which else 0
            if which is not None and which != kinds[spec.dtype]:
                problems.append(f"feature {name!r} holds {which}, the schema says {spec.dtype}")
            elif spec.kind == "fixed" and n != max(spec.num_elements, 1):
                problems.append(f"feature {name!r} has {n} values, fixed shape {spec.shape} "
                                f"needs {max(spec.num_elements, 1)}")
        return problems

    def check(self, path: str, index: int, offset: int, space: str,
              data: bytes) -> list[Finding]:
        def f(kind: str, msg: str) -> Finding:
            return Finding(kind, path, index, offset, msg, offset_space=space)

        try:
            ex = decode_example(data)
        except Exception as e:  # noqa: BLE001 - any protobuf failure is the finding
            return [f("bad-example", f"not a tf.train.Example ({e})")]
        out: list[Finding] = [f("bad-example", m) for m in self._schema_findings(data)]
        out += [f("bad-example", m) for m in self._packed_findings(path, ex)]
        key = image_key(ex)
        enc = ex.get(key) if key else None
        # the record's own name, so the message points at the source image too
        names = ex.get("image/filename") or ex.get("image/source_id") or []
        name = names[0].decode("utf-8", "replace") if names and names[0] else ""
        which = f"image {name!r} ({key!r})" if name else repr(key)
        size: tuple[int, int] | None = None  # the image's decoded height, width
        damage = jpeg_damage(enc[0]) if enc and is_jpeg(enc[0]) else None
        if damage is not None:
            # TF would decode it (gray where the data is missing): a strict
            # decode is the only way to see it
            out.append(f("bad-image", f"{which}: damaged JPEG scan (a strict decode fails: "
                                      f"{damage[:200]})"))
        elif enc:
            try:
                img = self.tf.io.decode_image(enc[0], expand_animations=False).numpy()
            except Exception as e:  # noqa: BLE001
                msg = tf_error_text(e)  # TF's message without its function-node internals
                out.append(f("bad-image", f"{which} does not decode: {msg[:200]}"))
            else:
                h, w = ex.get("image/height", [None])[0], ex.get("image/width", [None])[0]
                size = (int(img.shape[0]), int(img.shape[1]))
                if h is not None and w is not None and (h, w) != img.shape[:2]:
                    out.append(f("bad-image", f"{which}: decoded size {img.shape[0]}x{img.shape[1]} "
                                 f"differs from image/height x image/width {h}x{w}"))
        if ex.get(MASK_KEY):
            out.extend(f("bad-mask", m) for m in self._mask_findings(ex[MASK_KEY][0], size, name))
        boxes = [ex.get(f"image/object/bbox/{k}") for k in ("ymin", "xmin", "ymax", "xmax")]
        if any(b is not None for b in boxes):
            lens = {len(b or []) for b in boxes}
            if len(lens) != 1:
                out.append(f("bad-box", f"bbox lists have different lengths {sorted(lens)}"))
            else:
                for j, (y0, x0, y1, x1) in enumerate(zip(*[b or [] for b in boxes])):
                    if not all(0.0 <= v <= 1.0 for v in (y0, x0, y1, x1)):
                        out.append(f("bad-box", f"box {j} ({y0:.4g},{x0:.4g},{y1:.4g},"
                                     f"{x1:.4g}) yxyx is outside [0, 1]"))
                    elif y0 > y1 or x0 > x1:
                        out.append(f("bad-box", f"box {j} has ymin>ymax or xmin>xmax "
                                     f"({y0:.4g},{x0:.4g},{y1:.4g},{x1:.4g})"))
                n = len(boxes[0] or [])
                labels = ex.get("image/object/class/label")
                if labels is not None and labels and len(labels) != n:
                    out.append(f("bad-box", f"{n} boxes but {len(labels)} object labels"))
                for key in (AREA_KEY, IS_CROWD_KEY):
                    if self._has(ex, key) and len(ex.get(key) or []) != n:
                        out.append(f("bad-box", f"{n} boxes but {len(ex.get(key) or [])} "
                                     f"values of {key!r}"))
                if self._has(ex, INSTANCE_MASK_KEY):
                    out.extend(f("bad-instance-mask", m) for m in self._instance_mask_findings(
                        ex.get(INSTANCE_MASK_KEY) or [], n, size, name))
                if any(self._has(ex, k) for k in _KEYPOINT_KEYS):
                    out.extend(f("bad-keypoint", m) for m in self._keypoint_findings(ex, n))
        if self.num_classes:
            labels = list(ex.get("image/class/label", [])) + \
                list(ex.get("image/object/class/label", []))
            bad = [v for v in labels if not 0 <= v < self.num_classes]
            if bad:
                out.append(f("bad-label", f"labels {bad[:5]} outside [0, {self.num_classes})"))
        return out

    def _has(self, ex: dict[str, list[Any]], key: str) -> bool:
        """The record holds `key`, or its schema declares it (an absent list is empty)."""
        return key in ex or (self.schema is not None and key in self.schema)

    def _instance_mask_findings(self, masks: list[bytes], n: int,
                                size: tuple[int, int] | None, name: str) -> list[str]:
        """Not one mask per box, or a mask that is not a 0/1 1-channel PNG of the image's size."""
        which = f"image {name!r}" if name else "record"
        if len(masks) != n:
            return [f"{which}: {len(masks)} instance masks ({INSTANCE_MASK_KEY!r}) for {n} "
                    "boxes; one mask per box, in box order"]
        problems = []
        import numpy as np

        for j, data in enumerate(masks):
            at = f"{which}: instance mask {j}"
            try:
                if not bytes(data[:8]) == b"\x89PNG\r\n\x1a\n":
                    raise ValueError("not a PNG")
                mask = self.tf.io.decode_png(data, channels=0).numpy()
            except Exception as e:  # noqa: BLE001
                problems.append(f"{at} does not decode: {tf_error_text(e)[:200]}")
                continue
            if mask.shape[-1] != 1:
                problems.append(f"{at} has {mask.shape[-1]} channels; an instance mask has 1")
            if size is not None and tuple(mask.shape[:2]) != size:
                problems.append(f"{at} is {mask.shape[0]}x{mask.shape[1]}, its image "
                                f"{size[0]}x{size[1]} (height x width)")
            values = np.unique(mask)
            if (values > 1).any():
                problems.append(f"{at} holds values {values[values > 1].tolist()[:5]}; an "
                                "instance mask holds 1 (the object) and 0")
        return problems

    def _keypoint_findings(self, ex: dict[str, list[Any]], n: int) -> list[str]:
        """Keypoint lists of different lengths, not K per box, or out-of-range values."""
        ys, xs, vs = (list(ex.get(k) or []) for k in _KEYPOINT_KEYS)
        if not len(ys) == len(xs) == len(vs):
            return [f"keypoint lists y, x, visibility have lengths {len(ys)}, {len(xs)}, "
                    f"{len(vs)}; they must be equal"]
        k = self.num_keypoints
        if k is not None and len(vs) != k * n:
            return [f"{len(vs)} keypoints for {n} boxes; the manifest names {k} per box "
                    f"({k * n} expected)"]
        if k is None and (len(vs) % n if n else len(vs)):
            return [f"{len(vs)} keypoints for {n} boxes: not a whole number per box"]
        problems = []
        bad_v = sorted({int(v) for v in vs if v not in (0, 1, 2)})
        if bad_v:
            problems.append(f"keypoint visibility values {bad_v[:5]} outside 0 (absent), "
                            "1 (occluded), 2 (visible)")
        out = [j for j, (y, x) in enumerate(zip(ys, xs)) if not (0 <= y <= 1 and 0 <= x <= 1)]
        if out:
            j = out[0]
            problems.append(f"{len(out)} keypoints outside [0, 1] (first: point {j}, y="
                            f"{ys[j]:.4g}, x={xs[j]:.4g})")
        return problems

    def _mask_findings(self, data: bytes, size: tuple[int, int] | None,
                       name: str) -> list[str]:
        """A mask that is not a 1-channel PNG of the image's size, or holds unknown classes."""
        which = f"mask of image {name!r} ({MASK_KEY!r})" if name else repr(MASK_KEY)
        tf = self.tf
        try:
            if not bytes(data[:8]) == b"\x89PNG\r\n\x1a\n":
                raise ValueError("not a PNG")
            mask = tf.io.decode_png(data, channels=0).numpy()
        except Exception as e:  # noqa: BLE001
            return [f"{which} does not decode: {tf_error_text(e)[:200]}"]
        problems = []
        if mask.shape[-1] != 1:
            problems.append(f"{which} has {mask.shape[-1]} channels; a class mask has 1")
        if size is not None and tuple(mask.shape[:2]) != size:
            problems.append(f"{which} is {mask.shape[0]}x{mask.shape[1]}, its image "
                            f"{size[0]}x{size[1]} (height x width)")
        if self.num_classes:
            import numpy as np

            values = np.unique(mask)
            bad = values[(values >= self.num_classes) & (values != 255)]
            if bad.size:
                problems.append(f"{which} has class values {bad.tolist()[:5]} outside "
                                f"[0, {self.num_classes}) and not 255 (ignore)")
        return problems


def _check_file(path: str, compression: str | None, report: VerifyReport,
                deep: _DeepChecker | None, expect_records: int | None = None,
                want_sha256: bool = False) -> tuple[int, str | None]:
    """Scan one file into the report; return its intact record count and, when
    asked, the file's sha256 (hashed from the mapping the scan just read, so a
    plain shard is read from disk once, not twice)."""
    # "auto" for a lone file; a manifest's compression is authoritative, as for tf.data.
    comp = detect_compression(path, compression)
    n = 0
    sha: str | None = None
    with _Buffer(path, comp) as buf:
        space = "decompressed" if comp == "gzip" else "file"
        for item in walk(buf):
            if isinstance(item, Finding):
                if item.kind == "empty" and expect_records == 0:
                    continue  # a declared-empty shard is fine
                report.findings.append(item)
                continue
            n += 1
            if deep is not None:
                data = bytes(buf.mm[item.start:item.start + item.length])
                report.findings.extend(deep.check(path, item.index, item.offset, space, data))
        report.bytes_checked += buf.size
        if want_sha256 and comp != "gzip":  # buf.mm is the file itself
            sha = hashlib.sha256(buf.mm).hexdigest()
    if want_sha256 and sha is None:  # GZIP: buf is the decompressed copy
        sha = _sha256(path)
    report.files_checked += 1
    report.records_checked += n
    report.file_records[path] = n
    if sha is not None:
        report.file_sha256[path] = sha
    return n, sha


NO_MANIFEST = ("no manifest.json: file sizes and sha256 against a manifest, the record counts "
               "a manifest declares, every record against a declared schema and labels "
               "against a class list (nothing to compare them with); `tfpipe adopt PATH` "
               "writes a manifest for these shards, without rewriting them")
_SHARD_SUFFIXES = (".tfrecord", ".tfrecord.gz", ".tfrec", ".tfrec.gz")
# the magic bytes of the formats tf.io.decode_image reads
_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"BM")


def image_key(example: dict[str, list[Any]]) -> str | None:
    """The feature of a decoded example (`decode_example`) that holds the image:
    ``image/encoded`` when present, else the one bytes feature whose first value
    starts with JPEG, PNG, GIF or BMP magic bytes (None when there is none, or
    several: nothing to choose by)."""
    if example.get("image/encoded"):
        return "image/encoded"
    found = [k for k, v in sorted(example.items())
             if v and isinstance(v[0], bytes) and v[0].startswith(_IMAGE_MAGIC)]
    return found[0] if len(found) == 1 else None


def _no_manifest_notes(report: VerifyReport) -> None:
    """What a check without a manifest did and did not cover."""
    report.checked.append(f"the framing and CRCs of every record ({report.records_checked:,} "
                          f"intact records counted in {report.files_checked} files)")
    if report.deep:
        report.checked.append(
            "every record parses as a tf.train.Example; its image (image/encoded, or the one "
            "bytes feature holding JPEG/PNG/GIF/BMP bytes) decodes, strictly for a JPEG; "
            "boxes under image/object/bbox/* lie in [0, 1]")
    report.unchecked.append(NO_MANIFEST)


def _bare_files(p: str) -> list[str] | None:
    """The shards to check without a manifest: a glob's files, or the TFRecord
    files of a directory (None: `p` is neither)."""
    if os.path.isdir(p):  # also TFDS's NAME-train.tfrecord-00000-of-00004
        return sorted(set(directory_shards(p)) | {
            f for f in globlib.glob(os.path.join(p, "*"))
            if os.path.isfile(f) and SHARD_NAME_RE.match(os.path.basename(f))})
    if not os.path.exists(p) and globlib.has_magic(p):
        return sorted(f for f in globlib.glob(p) if os.path.isfile(f))
    return None


def _intact_note(report: VerifyReport, path: str, at: int) -> bool:
    """Whether the scan of `path` (findings from index `at` on) found its frames intact."""
    return not any(f.path == path and f.kind in RECORD_KINDS and f.kind != "empty"
                   for f in report.findings[at:])


def verify(path: str | os.PathLike[str], deep: bool = False,
           progress: Callable[[str], None] | None = None) -> VerifyReport:
    """Check a dataset directory (with manifest.json), a single shard file, a
    glob of shards or a directory of shards without a manifest.

    Directory: manifest valid; every listed shard exists with the recorded
    size, sha256 and record count; every frame's CRCs; files the manifest does
    not list. A mismatch over a shard whose frames are all intact says so (the
    manifest, or a rewrite, differs; not damage). Without a manifest every
    frame's CRCs are checked and ``report.unchecked`` says what could not be
    (counts, sizes, sha256); intact shards are then ``ok``. ``deep=True`` also
    decodes every image and checks boxes (within [0, 1], min <= max) and labels
    (within the class list, when a manifest gives one). A glob matching nothing
    raises `InputError`.
    """
    p = os.fspath(path)
    report = VerifyReport(path=p, deep=deep)
    if os.path.isfile(p) and os.path.basename(p) != MANIFEST_NAME:
        if progress:
            progress(p)
        _check_file(p, "auto", report, _DeepChecker(None) if deep else None)
        _no_manifest_notes(report)
        return report
    directory = p if os.path.isdir(p) else os.path.dirname(p)
    bare = None if os.path.isfile(os.path.join(directory, MANIFEST_NAME)) \
        and os.path.isdir(p) else _bare_files(p)
    if bare is not None:  # a glob, or a directory without manifest.json
        if not bare:
            if not os.path.isdir(p):
                raise InputError(f"no files match {p!r}; pass a dataset directory, a shard "
                                 "file or a glob of shards")
            report.findings.append(Finding(
                "manifest", os.path.join(directory, MANIFEST_NAME), None, None,
                f"no {MANIFEST_NAME} and no TFRecord files ({', '.join(_SHARD_SUFFIXES)}) "
                f"in {directory}"))
            return report
        checker = _DeepChecker(None) if deep else None
        for f in bare:
            if progress:
                progress(f)
            _check_file(f, "auto", report, checker)
        _no_manifest_notes(report)
        return report
    try:
        manifest = Manifest.load(p)
    except ManifestError as e:
        report.findings.append(Finding("manifest", os.path.join(directory, MANIFEST_NAME),
                                       None, None, str(e)))
        return report
    report.manifest = True
    names = ((manifest.source or {}).get("keypoints") or {}).get("names")
    checker = (_DeepChecker(len(manifest.class_names) or None, manifest.schema,
                            len(names) if names else None) if deep else None)
    listed: set[str] = set()
    for split in sorted(manifest.splits):
        split_rows = shard_rows(manifest, split)  # packed layout: rows per shard
        for entry, f in zip(manifest.splits[split].shards,
                            manifest.shard_paths(directory, split)):
            listed.add(os.path.realpath(f))
            report.expected_records[f] = entry.num_records
            if progress:
                progress(f)
            if not os.path.isfile(f):
                report.findings.append(Finding("missing-file", f, None, None,
                                               f"listed in split {split!r} but missing"))
                continue
            size = os.path.getsize(f)
            if size != entry.num_bytes:
                report.findings.append(Finding(
                    "size-mismatch", f, None, None,
                    f"{size} bytes on disk, manifest says {entry.num_bytes}"))
            at = len(report.findings)  # the checksum finding goes before the frame findings
            n, sha = _check_file(f, manifest.compression, report, checker, entry.num_records,
                                 want_sha256=True)
            rows = split_rows.get(entry.path)
            if checker is not None and rows is not None and f in checker.block_rows \
                    and checker.block_rows[f] != rows:
                report.findings.append(Finding(
                    "count-mismatch", f, None, None,
                    f"its blocks hold {checker.block_rows[f]} rows (tfpipe/rows), the "
                    f"manifest's settings.shard_stats says {rows}"))
            # every frame and CRC valid to the end of the file: what disagrees is the
            # manifest (or a rewrite of the shard), not damage; say which
            intact = _intact_note(report, f, at)
            if sha != entry.sha256:
                msg = f"sha256 {sha[:16]}... differs from the manifest's {entry.sha256[:16]}..."
                if intact and size == entry.num_bytes:
                    msg += ("; its records are intact (every frame and CRC valid"
                            + (", the count matches" if n == entry.num_records else "")
                            + "): the manifest's sha256 is wrong, or the shard was rewritten "
                            "after conversion")
                elif intact:
                    msg += ("; its records are intact (every frame and CRC valid): the shard "
                            "was changed after conversion (see its size and count)")
                report.findings.insert(at, Finding("checksum-mismatch", f, None, None, msg))
            if n != entry.num_records:
                if not intact:
                    msg = f"{n} intact records, manifest says {entry.num_records}"
                else:
                    msg = (f"manifest says {entry.num_records} records, the shard holds {n} "
                           "intact records and reads to its end (every frame and CRC valid): ")
                    if sha == entry.sha256:
                        msg += "the manifest is wrong, not the data"
                    elif size < entry.num_bytes:
                        msg += (f"the shard was cut between two records ({entry.num_bytes - size}"
                                " bytes short), or the manifest is wrong")
                    else:
                        msg += "the shard was rewritten after conversion, or the manifest is wrong"
                report.findings.append(Finding("count-mismatch", f, None, None, msg))
    for f in sorted(globlib.glob(os.path.join(directory, "*")) +
                    globlib.glob(os.path.join(directory, ".*"))):
        name = os.path.basename(f)
        if os.path.realpath(f) in listed or not os.path.isfile(f):
            continue
        if SHARD_NAME_RE.match(name) or re.match(r"^\..*\.tmp-\d+", name):
            report.findings.append(Finding(
                "unlisted-file", f, None, None,
                "shard or temporary file not listed in the manifest (left over from an "
                "earlier or interrupted run?); a glob over this directory would read it"))
    return report
