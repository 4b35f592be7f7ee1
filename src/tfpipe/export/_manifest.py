"""SHA-256 manifest of an export (`export_manifest.json`) and `verify_export`.

A version directory's manifest lists every file under it (but itself) with its
size and SHA-256, plus what the export was (signatures, class names,
preprocessing). The export root's manifest lists the server files
(models.config, batching_parameters.txt). `verify_export` re-hashes: a changed,
missing or unlisted file is a finding that names the file.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

MANIFEST = "export_manifest.json"
KIND = "tfpipe-export-manifest"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _all_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and p.name != MANIFEST)


def write_manifest(root: str | os.PathLike[str], meta: dict[str, Any],
                   files: Sequence[str] | None = None) -> Path:
    """Write root/export_manifest.json over `files` (relative; default: every file
    under root). `complete` records whether unlisted files are findings."""
    root = Path(root)
    names = list(files) if files is not None else _all_files(root)
    entries = {n: {"bytes": (root / n).stat().st_size, "sha256": _sha256(root / n)}
               for n in names}
    doc = {**meta, "kind": KIND, "complete": files is None, "files": entries}
    path = root / MANIFEST
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return path


@dataclass
class ExportVerifyReport:
    path: str
    manifests: list[str] = field(default_factory=list)
    files_checked: int = 0
    findings: list[dict[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.manifests) and not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "manifests": self.manifests,
                "files_checked": self.files_checked, "findings": self.findings}

    def text(self) -> str:
        head = (f"{self.path}: export, {len(self.manifests)} manifest(s), "
                f"{self.files_checked} files hashed")
        if self.ok:
            return head + "\nOK: every file matches its SHA-256"
        if not self.manifests:
            return head + f"\nFAILED: no {MANIFEST} found"
        return head + "\n" + "\n".join(f"FAILED {f['kind']}: {f['file']}: {f['message']}"
                                       for f in self.findings)


def is_export(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is (or holds, two levels down) an export with a manifest."""
    return bool(find_manifests(Path(path)))


def find_manifests(root: Path) -> list[Path]:
    if root.is_file():
        return [root] if root.name == MANIFEST else []
    found = []
    for depth in ("", "*", "*/*"):
        found += sorted(root.glob(f"{depth}/{MANIFEST}" if depth else MANIFEST))
    out = []
    for p in found:
        try:
            if json.loads(p.read_text()).get("kind") == KIND:
                out.append(p)
        except (OSError, ValueError):
            out.append(p)  # unreadable: verify reports it
    return out


def verify_export(path: str | os.PathLike[str]) -> ExportVerifyReport:
    """Check every export manifest at or under `path` (root, model or version dir)."""
    root = Path(path)
    rep = ExportVerifyReport(str(root))
    for m in find_manifests(root):
        rep.manifests.append(str(m))
        base = m.parent
        try:
            doc = json.loads(m.read_text())
            files = doc["files"]
        except (OSError, ValueError, KeyError) as exc:
            rep.findings.append({"kind": "manifest", "file": str(m),
                                 "message": f"unreadable manifest ({exc})"})
            continue
        for name, want in sorted(files.items()):
            p = base / name
            rel = str(p)
            if not p.is_file():
                rep.findings.append({"kind": "missing", "file": rel,
                                     "message": "listed in the manifest, not on disk"})
                continue
            rep.files_checked += 1
            size = p.stat().st_size
            digest = _sha256(p)
            if digest != want.get("sha256") or size != want.get("bytes"):
                rep.findings.append({"kind": "changed", "file": rel, "message":
                                     f"sha256 {digest[:16]}... ({size} bytes), manifest "
                                     f"says {str(want.get('sha256'))[:16]}... "
                                     f"({want.get('bytes')} bytes)"})
        if doc.get("complete"):
            for name in _all_files(base):
                if name not in files:
                    rep.findings.append({"kind": "unlisted", "file": str(base / name),
                                         "message": "not in the manifest (added after export)"})
    return rep
