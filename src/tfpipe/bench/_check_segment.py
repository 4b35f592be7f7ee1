"""`tfpipe check` for a segmentation config (`data.task: segmentation`; docs/check.md).

The image checklist, with three checks that know masks:
- dtypes and shapes: image as for every image task, `mask` int32 [B, H, W, 1];
- labels: the stored masks of the train split's first records (decoded here with
  PIL, independently of the pipeline) hold only classes in [0, num_classes) or
  `data.ignore_label`; the share of ignore pixels stored and in the batches
  (padding outside the photo adds to it); the batches' masks in range too;
- masks aligned: each scanned mask has its image's size (the image's size read
  from its encoded header, and `image/height` / `image/width` when stored): the
  pipeline would fail (or, under on_error: skip, drop) every such record.
Failures name the shard, the record, the image's file name and the value.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tfpipe.bench._check_core import CheckResult, Context

# Records whose masks `check` decodes (the whole split when smaller): a PNG mask of a
# few hundred pixels decodes in well under a millisecond, so ~1 s for 1,000.
MASK_SCAN_LIMIT = 1_000
MAX_LISTED = 3  # problems named per check; the count says how many more


def _keys(s: Any) -> tuple[str, str]:
    from tfpipe.records import MASK_KEY

    keys = s.keys or {}
    return keys.get("image") or "image/encoded", keys.get("mask") or MASK_KEY


def _num_classes(s: Any, class_names: list[str]) -> int | None:
    return s.num_classes or len(class_names) or None


def iter_masks(s: Any, limit: int = MASK_SCAN_LIMIT
               ) -> Iterator[tuple[str, int, str, dict[str, list[Any]]]]:
    """(shard, record index, the image's name, the decoded Example) of the train
    split's first `limit` records."""
    from tfpipe.records import decode_example, iter_frames, open_source

    src = open_source(s.data_path, split="train")
    n = 0
    for f in src.files:
        for index, _, data in iter_frames(f, src.compression):
            if n >= limit:
                return
            n += 1
            ex = decode_example(data)
            names = ex.get("image/filename") or ex.get("image/source_id") or [b""]
            name = names[0].decode("utf-8", "replace") if isinstance(names[0], bytes) else ""
            yield f, index, name, ex


def _where(f: str, index: int, name: str) -> str:
    return f"record {index} of {f}" + (f" (image {name!r})" if name else "")


def _decode_mask(data: bytes) -> tuple[np.ndarray | None, str | None]:
    """The mask's class array [h, w], or why it is not a single-channel 8-bit image."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            mode = im.mode
            if mode != "L":
                return None, (f"mask is a PIL {mode!r} image; a class mask is single-channel "
                              "8-bit (L): reconvert with `tfpipe convert --masks`")
            return np.asarray(im), None
    except Exception as exc:  # noqa: BLE001 - any decode failure is the finding
        return None, f"mask does not decode ({type(exc).__name__}: {str(exc)[:80]})"


def _image_size(data: bytes) -> tuple[int, int] | None:
    """(height, width) of an encoded image from its header (the size a decode gives)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            return im.size[1], im.size[0]
    except Exception:  # noqa: BLE001 - an undecodable image is the bad_input check's
        return None


def scan_masks(s: Any, limit: int = MASK_SCAN_LIMIT) -> dict[str, Any]:
    """Decode the stored masks of the train split's first `limit` records.

    Returns ``range`` and ``aligned`` (lists of problems naming record and value),
    ``counts`` (pixels per stored value), ``scanned`` and ``class_names``."""
    from tfpipe.records import open_source

    class_names = open_source(s.data_path, split="train").class_names
    n = _num_classes(s, class_names)
    ignore = s.ignore_label
    image_key, mask_key = _keys(s)
    counts = np.zeros(256, np.int64)
    bad_range: list[str] = []
    bad_size: list[str] = []
    extra = {"range": 0, "aligned": 0}
    scanned = 0

    def note(kind: str, out: list[str], text: str) -> None:
        if len(out) < MAX_LISTED:
            out.append(text)
        else:
            extra[kind] += 1

    for f, index, name, ex in iter_masks(s, limit):
        scanned += 1
        where = _where(f, index, name)
        stored = ex.get(mask_key)
        if not stored:
            note("aligned", bad_size, f"{where}: no mask ({mask_key!r})")
            continue
        mask, why = _decode_mask(stored[0])
        if mask is None:
            note("aligned", bad_size, f"{where}: {why}")
            continue
        values = np.bincount(mask.ravel(), minlength=256)
        counts += values
        present = np.flatnonzero(values)
        wrong = [int(v) for v in present if v != ignore and (n is not None and v >= n)]
        if wrong:
            note("range", bad_range, f"{where}: mask value {wrong[0]}"
                 + (f" (and {wrong[1:4]})" if len(wrong) > 1 else "")
                 + f" outside [0, {n}) and not data.ignore_label {ignore}")
        encoded = ex.get(image_key)
        size = _image_size(encoded[0]) if encoded else None
        mh, mw = mask.shape[:2]
        if size is not None and size != (mh, mw):
            note("aligned", bad_size, f"{where}: mask {mh}x{mw} (height x width), its image "
                 f"{size[0]}x{size[1]}")
            continue
        h, w = (ex.get("image/height") or [None])[0], (ex.get("image/width") or [None])[0]
        if h is not None and w is not None and (int(h), int(w)) != (mh, mw):
            note("aligned", bad_size, f"{where}: mask {mh}x{mw} (height x width), "
                 f"image/height x image/width {h}x{w}")
    for kind, out in (("range", bad_range), ("aligned", bad_size)):
        if extra[kind]:
            out.append(f"{extra[kind]} more such records")
    return {"range": bad_range, "aligned": bad_size, "counts": counts, "scanned": scanned,
            "class_names": class_names, "num_classes": n}


def _scan(ctx: Context) -> dict[str, Any]:
    """`scan_masks` once per checklist run (labels and masks aligned share it)."""
    cached = getattr(ctx, "_mask_scan", None)
    if cached is None:
        cached = scan_masks(ctx.settings)
        ctx._mask_scan = cached  # type: ignore[attr-defined]
    return cached


def _share(count: int, total: int) -> str:
    return f"{100.0 * count / total:.1f}%" if total else "n/a"


def check_dtypes(ctx: Context) -> CheckResult:
    """Image as for every image task; `mask` int32 [B, H, W, 1]; no NaN/Inf."""
    name = "dtypes and shapes"
    s = ctx.settings
    h, w = s.image_size
    batches = ctx.first_batches()
    if not batches:
        return CheckResult(name, False, "the pipeline produced no batch")
    want = np.dtype(s.output_dtype)
    problems = []
    for i, b in enumerate(batches):
        img, mask = b.get("image"), b.get("mask")
        if img is None or mask is None:
            problems.append(f"batch {i}: keys {sorted(b)}, want 'image' and 'mask'")
            continue
        n = img.shape[0]
        if img.dtype != want:
            problems.append(f"batch {i}: image dtype {img.dtype}, configured {want}")
        if list(img.shape[1:]) != [h, w, s.channels]:
            problems.append(f"batch {i}: image shape {list(img.shape)}, want [B, {h}, {w}, "
                            f"{s.channels}]")
        if s.drop_remainder and n != s.batch_size:
            problems.append(f"batch {i}: {n} images, pipeline.batch_size={s.batch_size}")
        if img.dtype.kind == "f" and not np.isfinite(img).all():
            problems.append(f"batch {i}: image has NaN/Inf")
        if mask.dtype != np.int32 or list(mask.shape) != [n, h, w, 1]:
            problems.append(f"batch {i}: mask {mask.dtype}{list(mask.shape)}, want int32 "
                            f"[{n}, {h}, {w}, 1]")
    if problems:
        return CheckResult(name, False, "; ".join(problems[:5]))
    desc = ", ".join(f"{k} {v.dtype}{list(v.shape)}" for k, v in sorted(batches[0].items()))
    return CheckResult(name, True, desc)


def check_labels(ctx: Context) -> CheckResult:
    """Stored mask values and the batches' masks in [0, num_classes) or ignore_label;
    the ignore share of both."""
    name = "labels"
    s = ctx.settings
    scan = _scan(ctx)
    n, ignore = scan["num_classes"], s.ignore_label
    counts = scan["counts"]
    total = int(counts.sum())
    found = [int(v) for v in np.flatnonzero(counts)]
    if scan["range"]:  # before building: the batches would carry the same values
        fix = (f"set data.num_classes to at least {max(v for v in found if v != ignore) + 1}"
               if n is not None and any(v >= n and v != ignore for v in found) else "")
        return CheckResult(name, False, "; ".join(scan["range"]) + f". Values found in "
                           f"{scan['scanned']} masks: {found}" + (f"; {fix}, or fix the "
                           "masks and reconvert" if fix else ""))
    problems = []
    seen = ignored = 0
    for i, b in enumerate(ctx.first_batches()):
        mask = b.get("mask")
        if mask is None:
            continue
        values = np.unique(mask)
        bad = [int(v) for v in values if v != ignore and (v < 0 or (n is not None and v >= n))]
        if bad:
            problems.append(f"batch {i}: mask values {bad[:5]} outside [0, {n}) and not "
                            f"data.ignore_label {ignore}")
        seen += mask.size
        ignored += int(np.count_nonzero(mask == ignore))
    if problems:
        return CheckResult(name, False, "; ".join(problems[:5]))
    if n is None:
        span = f"classes {[v for v in found if v != ignore]} (no data.num_classes or class names)"
    else:
        span = f"every value in [0, {n}) or {ignore}"
    return CheckResult(name, True, f"{scan['scanned']} stored masks: {span}; ignore "
                       f"({ignore}) {_share(int(counts[ignore]), total)} of the stored pixels, "
                       f"{_share(ignored, seen)} of the batches' (augmentation's padding adds "
                       "to it)")


def check_aligned(ctx: Context) -> CheckResult:
    """Each scanned record's mask has its image's size."""
    name = "masks aligned"
    scan = _scan(ctx)
    if scan["aligned"]:
        return CheckResult(name, False, "; ".join(scan["aligned"]) + ". The pipeline fails "
                           "such records (on_error: skip drops them); masks must have their "
                           "image's size: fix them and reconvert (`tfpipe verify --deep` "
                           "lists every one)")
    return CheckResult(name, True, f"{scan['scanned']} masks decoded: each has its image's "
                       "height and width (the image's header and image/height, image/width)")


def segmentation_checks(image_checks: dict[str, Callable[[Context], CheckResult]]
                        ) -> dict[str, Callable[[Context], CheckResult]]:
    """The image checklist (`check.CHECKS`) with the mask-aware checks swapped in and
    "masks" after "labels" (passed in: `check` imports this module, not the reverse)."""
    out: dict[str, Callable[[Context], CheckResult]] = {}
    for k, v in {**image_checks, "dtypes": check_dtypes, "labels": check_labels}.items():
        out[k] = v
        if k == "labels":
            out["masks"] = check_aligned
    return out
