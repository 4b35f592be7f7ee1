"""`tfpipe inspect`: schema, counts per split, class histogram, first records
(logic: tfpipe.records.summarize)."""

from __future__ import annotations

import json
from typing import Any

import click

from tfpipe.cli._console import console, table, text

# Column headers of the first-records table that need saying what they hold.
RECORD_HEADERS = {"size": "height x width", "image_bytes": "image bytes",
                  "label_text": "label text", "instance_masks": "instance masks",
                  "keypoints": "keypoints labelled"}


def _render(s: dict[str, Any]) -> None:
    con = console()
    con.print(text(f"{s['path']}  schema v{s['schema_version']}  "
                   f"compression={s['compression'] or 'none'}  "
                   + (f"tool {s['tool_version']}" if "tool_version" in s else "(no manifest)")))
    con.print(table("Schema", ["feature", "dtype", "shape", "kind", "default"],
                    [[name, f["dtype"], str(f["shape"]), f["kind"],
                      repr(f["default"]) if "default" in f else "(required)"]
                     for name, f in s["schema"].items()]))
    con.print(table("Splits", ["split", "records", "shards", "bytes", "skipped inputs"],
                    [[name, f"{info['records']:,}", str(info["shards"]), f"{info['bytes']:,}",
                      str(info["skipped"])] for name, info in s["splits"].items()],
                    right=["records", "shards", "bytes", "skipped inputs"]))
    sug = s.get("suggested_keys") or {}
    if s.get("features") and not sug.get("own"):
        con.print(table(f"Keys (first {sug.get('records_read', '?')} records)",
                        ["key", "dtype", "shape", "records"],
                        [[f["key"], f["dtype"], f["shape"], str(f["records"])]
                         for f in s["features"]], right=["records"]))
    if s.get("class_histogram") is not None:
        con.print(table(f"Classes in {s['split']!r} ({s['label_key']})",
                        ["label", "name", "count"],
                        [[str(r["label"]), r["name"] or "", f"{r['count']:,}"]
                         for r in s["class_histogram"]], right=["label", "count"]))
    if s.get("mask_pixels"):
        con.print(table(f"Mask pixels in {s['split']!r} (image/segmentation/class/encoded)",
                        ["value", "name", "pixels", "share"],
                        [[str(r["value"]), r["name"] or "", f"{r['pixels']:,}",
                          f"{r['share']:.1%}"] for r in s["mask_pixels"]],
                        right=["value", "pixels", "share"]))
    if s.get("keypoints"):
        kp = s["keypoints"]
        con.print(text(f"{len(kp['names'])} keypoints per object: {', '.join(kp['names'])}; "
                       f"skeleton {kp.get('skeleton', [])}"))
    if s["records"]:
        cols = list(dict.fromkeys(k for r in s["records"] for k in r))
        con.print(table(f"First {len(s['records'])} records of {s['split']!r}",
                        [RECORD_HEADERS.get(c, c) for c in cols],
                        [["" if r.get(c) is None else str(r.get(c)) for c in cols]
                         for r in s["records"]],
                        right=["index", "image bytes", "label"]))
    if sug.get("own"):
        con.print(text("tfpipe's own keys (image/encoded, image/class/label, ...): no data.keys "
                       "needed"))
    elif sug.get("keys"):
        con.print(text("Suggested data.keys (paste into your config; docs/own-records.md):"))
        # plain text, not through rich: no wrapping, no markup, exactly the YAML
        click.echo(sug["yaml"], nl=False)
    for note in sug.get("notes", []):
        con.print(text(f"note: {note}"))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path")
@click.option("-n", "num_records", type=click.IntRange(min=0), default=5, show_default=True,
              help="How many records to summarize.")
@click.option("--split", default=None, help="Split to show (default: train, or the first).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(path: str, num_records: int, split: str | None, as_json: bool) -> None:
    """Show schema, counts per split, class histogram and the first N records.

    PATH is a dataset directory (with manifest.json), a directory of shards, a
    shard file or a glob. For records tfpipe did not write: every key with its
    dtype and shape, and a suggested data.keys block, ready to paste.
    Warnings (a damaged shard: counted up to the damage) go to stderr.
    """
    from tfpipe.records import summarize

    s = summarize(path, split=split, num_records=num_records)
    if as_json:
        click.echo(json.dumps(s, indent=2, sort_keys=True, default=str))
    else:
        _render(s)
    for w in s.get("warnings", []):
        click.echo(f"warning: {w}", err=True)
