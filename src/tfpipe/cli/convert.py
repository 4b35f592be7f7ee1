"""`tfpipe convert`: raw data -> sharded TFRecords + manifest.json (logic: tfpipe.convert)."""

from __future__ import annotations

import json
import sys

import click

from tfpipe.cli._console import console, progress, table, text


def _local_or_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """SRC may be a tf.io.gfile URL (gs://, ram://, ...: read by the Beam runners);
    a local path must exist."""
    if "://" not in value:
        click.Path(exists=True).convert(value, param, ctx)
    return value


def _mask_folder(ctx: click.Context, param: click.Parameter, value: str | None
                 ) -> str | None:
    """--masks DIR (a folder's masks) must be a directory; --masks alone is ""."""
    if value:
        click.Path(exists=True, file_okay=False).convert(value, param, ctx)
    return value


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("src", callback=_local_or_url)
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
@click.option("--masks", "masks_dir", is_flag=False, flag_value="", default=None,
              metavar="[DIR]", callback=_mask_folder,
              help="coco (alone, no DIR): instance masks, one 0/1 PNG per object under "
              "image/object/mask, with area and is_crowd. Image folder: DIR of "
              "single-channel PNG masks, one per image with its relative path and stem; "
              "pixel = class index, 255 = ignore. Put a bare --masks after OUT.")
@click.option("--classes", "classes_file", type=click.Path(exists=True, dir_okay=False),
              default=None, help="--masks: text file naming class k on line k+1 "
              "[default: class_0..class_K for the largest class K in the masks].")
@click.option("--task", type=click.Choice(["classification", "detection", "segmentation"]),
              default=None, help="coco: detection (boxes, the default) or segmentation "
              "(class masks rasterized from the polygons / RLE; crowd = 255).")
@click.option("--runner", type=click.Choice(["local", "direct", "dataflow", "flink", "spark"]),
              default="local", show_default=True,
              help="local: this machine's processes; direct|dataflow|flink|spark: an Apache "
                   "Beam pipeline (pip install 'tfpipe[beam]') with byte-identical output. "
                   "See docs/scale.md.")
@click.option("--pipeline-options", default=None, metavar="'FLAGS'",
              help="Beam pipeline options as one quoted string, e.g. "
                   "'--direct_running_mode=multi_processing --direct_num_workers=2'.")
@click.option("--stats", is_flag=True,
              help="csv/parquet: per-column statistics of the train split into "
                   "OUT/statistics.json (docs/tabular.md).")
@click.option("--stats-top-k", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="--stats: vocabulary size per categorical column.")
@click.option("--stats-quantiles", type=click.IntRange(min=2), default=100, show_default=True,
              help="--stats: quantile bins per numeric column.")
@click.option("--list-nulls", type=click.Choice(["drop-element", "drop-row", "error"]),
              default="drop-element", show_default=True,
              help="csv/parquet: a null inside a list column: drop that value, skip the "
                   "row (listed in the manifest), or stop.")
@click.option("--keep-float64", default=None, metavar="COL,...|all",
              help="csv/parquet: store these float64 columns exactly (their bits in an "
                   "int64, schema encoding float64_bits) instead of as float32.")
@click.option("--time-unit", type=click.Choice(["s", "ms", "us", "ns"]), default="s",
              show_default=True,
              help="csv/parquet: unit of the int64 epoch (UTC) that timestamps and dates are "
                   "stored as; the `time` transform reads seconds.")
