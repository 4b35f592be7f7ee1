"""`tfpipe materialize`: write N augmented epochs to disk for cheap re-reading."""

from __future__ import annotations

import json

import click

from tfpipe.errors import TfpipeError


@click.command(name="materialize")
@click.argument("config")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--epochs", default=1, show_default=True, type=click.IntRange(min=1),
              help="Number of augmented epochs to write (epoch e -> OUT/epoch-0000e).")
@click.option("--split", default="train", show_default=True)
@click.option("--set", "set_options", multiple=True, metavar="KEY=VALUE",
              help="Override a dotted config key, e.g. --set data.path=out/ (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the written description as JSON.")
def command(config: str, out: str, epochs: int, split: str, set_options: tuple[str, ...],
            as_json: bool) -> None:
    """Run CONFIG's pipeline for EPOCHS epochs and save the batches under OUT.

    Train later with `--set pipeline.materialized=OUT` (or data.path=OUT).
    """
    from tfpipe.config import load_config, parse_set_options
    from tfpipe.pipeline import materialize

    from tfpipe.cli._console import progress

    try:
        cfg = load_config(config, parse_set_options(list(set_options)))
        with progress("materializing epochs", enabled=not as_json) as update:
            info = materialize(cfg, out, epochs, split=split, progress=update)
    except TfpipeError as exc:
        click.echo("error: " + str(exc).replace("\n", "\n  "), err=True)
        raise SystemExit(2) from None
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        click.echo(f"wrote {epochs} epoch(s) of {split!r} to {out} "
                   f"({sum(info['batches_per_epoch'])} batches, config {info['config_hash']})")
