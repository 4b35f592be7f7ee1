"""`tfpipe verify`: manifest, checksums and every record; salvage damaged shards."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click


def _salvage_all(report: Any, out_dir: str) -> list[Any]:
    from tfpipe.records import salvage

    os.makedirs(out_dir, exist_ok=True)
    results = []
    for f in report.damaged_files:
        results.append(salvage(f, os.path.join(out_dir, os.path.basename(f))))
    return results


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path")
@click.option("--deep", is_flag=True,
              help="Also decode every image and check boxes and labels (slow).")
@click.option("--salvage", "salvage_dir", default=None, metavar="OUT",
              help="Write a salvaged copy of every damaged shard into OUT.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(path: str, deep: bool, salvage_dir: str | None, as_json: bool) -> None:
    """Check a dataset directory or a shard file. Exit 0 only when intact.

    Every finding names the file, the record index and the byte offset
    (offsets of GZIP shards count decompressed bytes).
    """
    from rich.console import Console

    from tfpipe.records import verify

    con = Console(stderr=True)
    if not os.path.exists(path):
        click.echo(f"error: {path} does not exist", err=True)
        sys.exit(2)
    from tfpipe.export import is_export, verify_export

    if is_export(path):  # a `tfpipe export` directory: its SHA-256 manifests
        rep = verify_export(path)
        click.echo(json.dumps(rep.to_dict(), indent=2) if as_json else rep.text())
        sys.exit(0 if rep.ok else 1)
    if as_json:
        report = verify(path, deep=deep)
    else:
        with con.status("verifying...") as status:
            report = verify(path, deep=deep,
                            progress=lambda f: status.update(f"verifying {os.path.basename(f)}"))
    salvaged = _salvage_all(report, salvage_dir) if salvage_dir and report.damaged_files else []
    if as_json:
        out = report.to_dict()
        out["salvaged"] = []
        for s in salvaged:
            d = s.to_dict()
            expected = report.expected_records.get(s.source)
            d["records_lost_per_manifest"] = None if expected is None else expected - s.records_kept
            out["salvaged"].append(d)
        click.echo(json.dumps(out, indent=2, sort_keys=True))
    else:
        _render(report, salvaged)
    sys.exit(0 if report.ok else 1)


def _render(report: Any, salvaged: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    what = "dataset (manifest checked)" if report.manifest else "file"
    con.print(f"{report.path}: {what}, {report.files_checked} files, "
              f"{report.records_checked:,} intact records, {report.bytes_checked:,} bytes "
              f"scanned{', deep' if report.deep else ''}")
    if report.ok:
        con.print("[green]OK[/green]: every check passed")
    else:
        t = Table(title=f"{len(report.findings)} findings", title_justify="left")
        for c in ("kind", "file", "record", "offset", "message"):
            t.add_column(c, overflow="fold")
        for f in report.findings:
            off = "" if f.offset is None else (
                f"{f.offset}" + (" (decompressed)" if f.offset_space == "decompressed" else ""))
            t.add_row(f.kind, f.path, "" if f.index is None else str(f.index), off, f.message)
        con.print(t)
        con.print("[red]DAMAGED[/red]")
    for s in salvaged:
        lost = s.records_lost_known
        more = "" if s.records_lost_exact else " (plus an unknowable number inside garbage)"
        expected = report.expected_records.get(s.source)
        if expected is not None:  # the manifest's count settles what the bytes cannot
            lost, more = expected - s.records_kept, " (manifest count minus kept)"
        con.print(f"salvaged {s.source} -> {s.out.path}: kept {s.records_kept:,} records, "
                  f"lost {lost} records{more}, {s.bytes_lost:,} bytes")
        for f in s.lost:
            con.print(f"  lost bytes [{f.offset}, {f.end}) ({f.kind}): {f.message}")
    if salvaged:
        con.print("salvaged shards no longer match the manifest; re-convert, or replace the "
                  "shards and rebuild the manifest before training on them")
