"""`tfpipe doctor TARGET`: find anti-patterns in a tf.data pipeline."""

from __future__ import annotations

import json
import sys

import click


@click.command("doctor")
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Print findings as a JSON list.")
@click.option("--ignore", "ignore", multiple=True, metavar="RULE",
              help="Silence a rule by id (repeatable).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Config override, e.g. data.path=/data (tfpipe configs only).")
@click.option("--split", default="train", show_default=True,
              help="Split to build when TARGET is a tfpipe config.")
@click.option("--batch-size", type=int, default=None,
              help="Batch size, when batching happens outside the dataset.")
def command(target: str, as_json: bool, ignore: tuple[str, ...], sets: tuple[str, ...],
            split: str, batch_size: int | None) -> None:
    """Find known tf.data anti-patterns in TARGET.

    TARGET is path/to/file.py:function or package.module:function (imported
    because you named it; function() must return a tf.data.Dataset), or a
    tfpipe config (preset name or YAML path). Exit 1 if any error-severity
    finding, 2 if TARGET cannot be loaded, else 0.
    """
    from tfpipe import doctor

    unknown = sorted(set(ignore) - set(doctor.RULES))
    if unknown:
        raise click.BadParameter(f"unknown rule id(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(sorted(doctor.RULES))}", param_hint="--ignore")
    try:
        loaded = doctor.load_target(target, sets=sets, split=split)
    except doctor.TargetError as exc:
        click.echo(f"error: cannot load TARGET: {exc}", err=True)
        sys.exit(2)
    try:
        findings = doctor.check(loaded.dataset, ignore=ignore, locations=loaded.locations,
                                batch_size_hint=batch_size or loaded.batch_size,
                                config=loaded.config)
    except ValueError as exc:  # a graph tf.data refuses to serialize at all
        click.echo(f"error: {loaded.description}: {exc}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(json.dumps([f.to_dict() for f in findings], indent=2))
    else:
        _print_table(loaded.description, findings)
    sys.exit(1 if doctor.worst(findings) == "error" else 0)


def _print_table(description: str, findings: list) -> None:
    from rich.text import Text

    from tfpipe.cli._console import console as make_console
    from tfpipe.cli._console import table, text

    console = make_console()
    if not findings:
        console.print("[green]No findings[/] in ", text(description), ".", sep="")
        return
    colors = {"error": "red", "warning": "yellow", "info": "cyan"}
    rows = []
    for f in findings:
        function = " -> ".join(f.call_path) if len(f.call_path) > 1 else (f.function or "")
        if f.location:
            function += f"\n{f.location}"
        rows.append([f.rule, Text(f.severity, style=colors[f.severity]), f.op, function,
                     f.message, f.fix])
    # Rule ids stay whole so they can be copied into --ignore.
    console.print(table(f"tfpipe doctor: {description}",
                        ["rule", "severity", "op", "function", "message", "fix"], rows,
                        show_lines=True))
    counts = {s: sum(f.severity == s for f in findings) for s in colors}
    console.print(", ".join(f"{n} {s}" for s, n in counts.items() if n)
                  + ". Silence a rule with --ignore RULE (docs/doctor.md).")
