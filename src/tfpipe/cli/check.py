"""`tfpipe check`: pre-flight checklist before a long training run."""

from __future__ import annotations

import json
import sys

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("config")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (repeatable).")
@click.option("--batches", type=click.IntRange(min=1), default=3, show_default=True,
              help="Batches per build for the reproducibility / dtype / label checks.")
@click.option("--only", "only", multiple=True, metavar="CHECK",
              help="Run only these checks (repeatable): reproducible, epochs, dtypes, labels, "
                   "memory, records, bad_input, workers, enable_rate, multiworker.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def command(config: str, sets: tuple[str, ...], batches: int, only: tuple[str, ...],
            as_json: bool) -> None:
    """Run the checklist on CONFIG's pipeline; exit 1 when any check fails.

    Checks: reproducible (no stateful random op; the same batches with other
    parallelism, the same samples with deterministic=false), epochs that differ,
    dtypes and shapes, label sums (mixup/cutmix), memory against the RAM budget,
    every manifest record delivered, bad-input tolerance under on_error=skip, two
    workers disjoint, enable_rate fraction, and with TF_CONFIG set the
    multi-worker pre-flight (TF_CONFIG, shard split, auto-shard policy).
    """
    from rich.console import Console
    from rich.table import Table

    from tfpipe.bench.check import run_checks
    from tfpipe.errors import TfpipeError

    console = Console()
    progress = None if as_json else (
        lambda r: console.print(f"[dim]{r.name}: {'pass' if r.passed else 'FAIL'}[/dim]"))
    try:
        results = run_checks(config, list(sets), batches=batches, only=list(only) or None,
                             progress=progress)
    except (TfpipeError, ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from exc
    failed = [r for r in results if not r.passed]
    if as_json:
        click.echo(json.dumps({"passed": not failed, "checks": [r.to_dict() for r in results]},
                              indent=2))
    else:
        table = Table(title=f"tfpipe check {config}", title_justify="left", show_lines=True)
        table.add_column("check")
        table.add_column("result")
        table.add_column("detail", overflow="fold")
        for r in results:
            mark = "[yellow]n/a[/yellow]" if r.skipped else (
                "[green]pass[/green]" if r.passed else "[red bold]FAIL[/red bold]")
            table.add_row(r.name, mark, r.detail)
        console.print(table)
        console.print(f"[red bold]{len(failed)} check(s) failed[/red bold]" if failed
                      else "[green]all checks passed[/green]")
    if failed:
        sys.exit(1)
