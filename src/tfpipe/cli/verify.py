"""`tfpipe verify`: manifest, checksums and every record; salvage damaged shards
(logic: tfpipe.records.verify / salvage_dataset)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import Any

import click

from tfpipe.cli._console import console, progress, table, text
from tfpipe.cli._errors import fail


def next_step(report: Any) -> str | None:
    """What to do about a report's findings: the exact command where there is one."""
    if report.ok:
        return None
    kinds = {f.kind for f in report.findings}
    out = report.path.rstrip("/\\") + "-salvaged"
    if not os.path.isdir(report.path) and not report.manifest:  # a shard or a glob
        out = os.path.join(os.path.dirname(report.path.rstrip("/\\")) or ".", "salvaged")
    salvage = f"tfpipe verify {shlex.quote(report.path)} --salvage {shlex.quote(out)}"
    if report.damaged_files and not report.manifest:
        return (f"{salvage}  (writes every readable record of the damaged shards, the intact "
                "ones linked beside them)")
    if report.damaged_files or "missing-file" in kinds:
        return (f"{salvage}  (writes a complete dataset: intact shards linked, damaged ones "
                "rewritten with every readable record, missing ones left out, a manifest that "
                "matches them); or train on the data as it is with pipeline.on_error: skip "
                "(every readable record is read, the loss reported)"
                + ("; or restore the missing shards" if "missing-file" in kinds else ""))
    if kinds & {"size-mismatch", "checksum-mismatch", "count-mismatch"}:
        return ("the shards' records are intact; the manifest disagrees with them (edited, or "
                f"shards replaced after conversion): {salvage} writes the same records with a "
                "manifest that matches them (or restore the original manifest.json)")
    if kinds <= {"bad-image", "bad-example", "bad-box", "bad-label", "bad-mask",
                 "bad-instance-mask", "bad-keypoint"}:
        return ("these records are skipped and counted under pipeline.on_error: skip, or "
                "stop the run under raise; re-convert from the source files to replace them")
    if kinds <= {"unlisted-file"}:
        return "delete the files the manifest does not list (left over from an earlier run)"
    return "re-convert the dataset (`tfpipe convert SRC OUT`), or restore the files listed"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path", metavar="PATH")
@click.option("--deep", is_flag=True,
              help="Also decode every image and mask and check boxes and labels (slow).")
@click.option("--salvage", "salvage_dir", default=None, metavar="OUT",
              help="Write a complete, readable copy of the dataset into OUT: damaged "
                   "shards rewritten with every readable record, intact ones linked, a "
                   "manifest.json that matches them.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(path: str, deep: bool, salvage_dir: str | None, as_json: bool) -> None:
    """Check a dataset directory, a shard file or a glob of shards (quote it).
    Exit 0 only when intact.

    Without a manifest.json (a glob, a directory of shards: TFDS-named too) the
    framing and CRCs of every record are checked and counted (--deep: every
    Example parses and its image decodes) and the output says what could not be
    (sizes and sha256, declared counts and schema: `tfpipe adopt` writes a
    manifest). Never DAMAGED for the missing manifest alone. Every finding
    names the file, the record index and the byte offset (offsets of GZIP shards
    count decompressed bytes).
    """
    from tfpipe.records import salvage_dataset, verify

    import glob

    if not os.path.exists(path) and not (glob.has_magic(path) and glob.glob(path)):
        fail(f"{path} does not exist" if not glob.has_magic(path)
             else f"no files match {path!r}")
    from tfpipe.export import is_export, verify_export

    if is_export(path):  # a `tfpipe export` directory: its SHA-256 manifests
        rep = verify_export(path)
        click.echo(json.dumps(rep.to_dict(), indent=2) if as_json else rep.text())
        sys.exit(0 if rep.ok else 1)
    with progress("verifying", enabled=not as_json) as update:
        done = [0]

        def seen(f: str) -> None:
            done[0] += 1
            update(done[0], None, os.path.basename(f))

        report = verify(path, deep=deep, progress=seen)
    salvaged = salvage_dataset(path, salvage_dir, report) if salvage_dir else None
    if salvaged is not None and salvaged.manifest_path and \
            os.path.isfile(os.path.join(path, "dataset_info.json")):
        # convert wrote TFDS metadata: the salvaged dataset gets its own, true one
        from tfpipe.convert import write_tfds_metadata

        write_tfds_metadata(salvage_dir)
    if as_json:
        out = report.to_dict()
        out["next_step"] = next_step(report)
        if salvaged is not None:
            s = salvaged.to_dict()
            out["salvaged"] = s["salvaged"]
            out["salvage_manifest"] = s["manifest"]
        else:
            out["salvaged"] = []
        click.echo(json.dumps(out, indent=2, sort_keys=True))
    else:
        _render(report, salvaged)
    sys.exit(0 if report.ok else 1)


def _render(report: Any, salvaged: Any) -> None:
    con = console()
    what = ("dataset (manifest checked)" if report.manifest
            else "file" if os.path.isfile(report.path) else "shards without a manifest")
    con.print(text(f"{report.path}: {what}, {report.files_checked} files, "
                   f"{report.records_checked:,} intact records, {report.bytes_checked:,} bytes "
                   f"scanned{', deep' if report.deep else ''}"))
    for note in getattr(report, "checked", []):
        con.print(text(f"checked: {note}"))
    for note in report.unchecked:
        con.print(text(f"not checked: {note}"))
    if report.ok:
        con.print("[green]OK[/green]: every check passed"
                  + (" (see 'not checked' above)" if report.unchecked else ""))
    else:
        rows = []
        for f in report.findings:
            off = "" if f.offset is None else (
                f"{f.offset}" + (" (decompressed)" if f.offset_space == "decompressed" else ""))
            rows.append([f.kind, f.path, "" if f.index is None else str(f.index), off, f.message])
        n = len(report.findings)
        con.print(table(f"{n} finding{'' if n == 1 else 's'}",
                        ["kind", "file", "record", "offset", "message"], rows,
                        right=["record", "offset"]))
        con.print("[red]DAMAGED[/red]. Next: ", text(next_step(report)), sep="")
    if salvaged is None:
        return
    if salvaged.intact:
        con.print(text(f"nothing to salvage: no shard of {report.path} is damaged, missing or "
                       "described wrongly by its manifest"
                       + ("" if report.ok else " (salvage cannot repair the findings above)")))
        return
    for s in salvaged.shards:
        lost, exact = salvaged.records_lost(s)
        how = ("manifest count minus kept" if s.source in report.expected_records
               else "" if exact else "plus an unknowable number inside garbage")
        con.print(text(f"salvaged {s.source} -> {s.out.path}: kept {s.records_kept:,} records, "
                       f"lost {lost} records{f' ({how})' if how else ''}, "
                       f"{s.bytes_lost:,} bytes"))
        for f in s.lost:
            con.print(text(f"  lost bytes [{f.offset}, {f.end}) ({f.kind}): {f.message}"))
    for src, n in salvaged.missing.items():
        con.print(text(f"missing {src}: its {n:,} records are lost (left out)"))
    if salvaged.copied:
        con.print(text(f"linked or copied {len(salvaged.copied)} intact shards"))
    if salvaged.manifest_path:
        total = sum(report.file_records.get(s, 0) for s in salvaged.copied) + \
            sum(s.records_kept for s in salvaged.shards)
        con.print(text(f"wrote {salvaged.manifest_path}: a complete dataset of {total:,} "
                       f"readable records in {salvaged.out_dir} (`tfpipe verify "
                       f"{salvaged.out_dir}` checks it; train on it with data.path: "
                       f"{salvaged.out_dir})"))
