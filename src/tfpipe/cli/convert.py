"""`tfpipe convert`: raw data -> sharded TFRecords + manifest.json (logic: tfpipe.convert)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click


def _summary(manifest: Any) -> dict[str, Any]:
    stats = manifest.settings.get("stats", {})
    return {
        "splits": {name: {"records": info.num_records, "shards": len(info.shards),
                          "bytes": info.num_bytes, "skipped": len(info.skipped),
                          **({"boxes": stats[name]} if name in stats else {})}
                   for name, info in manifest.splits.items()},
        "class_names": list(manifest.class_names),
        "skipped": {name: [s.to_json() for s in info.skipped]
                    for name, info in manifest.splits.items() if info.skipped},
    }


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("src", type=click.Path(exists=True))
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["auto", "folder", "csv", "parquet", "coco"]),
              default="auto", show_default=True,
              help="auto: a directory of class folders, .csv, .parquet/.pq, or a COCO .json.")
@click.option("--split", default=None, metavar="NAME=RATIO,...",
              help="Split ratios summing to 1, e.g. train=0.9,val=0.1 (default: all train).")
@click.option("--shard-size", default="256MiB", show_default=True,
              help="Target shard size (bytes, or e.g. 256MB / 256MiB).")
@click.option("--compression", type=click.Choice(["none", "gzip"]), default="none",
              show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes writing shards [default: the CPUs this process may use, "
                   "at most one per 64 MiB of input]. "
                   "The output is byte-identical for any value.")
@click.option("--on-error", type=click.Choice(["skip", "raise"]), default="skip",
              show_default=True, help="Bad inputs: skip and list them in the manifest, or stop.")
@click.option("--resume", is_flag=True,
              help="Finish an interrupted conversion into OUT, keeping verified shards.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the split assignment and of the order within shards.")
@click.option("--image-column", default=None, help="csv/parquet: column of image paths "
              "(relative to the table) embedded as image/encoded.")
@click.option("--label-column", default=None, help="csv/parquet: class label column.")
@click.option("--images", "images_dir", type=click.Path(exists=True, file_okay=False),
              default=None, help="coco: image directory (default: the JSON's directory).")
@click.option("--invalid-boxes", type=click.Choice(["clip", "drop", "raise"]), default="clip",
              show_default=True, help="coco: boxes partly outside the image are clipped, "
              "dropped, or stop the run; degenerate boxes are always dropped (or raise).")
@click.option("--runner", type=click.Choice(["local", "direct", "dataflow", "flink", "spark"]),
              default="local", show_default=True,
              help="local: this machine's processes; direct|dataflow|flink|spark: an Apache "
                   "Beam pipeline (pip install 'tfpipe[beam]') with byte-identical output. "
                   "See docs/scale.md.")
@click.option("--pipeline-options", default=None, metavar="'FLAGS'",
              help="Beam pipeline options as one quoted string, e.g. "
                   "'--direct_running_mode=multi_processing --direct_num_workers=2'.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def command(src: str, out: str, fmt: str, split: str | None, shard_size: str,
            compression: str, workers: int | None, on_error: str, resume: bool, seed: int,
            image_column: str | None, label_column: str | None, images_dir: str | None,
            invalid_boxes: str, runner: str, pipeline_options: str | None,
            as_json: bool) -> None:
    """Convert SRC (image folder, CSV, Parquet or COCO JSON) into shards under OUT."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from tfpipe.convert import convert
    from tfpipe.errors import TfpipeError

    err = Console(stderr=True)
    bar = Progress("[progress.description]{task.description}", BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                   disable=as_json or not err.is_terminal, transient=True)
    task = bar.add_task("converting", total=None)

    def progress(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    try:
        with bar:
            manifest = convert(src, out, format=fmt, split=split, shard_size=shard_size,
                               compression=compression, workers=workers, on_error=on_error,
                               resume=resume, seed=seed, image_column=image_column,
                               label_column=label_column, images=images_dir,
                               invalid_boxes=invalid_boxes, progress=progress,
                               runner=runner, pipeline_options=pipeline_options)
    except TfpipeError as exc:
        click.echo(f"error: {exc}", err=True)  # unwrapped: scripts grep it
        sys.exit(1)
    summary = _summary(manifest)
    if as_json:
        click.echo(json.dumps({"out": out, **summary}, indent=2, sort_keys=True))
        return
    from rich.table import Table

    table = Table(title=f"{out}", title_justify="left")
    for col in ("split", "records", "shards", "bytes", "skipped"):
        table.add_column(col, justify="left" if col == "split" else "right")
    for name, row in summary["splits"].items():
        table.add_row(name, f"{row['records']:,}", str(row["shards"]), f"{row['bytes']:,}",
                      str(row["skipped"]))
    console = Console()
    console.print(table)
    if manifest.class_names:
        console.print(f"{len(manifest.class_names)} classes", highlight=False)
    for name, row in summary["splits"].items():
        if "boxes" in row:
            b = row["boxes"]
            console.print(f"{name}: {b.get('boxes', 0)} boxes kept, {b.get('boxes_clipped', 0)} "
                          f"clipped, {b.get('boxes_dropped', 0)} dropped", highlight=False)
    for name, skipped in summary["skipped"].items():
        for s in skipped[:5]:
            console.print(f"skipped ({name}): {s['input']}: {s['reason']}", highlight=False,
                          markup=False)
        if len(skipped) > 5:
            console.print(f"... {len(skipped) - 5} more in {out}/manifest.json", highlight=False)