@click.option("--rows-per-record", type=click.IntRange(min=1), default=1, show_default=True,
              help="csv/parquet: rows per record; N > 1 packs N rows of a shard into one "
                   "record column by column (docs/tabular.md, 'Packed layout').")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def command(src: str, out: str, fmt: str, split: str | None, shard_size: str,
            compression: str, workers: int | None, on_error: str, resume: bool, seed: int,
            image_column: str | None, label_column: str | None, images_dir: str | None,
            invalid_boxes: str, runner: str, pipeline_options: str | None,
            stats: bool, stats_top_k: int, stats_quantiles: int, list_nulls: str,
            keep_float64: str | None, time_unit: str, masks_dir: str | None,
            classes_file: str | None, task: str | None, rows_per_record: int,
            as_json: bool) -> None:
    """Convert SRC (image folder, CSV, Parquet or COCO JSON) into shards under OUT.

    Segmentation: an image folder with --masks MASKS, or a COCO JSON with
    --task segmentation. Instance masks: a COCO JSON with --masks (no folder);
    keypoints are converted whenever the COCO categories name them.

    SRC and OUT may be tf.io.gfile URLs (gs://...) with a Beam --runner.

    A failed run (a bad input under --on-error raise, Ctrl-C, a crash) leaves
    what it finished: rerun with --resume to keep it, or plainly to start over.
    """
    from tfpipe.convert import conversion_summary, convert
    from tfpipe.errors import TfpipeError

    try:
        with progress("converting", enabled=not as_json) as update:
            manifest = convert(src, out, format=fmt, split=split, shard_size=shard_size,
                               compression=compression, workers=workers, on_error=on_error,
                               resume=resume, seed=seed, image_column=image_column,
                               label_column=label_column, images=images_dir,
                               invalid_boxes=invalid_boxes, progress=update,
                               runner=runner, pipeline_options=pipeline_options,
                               stats=stats, stats_top_k=stats_top_k,
                               stats_quantiles=stats_quantiles, list_nulls=list_nulls,
                               keep_float64=keep_float64, time_unit=time_unit,
                               masks=True if masks_dir == "" else masks_dir,
                               classes=classes_file, task=task,
                               rows_per_record=rows_per_record)
    except TfpipeError as exc:
        click.echo(f"error: {exc}", err=True)  # unwrapped: scripts grep it
        sys.exit(1)
    summary = conversion_summary(manifest, out)
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
        return
    con = console()
    con.print(table(out, ["split", "records", "shards", "bytes", "skipped"],
                    [[name, f"{row['records']:,}", str(row["shards"]), f"{row['bytes']:,}",
                      str(row["skipped"])] for name, row in summary["splits"].items()],
                    right=["records", "shards", "bytes", "skipped"]))
    if manifest.class_names:
        con.print(text(f"{len(manifest.class_names)} classes"))
    if "statistics" in manifest.settings:
        ref = manifest.settings["statistics"]
        con.print(text(f"statistics of the {ref['split']} split: {out}/{ref['file']} "
                       f"(sha256 {ref['sha256'][:12]})"))
    for name, row in summary["splits"].items():
        if "boxes" in row:
            b = row["boxes"]
            con.print(text(f"{name}: {b.get('boxes', 0)} boxes kept, {b.get('boxes_clipped', 0)} "
                           f"clipped, {b.get('boxes_dropped', 0)} dropped"))
        for line in _object_lines(row.get("objects", {})):
            con.print(text(f"{name}: {line}"))
        if "masks" in row:
            m = row["masks"]
            shares = ", ".join(f"{k}: {v:.1%}" for k, v in m["class_share"].items())
            con.print(text(f"{name}: {m['masks']} masks; pixels per class {shares}"))
    table_notes = summary.get("table", {})
    for key, what in (("list_null_elements_dropped", "null list elements dropped"),
                      ("list_null_rows_dropped", "rows skipped for a null inside a list")):
        for col, n in table_notes.get(key, {}).items():
            con.print(text(f"{col}: {n:,} {what} (--list-nulls)"))
    for col, n in table_notes.get("narrowed", {}).items():
        con.print(text(f"{col}: {n['rows']:,} values narrowed (largest error "
                       f"{n['max_abs_error']:.3g}, relative {n['max_rel_error']:.3g}; "
                       "--keep-float64 / --time-unit keep them exact)"))
    if summary.get("keypoints"):
        names = summary["keypoints"]["names"]
        con.print(text(f"{len(names)} keypoints per object: {', '.join(names)}"))
    for name, skipped in summary["skipped"].items():
        for s in skipped[:5]:
            con.print(text(f"skipped ({name}): {s['input']}: {s['reason']}"))
        if len(skipped) > 5:
            con.print(text(f"... {len(skipped) - 5} more in {out}/manifest.json"))


def _object_lines(objects: dict[str, int]) -> list[str]:
    """What became of the objects' masks and keypoints (the summary's "objects")."""
    lines = []
    if "instance_masks" in objects:
        lines.append(f"{objects['instance_masks']} instance masks ({objects.get('crowd', 0)} "
                     f"crowd, {objects.get('polygons_dropped', 0)} polygons under 3 points "
                     "dropped)")
    if objects.get("masks_not_kept"):
        lines.append(f"{objects['masks_not_kept']} objects carried a segmentation that was "
                     "not kept (convert with --masks to keep instance masks)")
    if "keypoints" in objects:
        lines.append(f"{objects['keypoints']} keypoints labelled, "
                     f"{objects.get('keypoints_outside', 0)} outside the image stored as absent")
    return lines
