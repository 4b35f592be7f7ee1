"""What a conversion produced, as plain data (`tfpipe convert --json` prints it)."""

from __future__ import annotations

import os
from typing import Any

from tfpipe.records import Manifest


def conversion_summary(manifest: Manifest, out: str | os.PathLike[str] | None = None
                       ) -> dict[str, Any]:
    """Per split: records, shards, bytes, inputs skipped (and box counts for
    detection sets); the class names; every skipped input with its reason; for a
    table, what storing its values changed ("table": nulls dropped from lists,
    float64 / time columns narrowed, with their largest error)."""
    stats = manifest.settings.get("stats", {})
    summary: dict[str, Any] = {} if out is None else {"out": os.fspath(out)}
    summary.update({
        "splits": {name: {"records": info.num_records, "shards": len(info.shards),
                          "bytes": info.num_bytes, "skipped": len(info.skipped),
                          **({"boxes": stats[name]} if name in stats else {})}
                   for name, info in manifest.splits.items()},
        "class_names": list(manifest.class_names),
        "skipped": {name: [s.to_json() for s in info.skipped]
                    for name, info in manifest.splits.items() if info.skipped},
    })
    # tables: what storing the values changed, per column (docs/convert.md "Tables")
    normalized = (manifest.source or {}).get("normalized")
    if normalized:
        summary["table"] = normalized
    return summary
