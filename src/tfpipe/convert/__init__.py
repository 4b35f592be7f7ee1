"""Raw data -> sharded TFRecords + manifest.json.

`convert(src, out)` handles image folders (`root/<class>/<image>`, or images
with a mask folder for segmentation), CSV and Parquet tables and COCO JSON
(boxes with their instance masks and keypoints, or class masks rasterized from its
polygons and RLE). Conversion is planned first
(inputs -> split -> shard, deterministic from the seed) and then each shard is
written as an independent unit of work, so the output is byte-identical for any
`workers` and an interrupted run can `resume`. See docs/convert.md.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tfpipe.convert._plan import assign_split, parse_split, plan_shards
from tfpipe.convert._run import ON_ERROR, execute
from tfpipe.convert._source import Source
from tfpipe.convert._tfds import write_tfds_metadata
from tfpipe.convert.beam import RUNNERS, check_paths, is_url, pipeline_flags, run_beam, url_source
from tfpipe.convert._summary import conversion_summary
from tfpipe.convert._table_normalize import LIST_NULLS, TIME_UNITS, parse_keep_float64
from tfpipe.convert._table_stats import (StreamedStatistics, attach_statistics,
                                         check_stats_request)
from tfpipe.convert.coco import BOX_POLICIES, CocoSource, looks_like_coco
from tfpipe.convert.folder import FolderSource
from tfpipe.convert.segfolder import SegmentationFolderSource, read_class_names
from tfpipe.convert.table import TableSource
from tfpipe.errors import ConfigError, InputError
from tfpipe.records import DEFAULT_SHARD_SIZE, Manifest, parse_size
from tfpipe.records.framing import normalize_compression

FORMATS = ("auto", "folder", "csv", "parquet", "coco")
TASKS = ("classification", "detection", "segmentation")

__all__ = ["BOX_POLICIES", "FORMATS", "LIST_NULLS", "ON_ERROR", "RUNNERS", "TASKS",
           "TIME_UNITS", "conversion_summary", "convert", "detect_format", "make_source",
           "parse_split", "parse_keep_float64", "read_class_names", "write_tfds_metadata"]


def detect_format(src: str | os.PathLike[str]) -> str:
    """folder for a directory, csv / parquet by suffix, coco for a .json with images+annotations."""
    path = Path(src)
    if not path.exists():
        raise InputError(f"{src}: no such file or directory")
    if path.is_dir():
        return "folder"
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".json" and looks_like_coco(path):
        return "coco"
    raise InputError(f"{src}: cannot tell the format; pass format= one of "
                     f"{', '.join(FORMATS[1:])} (auto knows a directory of class folders, "
                     ".csv, .parquet/.pq, and a COCO .json with 'images' and 'annotations')")


def make_source(src: str | os.PathLike[str], format: str = "auto", *,
                image_column: str | None = None, label_column: str | None = None,
                images: str | os.PathLike[str] | None = None,
                invalid_boxes: str = "clip", list_nulls: str = "drop-element",
                keep_float64: str | Sequence[str] | None = None,
                time_unit: str = "s", masks: str | os.PathLike[str] | bool | None = None,
                classes: str | os.PathLike[str] | None = None,
                task: str | None = None, rows_per_record: int = 1) -> Source:
    """The converter source for `src` (see `convert` for the arguments)."""
    if format not in FORMATS:
        raise ConfigError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    if task is not None and task not in TASKS:
        raise ConfigError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    if format == "auto":
        format = detect_format(src)
    if masks is False:
        masks = None
    _check_task(format, task, masks, classes)
    if masks is not None and masks is not True:
        return SegmentationFolderSource(src, masks, classes)
    if format != "coco" and images is not None:
        raise ConfigError("images= is only for format='coco'")
    if format not in ("csv", "parquet") and (image_column or label_column):
        raise ConfigError(f"image_column / label_column apply to csv and parquet, "
                          f"not {format!r}")
    if format not in ("csv", "parquet") and (keep_float64 or list_nulls != "drop-element"
                                             or time_unit != "s"):
        raise ConfigError(f"list_nulls / keep_float64 / time_unit apply to csv and parquet, "
                          f"not {format!r}")
    if format not in ("csv", "parquet") and rows_per_record != 1:
        raise ConfigError(f"rows_per_record packs table rows (csv and parquet), not {format!r}")
    if format == "folder":
        return FolderSource(src)
    if format in ("csv", "parquet"):
        if not is_url(src) and not Path(src).is_file():
            raise InputError(f"{src}: not a file (format {format!r} reads one table file)")
        return TableSource(src, format, image_column=image_column, label_column=label_column,
                           list_nulls=list_nulls, keep_float64=parse_keep_float64(keep_float64),
                           time_unit=time_unit, rows_per_record=rows_per_record)
    return CocoSource(src, images=None if images is None else os.fspath(images),
                      invalid_boxes=invalid_boxes, task=task or "detection",
                      instance_masks=masks is True)


def _check_task(format: str, task: str | None, masks: Any, classes: Any) -> None:
    """Which task each format can produce, and the options that go with it."""
    if masks is True and format != "coco":
        raise ConfigError(f"masks=True (instance masks) goes with a COCO file, not format "
                          f"{format!r}; an image folder's masks= is its mask folder")
    if masks is not None and masks is not True and format != "folder":
        raise ConfigError(f"masks= goes with an image folder (format 'folder'), not {format!r}; "
                          "a COCO file gets instance masks with masks=True (--masks without "
                          "a folder) and one class mask per image with task='segmentation'")
    if masks is True and task == "segmentation":
        raise ConfigError("masks=True (instance masks, --masks) goes with task 'detection'; "
                          "task 'segmentation' rasterizes a COCO file into class masks")
    if classes is not None and (masks is None or masks is True):
        raise ConfigError("classes= names the classes of masks= (a COCO file names its "
                          "categories itself)")
    if task is None:
        return
    allowed = {"folder": ("segmentation",) if masks is not None else ("classification",),
               "coco": ("detection", "segmentation")}.get(format, ())
    if task not in allowed:
        hint = (" (segmentation from a folder needs masks=MASKS)"
                if format == "folder" and task == "segmentation" else "")
        raise ConfigError(f"task {task!r} does not apply to format {format!r}"
                          + (f" (it gives: {', '.join(allowed)})" if allowed else "")
                          + f"{hint}; leave task unset for tables")


# A spawned worker costs ~0.3-0.6 s to start (imports) on the 2-vCPU dev machine,
# about the time one process needs to convert 50-100 MB; below that, extra
# processes only add start-up time (benchmarks/convert_bench.py, docs/performance-history.md).
BYTES_PER_DEFAULT_WORKER = 64 << 20


def default_workers(total_bytes: int) -> int:
    """The CPUs this process may use, but no more than one per 64 MiB of input."""
    from tfpipe.system import available_cpus

    return max(1, min(available_cpus(), math.ceil(total_bytes / BYTES_PER_DEFAULT_WORKER)))


def convert(src: str | os.PathLike[str], out: str | os.PathLike[str], *,
            format: str = "auto", split: str | dict[str, float] | None = None,
            shard_size: int | str = DEFAULT_SHARD_SIZE, compression: str | None = None,
            workers: int | None = None, on_error: str = "skip", resume: bool = False,
            seed: int = 0, image_column: str | None = None, label_column: str | None = None,
            images: str | os.PathLike[str] | None = None, invalid_boxes: str = "clip",
            progress: Callable[[int, int], None] | None = None, runner: str = "local",
            pipeline_options: str | Sequence[str] | None = None, stats: bool = False,
            stats_top_k: int = 10_000, stats_quantiles: int = 100,
            list_nulls: str = "drop-element", keep_float64: str | Sequence[str] | None = None,
            time_unit: str = "s", masks: str | os.PathLike[str] | bool | None = None,
            classes: str | os.PathLike[str] | None = None,
            task: str | None = None, rows_per_record: int = 1) -> Manifest:
    """Convert `src` into shards + manifest.json under `out`; return the manifest.

    - format: auto | folder | csv | parquet | coco.
    - split: "train=0.9,val=0.1" or {"train": 0.9, "val": 0.1}; default all in "train".
      Each input's split is a seeded hash of its key (relative path, row index,
      COCO image id), so it never changes when inputs are added.
    - shard_size: target bytes per shard (int or "256MB"); compression: None | "gzip".
    - workers: processes writing shards (default: the CPUs this process may use,
      at most one per 64 MiB of input); the output is byte-identical for every value.
    - on_error: "skip" (list bad inputs in the manifest) or "raise" (InputError).
    - resume: keep shards of an interrupted run into `out` whose sha256 still matches.
    - image_column / label_column: tables only; images: COCO image directory
      (default: the JSON's directory); invalid_boxes: clip | drop | raise (COCO).
    - progress: called with (inputs done, inputs total) as shards finish (Beam
      runners: at the start and the end only).
    - runner: local (this machine's process pool) | direct | dataflow | flink | spark
      (Apache Beam, `tfpipe[beam]`): the same plan and byte-identical output.
      pipeline_options: Beam flags, one shell-quoted string or a list
      (docs/scale.md).
    - stats: tables only: per-column statistics of the train split (the rows the
      plan puts in train shards) into `out/statistics.json`, its hash in the
      manifest's settings.statistics; stats_top_k / stats_quantiles: vocabulary
      size and number of quantile bins (docs/tabular.md). On a Beam runner they
      are computed by a Beam combiner.
    - list_nulls (tables): a null inside a list column: "drop-element" (the list keeps
      its other values), "drop-row" (the row is skipped, listed in the manifest) or
      "error". keep_float64 (tables): float64 columns ("a,b", a list, or "all") stored
      exactly as their bit pattern in int64 (schema encoding "float64_bits") instead of
      float32; the narrowing of the others is in the manifest (source.normalized).
      time_unit (tables): s | ms | us | ns of the int64 epoch that timestamps and dates
      are stored as (the `time` transform reads seconds). docs/convert.md "Tables".
    - masks: COCO: True = instance masks (task detection): each kept box's
      segmentation rasterized as pycocotools does, one 0/1 PNG per object under
      image/object/mask, with image/object/area and image/object/is_crowd
      (docs/convert.md "Instance masks and keypoints"); without it the objects that
      carried one are counted (stats masks_not_kept). Keypoints are converted
      whenever the COCO categories name them.
      Segmentation, image folders: the mask folder: for each image
      `src/<rel>/<stem>.<ext>` a single-channel 8-bit PNG `masks/<rel>/<stem>.png`,
      pixel = class index, 255 = ignore; classes: a text file naming class k on
      line k+1 (default: class_0..class_K for the largest class K in the masks).
    - task: COCO: "detection" (default, boxes) or "segmentation" (one class mask
      per image rasterized from the polygons / RLE; class k = k-th category in id
      order, 0 = background, crowd = 255). docs/convert.md "Segmentation masks".
    - rows_per_record (tables): 1 (default): one row per record; N > 1: the packed
      layout, N consecutive rows of a shard per record, column by column (the manifest
      counts records as records and the rows in settings.shard_stats; docs/tabular.md
      "Packed layout"). The shard plan is the same for every N.
    """
    if on_error not in ON_ERROR:
        raise ConfigError(f"on_error must be one of {', '.join(ON_ERROR)}, got {on_error!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an int, got {seed!r}")
    if invalid_boxes not in BOX_POLICIES:
        raise ConfigError(f"invalid_boxes must be one of {', '.join(BOX_POLICIES)}, "
                          f"got {invalid_boxes!r}")
    try:
        compression = normalize_compression(compression)
    except ValueError as exc:
        raise ConfigError(f"compression: {exc}") from None
    ratios = parse_split(split)
    size = parse_size(shard_size)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise ConfigError(f"workers must be an int >= 1, got {workers!r}")
    flags = pipeline_flags(runner, pipeline_options)  # before the listing: Beam installed?
    if runner != "local":
        if workers is not None:
            raise ConfigError(f"workers applies to runner 'local'; runner {runner!r} takes "
                              "its parallelism from pipeline_options (e.g. "
                              "--direct_num_workers=2, --max_num_workers=50)")
    check_paths(runner, src, out, images=images, fmt=format)  # URLs: Beam; folders and tables
    if masks is not None and not isinstance(masks, bool) and (is_url(src) or is_url(masks)):
        raise InputError(f"{os.fspath(masks if is_url(masks) else src)}: images and masks= "
                         "must be local (POSIX) paths; a URL source is implemented for "
                         "classification folders and tables only (docs/scale.md)")

    table = dict(list_nulls=list_nulls, keep_float64=keep_float64, time_unit=time_unit,
                 **({"rows_per_record": rows_per_record} if rows_per_record != 1 else {}))
    if is_url(src):
        source = url_source(os.fspath(src), format, image_column=image_column,
                            label_column=label_column, **table)
    else:
        source = make_source(src, format, image_column=image_column,
                             label_column=label_column, images=images,
                             invalid_boxes=invalid_boxes, masks=masks, classes=classes,
                             task=task, **table)
    if stats:
        check_stats_request(source, ratios)
        if is_url(out):
            raise ConfigError(f"stats: statistics.json is written beside a local OUT only, not "
                              f"{os.fspath(out)}; convert into a local path or a mounted share, "
                              "or compute them later with tfpipe.features.compute_statistics")
    enumeration = source.enumerate()
    # Under on_error="raise", inputs found bad here are reported together with
    # those found while writing (execute), so one run names every bad input.
    if not enumeration.items:
        first = (f" (first: {enumeration.bad[0][0].label}: {enumeration.bad[0][1]})"
                 if enumeration.bad else "")
        raise InputError(f"{src}: nothing to convert: {len(enumeration.bad)} bad "
                         f"input(s){first}")
    plan = plan_shards(enumeration.items, ratios, seed, size)
    settings = {"split": ratios, "seed": seed, "shard_size": size, "on_error": on_error}
    if runner != "local":
        # The runner is not recorded: it changes nothing in the output.
        manifest = run_beam(source, enumeration, plan, out, settings=settings,
                            compression=compression, on_error=on_error, resume=resume,
                            split_of=lambda key: assign_split(key, ratios, seed),
                            runner=runner, flags=flags, progress=progress)
    else:
        # Statistics ride on the plan's one pass over the table (while it is written).
        streamed = (StreamedStatistics(source, plan, top_k=stats_top_k,  # type: ignore[arg-type]
                                       num_quantiles=stats_quantiles) if stats else None)
        if workers is None:
            workers = default_workers(enumeration.total_size())
        manifest = execute(source, enumeration, plan, out, settings=settings,
                           compression=compression, workers=workers, on_error=on_error,
                           resume=resume, split_of=lambda key: assign_split(key, ratios, seed),
                           progress=progress)
    if stats:
        # After the manifest: the dataset is complete first; the manifest is then
        # re-saved with the statistics' hash (settings.statistics).
        if runner != "local":
            from tfpipe.convert._beam_stats import beam_statistics

            table_stats = beam_statistics(source, plan, os.fspath(out), runner=runner,
                                          flags=flags, top_k=stats_top_k,
                                          num_quantiles=stats_quantiles)
        else:
            table_stats = streamed.result()  # type: ignore[union-attr]
        manifest = attach_statistics(out, table_stats)
    return manifest
