"""Image folder + mask folder -> segmentation records.

IMAGES holds images at any depth (flat, or in sub-folders); MASKS holds, for
each, a single-channel PNG with the same relative path and stem
(``IMAGES/a/x.jpg`` -> ``MASKS/a/x.png``), pixel = class index, 255 = ignore.
Class names: from a classes file (line k names class k, so line 1 is usually
"background"), else ``class_0 .. class_K`` for the largest class K seen in any mask.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from tfpipe.convert._image import IMAGE_SUFFIXES
from tfpipe.convert._mask import (MASK_SUFFIX, check_classes, class_counts, histogram,
                                  names_from_counts, read_mask)
from tfpipe.convert._plan import Item
from tfpipe.convert._source import Enumeration, Source, file_size, image_values, read_image
from tfpipe.convert.folder import _walk
from tfpipe.errors import ConfigError, InputError
from tfpipe.records import MASK_FORMAT_KEY, MASK_KEY, Schema, segmentation_schema


def read_class_names(path: str | os.PathLike[str]) -> list[str]:
    """Class names from a text file, one per line (line k = class k); blank lines
    at the end are dropped, inner blank lines and duplicates are refused."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the classes file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: the classes file is not UTF-8 text") from None
    names = [line.strip() for line in lines]
    while names and not names[-1]:
        names.pop()
    if not names:
        raise InputError(f"{path}: the classes file names no classes (one name per line, "
                         "line 1 = class 0)")
    for i, name in enumerate(names):
        if not name:
            raise InputError(f"{path}: line {i + 1} is blank; every class 0..{len(names) - 1} "
                             "needs a name (line k+1 names class k)")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InputError(f"{path}: class name {dup!r} appears twice")
    if len(names) > 255:
        raise InputError(f"{path}: {len(names)} classes; a mask holds 0..254 (255 = ignore)")
    return names


def mask_relpath(image_relpath: str) -> str:
    return str(PurePosixPath(image_relpath).with_suffix(MASK_SUFFIX))


class SegmentationFolderSource(Source):
    """Each image stored as its original bytes with its mask as a lossless PNG."""

    kind = "folder"

    def __init__(self, root: str | os.PathLike[str], masks: str | os.PathLike[str],
                 classes: str | os.PathLike[str] | None = None) -> None:
        self.root = str(Path(root).resolve())
        self.masks = str(Path(masks).resolve())
        if not Path(self.root).is_dir():
            raise InputError(f"{root}: not a directory (images for --masks: IMAGES/**/<image>)")
        if not Path(self.masks).is_dir():
            raise InputError(f"{masks}: not a directory (masks: MASKS/**/<stem>.png)")
        if Path(self.masks) == Path(self.root):
            raise ConfigError(f"{masks}: the masks must be in their own folder, not among "
                              "the images")
        self.class_names = read_class_names(classes) if classes is not None else None

    def enumerate(self) -> Enumeration:
        out = Enumeration()
        root, masks = Path(self.root), Path(self.masks)
        inside = masks.is_relative_to(root)
        owner: dict[str, str] = {}  # mask relative path -> the image it belongs to
        for path in _walk(root):
            if inside and (root / path).is_relative_to(masks):
                continue
            if not path.lower().endswith(IMAGE_SUFFIXES):
                out.ignored.append((path, "not an image file extension "
                                          f"({', '.join(IMAGE_SUFFIXES)})"))
                continue
            size = file_size(root / path)
            if size is None:
                out.bad.append((Item(path, 0, None), "cannot read file"))
                continue
            mask = mask_relpath(path)
            if mask in owner:
                out.bad.append((Item(path, 0, None),
                                f"{owner[mask]} has the same stem, so both would get mask "
                                f"{mask}; rename one image (and its mask)"))
                continue
            owner[mask] = path
            mask_size = file_size(masks / mask)
            if mask_size is None:
                out.bad.append((Item(path, 0, None),
                                f"mask not found: {mask} in {self.masks} (a mask is a PNG "
                                "with the image's relative path and stem)"))
                continue
            out.items.append(Item(key=path, size=size + mask_size, payload=[path, mask]))
        if not out.items and not out.bad:
            raise InputError(f"{self.root}: no images ({', '.join(IMAGE_SUFFIXES)})")
        # Masks that no image claims: most often a misnamed one, so list them.
        for path in _walk(masks):
            if path not in owner and not (root.is_relative_to(masks)
                                          and (masks / path).is_relative_to(root)):
                out.ignored.append((f"{Path(self.masks).name}/{path}",
                                    "a mask without an image of the same relative path "
                                    "and stem"))
        return out

    def schema(self) -> Schema:
        return segmentation_schema()

    def settings(self) -> dict[str, Any]:
        return {"format": self.kind, "task": "segmentation"}

    def manifest_class_names(self, stats: dict[str, int]) -> list[str]:
        """The classes file's names, else class_0..class_K for the largest class seen."""
        return list(self.class_names) if self.class_names else names_from_counts(stats)

    def encode_values(self, item: Item) -> tuple[dict[str, Any], dict[str, int]]:
        relpath, mask_rel = item.payload
        data, info = read_image(Path(self.root) / relpath)
        png, mask = read_mask(Path(self.masks) / mask_rel, mask_rel, info.height, info.width)
        hist = histogram(mask)
        check_classes(hist, self.class_names, mask_rel)
        values = image_values(data, info, relpath, relpath)
        values[MASK_KEY] = png
        values[MASK_FORMAT_KEY] = b"png"
        return values, {"masks": 1, **class_counts(hist)}
