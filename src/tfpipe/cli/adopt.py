"""`tfpipe adopt`: a manifest for existing shards, without rewriting them
(logic: tfpipe.records.adopt)."""

from __future__ import annotations

import json
import os

import click

from tfpipe.cli._console import console, progress, table, text


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path", metavar="DIR_OR_GLOB")
@click.option("--out", "out", default=None, metavar="DIR",
              help="Write manifest.json here (hard links to the shards beside it; same "
                   "file system). Default: beside the shards.")
@click.option("--classes", "classes", default=None, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False),
              help="Class names, one per line (line i is label i).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(path: str, out: str | None, classes: str | None, as_json: bool) -> None:
    """Write a tfpipe manifest for TFRecord shards tfpipe did not write.

    DIR_OR_GLOB is a directory of shards or a glob (quote it). Every shard is
    read once (framing and CRCs checked, sha256, records counted and decoded):
    the manifest lists per split (from the file names: train-*, NAME-val.tfrecord-*,
    ...) each shard's records, bytes and sha256, the schema inferred from every
    record, the label range and class names when derivable. The shards are not
    rewritten. Afterwards `tfpipe verify DIR`, `tfpipe check`, the pipeline's
    cardinality and exact resume work as for converted data.
    """
    from tfpipe.records.adopt import adopt

    names = None
    if classes:
        with open(classes, encoding="utf-8") as f:
            names = [line.strip() for line in f if line.strip()]
    with progress("adopting", enabled=not as_json) as update:
        done = [0]

        def seen(f: str) -> None:
            done[0] += 1
            update(done[0], None, os.path.basename(f))

        report = adopt(path, out, class_names=names, progress=seen)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
        return
    con = console()
    m = report.manifest
    con.print(table("Splits", ["split", "shards", "records", "bytes"],
                    [[k, str(len(v.shards)), f"{v.num_records:,}", f"{v.num_bytes:,}"]
                     for k, v in sorted(m.splits.items())],
                    right=["shards", "records", "bytes"]))
    con.print(table("Schema (inferred from every record)", ["feature", "dtype", "kind"],
                    [[n, s.dtype, s.kind] for n, s in m.schema.items()]))
    if report.label_key:
        lo, hi = min(report.label_counts), max(report.label_counts)
        con.print(text(f"labels ({report.label_key}): {len(report.label_counts)} values in "
                       f"[{lo}, {hi}]" + (f"; {len(m.class_names)} class names"
                                          if m.class_names else "; no class names (--classes)")))
    if report.linked:
        con.print(text(f"hard-linked {len(report.linked)} shards into {report.out_dir}"))
    con.print(text(f"wrote {report.manifest_path}; the shards were not rewritten. Next: "
                   f"`tfpipe verify {report.out_dir}`, then data.path: {report.out_dir}"))
