"""`tfpipe preview`: a PNG grid of what the pipeline feeds the model."""

from __future__ import annotations

import click

from tfpipe.errors import TfpipeError


@click.command(name="preview")
@click.argument("config")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="PNG file to write.")
@click.option("-n", "n", default=16, show_default=True, type=click.IntRange(min=1),
              help="Number of samples in the grid.")
@click.option("--split", default="train", show_default=True)
@click.option("--epoch", default=0, show_default=True, type=click.IntRange(min=0))
@click.option("--set", "set_options", multiple=True, metavar="KEY=VALUE",
              help="Override a dotted config key, e.g. --set data.path=out/ (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def command(config: str, out: str, n: int, split: str, epoch: int, set_options: tuple[str, ...],
            as_json: bool) -> None:
    """Write a PNG grid of the first N samples of CONFIG's pipeline (preset or YAML path)."""
    from tfpipe.config import load_config, parse_set_options
    from tfpipe.pipeline.preview import render_preview

    try:
        cfg = load_config(config, parse_set_options(list(set_options)))
        info: dict = {}
        path = render_preview(cfg, out, n=n, split=split, epoch=epoch, info=info)
    except TfpipeError as exc:
        click.echo("error: " + str(exc).replace("\n", "\n  "), err=True)
        raise SystemExit(2) from None
    k = info.get("samples", n)
    if as_json:
        import json

        click.echo(json.dumps({"path": str(path), "samples": k, "split": split, "epoch": epoch,
                               "seed": cfg.seed, "partial_batch": info.get("partial_batch"),
                               "device_stage": info.get("device_stage")},
                              indent=2))
        return
    note = (f"; a partial batch: the split has fewer records than pipeline.batch_size="
            f"{cfg.pipeline.batch_size}, which training with drop_remainder: true refuses "
            "(set a smaller pipeline.batch_size or pipeline.drop_remainder: false)"
            if info.get("partial_batch") else "")
    if info.get("device_stage"):
        note += "; augment.pixel_stage: device: shown after the device stage (run on the CPU)"
    click.echo(f"wrote {path} (first {k} samples of split {split}, epoch {epoch}, "
               f"seed {cfg.seed}{note})")
