"""What every converter source provides to the planner and the shard workers."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfpipe.convert._image import BadImage, ImageInfo, probe
from tfpipe.convert._plan import Item
from tfpipe.records import Schema

# Bound what is read into memory for one input: a tf.train.Example must stay
# under protobuf's 2 GiB limit, and no real training image comes near this.
MAX_INPUT_BYTES = 1 << 30


class BadInput(Exception):
    """One input cannot be converted; `str()` is the reason stored in the manifest."""


@dataclass
class Enumeration:
    """Result of listing a source: inputs to convert, and inputs already known bad."""

    items: list[Item] = field(default_factory=list)
    bad: list[tuple[Item, str]] = field(default_factory=list)  # (input, reason)
    # Files that are not inputs at all (wrong extension, outside class folders):
    # listed in the manifest but never a reason to stop.
    ignored: list[tuple[str, str]] = field(default_factory=list)

    def total_size(self) -> int:
        """Estimated bytes of all inputs (a table's lazy rows know it without reading)."""
        total = getattr(self.items, "total_size", None)
        return int(total) if total is not None else sum(it.size for it in self.items)


class Source:
    """Base class. Subclasses are plain picklable objects: they travel to spawn workers."""

    kind: str = ""
    class_names: list[str] | None = None

    def enumerate(self) -> Enumeration:
        raise NotImplementedError

    def schema(self) -> Schema:
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        """Everything that changes the output, for the manifest and the resume check."""
        raise NotImplementedError

    def encode_values(self, item: Item) -> tuple[dict[str, Any], dict[str, int]]:
        """Feature values of one input and counters (e.g. boxes clipped); raises BadInput."""
        raise NotImplementedError

    def shard_stats(self, shard: Any) -> dict[str, int]:
        """Per-shard counts for the manifest's `settings.shard_stats` besides the
        encoder's (the packed table layout: the rows of a shard of blocks)."""
        return {}


def file_size(path: str | os.PathLike[str]) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def read_image(path: Path) -> tuple[bytes, ImageInfo]:
    """Original bytes and header info of an image file; raises BadInput."""
    try:
        size = os.stat(path).st_size
        if size > MAX_INPUT_BYTES:
            raise BadInput(f"file is {size} bytes, over the {MAX_INPUT_BYTES}-byte limit")
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadInput("file not found") from None
    except OSError as exc:
        raise BadInput(f"cannot read file: {exc.strerror or exc}") from None
    try:
        info = probe(data)
    except BadImage as exc:
        raise BadInput(str(exc)) from None
    return data, info


IMAGE_KEYS = ("image/encoded", "image/format", "image/height", "image/width",
              "image/filename", "image/source_id")


def image_values(data: bytes, info: ImageInfo, filename: str,
                 source_id: str) -> dict[str, Any]:
    return {
        "image/encoded": data,
        "image/format": info.format.encode(),
        "image/height": info.height,
        "image/width": info.width,
        "image/filename": filename.encode(),
        "image/source_id": source_id.encode(),
    }
