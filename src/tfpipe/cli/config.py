"""`tfpipe config show|list`: print fully resolved configs and the shipped presets."""

from __future__ import annotations

import json

import click

from tfpipe.errors import ConfigError


def _fail(exc: ConfigError) -> None:
    source = getattr(exc, "source", None)
    head = f"error: invalid config {source}" if source and source != "<mapping>" else "error: invalid config"
    click.echo(head, err=True)
    for line in str(exc).splitlines():
        click.echo(f"  {line}", err=True)
    raise SystemExit(2)


@click.group(name="config")
def command() -> None:
    """Show fully resolved configs and presets."""


@command.command("show")
@click.argument("config")
@click.option("--set", "set_options", multiple=True, metavar="KEY=VALUE",
              help="Override a dotted key, e.g. --set pipeline.batch_size=32 (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML.")
def show(config: str, set_options: tuple[str, ...], as_json: bool) -> None:
    """Print CONFIG (preset name or YAML path) fully resolved: base merged, overrides applied."""
    from tfpipe.config import load_config, parse_set_options

    try:
        cfg = load_config(config, parse_set_options(list(set_options)))
    except ConfigError as exc:
        _fail(exc)
        return
    click.echo(cfg.to_json() if as_json else cfg.to_yaml(), nl=as_json)


@command.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON {name: description}.")
def list_(as_json: bool) -> None:
    """List the presets with a one-line description."""
    from tfpipe.config import list_presets

    presets = list_presets()
    if as_json:
        click.echo(json.dumps(presets, indent=2))
        return
    from tfpipe.cli._console import console, table

    t = table(None, ["preset", "what it is for"], list(presets.items()))
    t.box = None
    t.header_style = "bold"
    console().print(t)
