"""Image folders: `root/<class>/**/<image>`; labels are the sorted class folder names."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tfpipe.convert._image import IMAGE_SUFFIXES
from tfpipe.convert._plan import Item
from tfpipe.convert._source import Enumeration, Source, image_values, read_image
from tfpipe.records import Schema, classification_schema
from tfpipe.errors import InputError


def _walk(directory: Path) -> list[str]:
    """Relative POSIX paths of the files under directory, sorted, hidden entries skipped."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = Path(dirpath).relative_to(directory)
        for name in filenames:
            if not name.startswith("."):
                found.append((rel / name).as_posix())
    return sorted(found)


class FolderSource(Source):
    """Each image is stored as its original bytes with label = index of its class folder."""

    kind = "folder"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = str(Path(root).resolve())
        root_path = Path(self.root)
        if not root_path.is_dir():
            raise InputError(f"{root}: not a directory (the folder format needs root/<class>/<image>)")
        self.class_names = sorted(
            p.name for p in root_path.iterdir() if p.is_dir() and not p.name.startswith("."))
        if not self.class_names:
            raise InputError(
                f"{root}: no class folders found; the folder format expects root/<class>/<image>")

    def _paths(self) -> list[str]:
        """Relative paths under the root, hidden folders and files skipped, in order."""
        return list(_walk(Path(self.root)))

    def _stat(self, path: str) -> tuple[int, str | None]:
        """(size in bytes, None), or (0, why it cannot be read)."""
        try:
            return (Path(self.root) / path).stat().st_size, None
        except OSError as exc:
            return 0, str(exc.strerror or exc)

    def enumerate(self) -> Enumeration:
        out = Enumeration()
        for path in self._paths():
            parts = path.split("/")
            if len(parts) < 2:
                out.ignored.append((path, "not inside a class folder"))
                continue
            if not path.lower().endswith(IMAGE_SUFFIXES):
                out.ignored.append((path, "not an image file extension "
                                          f"({', '.join(IMAGE_SUFFIXES)})"))
                continue
            label = self.class_names.index(parts[0])
            size, unreadable = self._stat(path)
            if unreadable is not None:
                out.bad.append((Item(path, 0, None), f"cannot read file: {unreadable}"))
                continue
            out.items.append(Item(key=path, size=size, payload=[path, label]))
        if not out.items and not out.bad:
            raise InputError(f"{self.root}: no images ({', '.join(IMAGE_SUFFIXES)}) "
                             "in any class folder")
        return out

    def schema(self) -> Schema:
        return classification_schema()

    def settings(self) -> dict[str, Any]:
        return {"format": self.kind}

    def encode_values(self, item: Item) -> tuple[dict[str, Any], dict[str, int]]:
        relpath, label = item.payload
        data, info = read_image(Path(self.root) / relpath)
        values = image_values(data, info, relpath, relpath)
        values["image/class/label"] = label
        values["image/class/text"] = self.class_names[label].encode()
        return values, {}
