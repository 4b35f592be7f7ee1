"""`tfpipe inspect`: schema, counts per split, class histogram, first records."""

from __future__ import annotations

import json
import sys
from typing import Any

import click


def _render(s: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    con.print(f"[bold]{s['path']}[/bold]  schema v{s['schema_version']}  "
              f"compression={s['compression'] or 'none'}  "
              + (f"tool {s['tool_version']}" if "tool_version" in s else "(no manifest)"))
    t = Table(title="Schema", title_justify="left")
    for c in ("feature", "dtype", "shape", "kind", "default"):
        t.add_column(c)
    for name, f in s["schema"].items():
        t.add_row(name, f["dtype"], str(f["shape"]), f["kind"],
                  repr(f["default"]) if "default" in f else "(required)")
    con.print(t)
    t = Table(title="Splits", title_justify="left")
    for c in ("split", "records", "shards", "bytes", "skipped inputs"):
        t.add_column(c, justify="left" if c == "split" else "right")
    for name, info in s["splits"].items():
        t.add_row(name, f"{info['records']:,}", str(info["shards"]), f"{info['bytes']:,}",
                  str(info["skipped"]))
    con.print(t)
    if s.get("class_histogram") is not None:
        t = Table(title=f"Classes in {s['split']!r} ({s['label_key']})", title_justify="left")
        for c in ("label", "name", "count"):
            t.add_column(c, justify="right" if c != "name" else "left")
        for row in s["class_histogram"]:
            t.add_row(str(row["label"]), row["name"] or "", f"{row['count']:,}")
        con.print(t)
    if s["records"]:
        cols = list(dict.fromkeys(k for r in s["records"] for k in r))
        t = Table(title=f"First {len(s['records'])} records of {s['split']!r}",
                  title_justify="left")
        for c in cols:
            t.add_column(c)
        for r in s["records"]:
            t.add_row(*["" if r.get(c) is None else str(r.get(c)) for c in cols])
        con.print(t)
    for w in s.get("warnings", []):
        con.print(f"[yellow]warning:[/yellow] {w}", highlight=False, soft_wrap=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path")
@click.option("-n", "num_records", type=click.IntRange(min=0), default=5, show_default=True,
              help="How many records to summarize.")
@click.option("--split", default=None, help="Split to show (default: train, or the first).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(path: str, num_records: int, split: str | None, as_json: bool) -> None:
    """Show schema, counts per split, class histogram and the first N records.

    PATH is a dataset directory (with manifest.json), a shard file or a glob.
    """
    from tfpipe.errors import TfpipeError
    from tfpipe.records.summary import summarize

    try:
        s = summarize(path, split=split, num_records=num_records)
    except TfpipeError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(json.dumps(s, indent=2, sort_keys=True, default=str))
    else:
        _render(s)
    for w in s.get("warnings", []) if as_json else []:
        click.echo(f"warning: {w}", err=True)
