"""`tfpipe sample-data`: generate sample datasets (the synthetic CTR table, image folders,
segmentation images with masks, COCO instances with masks and keypoints)."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    """Generate sample datasets, deterministic from a seed (nothing is downloaded)."""


@command.command("ctr")
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--rows", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Rows (impressions) to write.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--weeks", type=click.IntRange(min=1), default=4, show_default=True,
              help="Weeks the timestamps span.")
@click.option("--world-seed", type=int, default=None,
              help="Seed of the users and items [default: --seed]; keep it and change "
                   "--seed for another sample of the same distribution.")
@click.option("--users", type=click.IntRange(min=1), default=None,
              help="Number of users [default: rows/20, at least 100].")
@click.option("--items", type=click.IntRange(min=1), default=None,
              help="Number of items [default: rows/100, at least 50].")
def ctr(out: str, rows: int, seed: int, weeks: int, world_seed: int | None,
        users: int | None, items: int | None) -> None:
    """A synthetic click-through-rate table OUT (.parquet or .csv), streamed in chunks."""
    from tfpipe.features import make_ctr_table

    try:
        path = make_ctr_table(out, rows, seed=seed, weeks=weeks, world_seed=world_seed,
                              num_users=users, num_items=items)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="OUT") from None
    click.echo(f"wrote {rows} rows to {path}")


@command.command("folder")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--classes", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--per-class", type=click.IntRange(min=1), default=25, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def folder(out: str, classes: int, per_class: int, seed: int) -> None:
    """An image folder OUT/<class>/*.jpg|png cut from photos bundled in PyPI packages."""
    from tfpipe.sample_data import make_image_folder

    path = make_image_folder(out, num_classes=classes, per_class=per_class, seed=seed)
    click.echo(f"wrote {classes * per_class} images under {path}")


@command.command("segmentation")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--images", "num_images", type=click.IntRange(min=1), default=20,
              show_default=True)
@click.option("--min-size", type=click.IntRange(min=16), default=64, show_default=True,
              help="Shortest longer side of an image, in pixels.")
@click.option("--max-size", type=click.IntRange(min=16), default=128, show_default=True,
              help="Longest longer side of an image, in pixels.")
@click.option("--seed", type=int, default=0, show_default=True)
def segmentation(out: str, num_images: int, min_size: int, max_size: int, seed: int) -> None:
    """OUT/images/**, OUT/masks/** and OUT/classes.txt: solid shapes (1 circle, 2 square,
    3 triangle) painted on darkened photos, 255 on each shape's border.

    Convert with: tfpipe convert OUT/images DATA --masks OUT/masks --classes OUT/classes.txt
    """
    from tfpipe.sample_data import make_segmentation_folder

    if min_size > max_size:
        raise click.BadParameter(f"--min-size {min_size} is over --max-size {max_size}",
                                 param_hint="--min-size")
    make_segmentation_folder(out, num_images=num_images, seed=seed,
                             size_range=(min_size, max_size))
    click.echo(f"wrote {num_images} images with masks under {out}")


@command.command("pose")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--images", "num_images", type=click.IntRange(min=1), default=12,
              show_default=True)
@click.option("--min-size", type=click.IntRange(min=128), default=128, show_default=True,
              help="Smallest image side, in pixels.")
@click.option("--max-size", type=click.IntRange(min=128), default=192, show_default=True,
              help="Largest image side, in pixels.")
@click.option("--seed", type=int, default=0, show_default=True)
def pose(out: str, num_images: int, min_size: int, max_size: int, seed: int) -> None:
    """OUT/images/*.png and OUT/annotations.json: COCO instances with masks and keypoints.

    "person" figures (polygon masks, 7 keypoints nose, left_/right_ eye, hand, foot
    on marks painted in a colour per point, skeleton), "ball" disks without
    keypoints (compressed RLE masks), one crowd region (RLE counts) in image 0;
    backgrounds cut from scikit-image's photos.

    Convert with: tfpipe convert OUT/annotations.json DATA --masks
    """
    from tfpipe.convert.samples import make_pose_coco

    if min_size > max_size:
        raise click.BadParameter(f"--min-size {min_size} is over --max-size {max_size}",
                                 param_hint="--min-size")
    path = make_pose_coco(out, num_images=num_images, seed=seed,
                          size_range=(min_size, max_size))
    click.echo(f"wrote {num_images} images and {path}")
