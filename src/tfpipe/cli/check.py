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
                   "memory, records, bad_input, workers, enable_rate, multiworker; "
                   "segmentation: masks.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def command(config: str, sets: tuple[str, ...], batches: int, only: tuple[str, ...],
            as_json: bool) -> None:
    """Run the checklist on CONFIG's pipeline; exit 1 when any check fails.

    Checks: reproducible (no stateful random op; the same batches with other
    parallelism, the same samples with deterministic=false), epochs that differ,
    dtypes and shapes, label sums (mixup/cutmix), memory against the RAM budget,
    every manifest record delivered, bad-input tolerance under on_error=skip, two
    workers disjoint, enable_rate fraction, and with TF_CONFIG set the
    multi-worker pre-flight (TF_CONFIG, shard split, auto-shard policy). A
    segmentation config checks its masks: values in range, the ignore share, and
    each mask the size of its image.
    """
    from rich.text import Text

    from tfpipe.cli._console import console as make_console
    from tfpipe.cli._console import is_terminal, table

    from tfpipe.bench.check import run_checks

    console = make_console()
    # One line per finished check while the others run: on a terminal only.
    status = make_console(stderr=True)
    progress = None if as_json or not is_terminal(stderr=True) else (
        lambda r: status.print(f"[dim]{r.name}: {'pass' if r.passed else 'FAIL'}[/dim]"))
    # A config that does not load, an unknown check: `error: ...` and exit 2 from
    # tfpipe.cli._errors, like every verb; exit 1 stays the verdict "a check failed".
    results = run_checks(config, list(sets), batches=batches, only=list(only) or None,
                         progress=progress)
    failed = [r for r in results if not r.passed]
    if as_json:
        click.echo(json.dumps({"passed": not failed, "checks": [r.to_dict() for r in results]},
                              indent=2))
    else:
        rows = []
        for r in results:
            mark = (Text("n/a", style="yellow") if r.skipped else
                    Text("pass", style="green") if r.passed else Text("FAIL", style="red bold"))
            rows.append([r.name, mark, r.detail])
        console.print(table(f"tfpipe check {config}", ["check", "result", "detail"], rows,
                            show_lines=True))
        console.print(f"[red bold]{len(failed)} check(s) failed[/red bold]" if failed
                      else "[green]all checks passed[/green]")
    if failed:
        sys.exit(1)
