"""`tfpipe drift OUT NEW_DATA`: new data against the stored train statistics (logic:
tfpipe.features.drift). Exit code 1 when anything is flagged, 0 otherwise, 2 on errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("out", type=click.Path(exists=True))
@click.argument("new_data", type=click.Path(exists=True, dir_okay=False))
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None,
              help="Write a report: .md (plots as SVG files beside it) or .html (inline SVG).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              default=None, help="YAML: thresholds, columns, ignore, transforms "
                                 "(docs/tabular.md).")
@click.option("--pipeline-config", "pipeline_config", default=None, metavar="CFG",
              help="A tabular pipeline config: its features: section gives the transforms "
                   "of the after-transform health (the graph the pipeline applies).")
@click.option("--ignore", multiple=True, help="A column not to compare (repeatable).")
def command(out: str, new_data: str, report_path: str | None, as_json: bool,
            config_path: str | None, pipeline_config: str | None,
            ignore: tuple[str, ...]) -> None:
    """Compare NEW_DATA (.csv/.parquet) with OUT's statistics.json (a dataset directory
    converted with --stats, or the file itself): PSI / Jensen-Shannon for numbers,
    L-infinity / new-category rate for categories, after-transform health."""
    from tfpipe.features import drift, load_drift_config, read_statistics

    if report_path is not None and Path(report_path).suffix.lower() not in (".md", ".html",
                                                                             ".htm"):
        raise click.BadParameter("must end in .md or .html", param_hint="--report")
    kwargs = load_drift_config(config_path) if config_path else {}
    kwargs["ignore"] = [*kwargs.get("ignore", []), *ignore]
    if pipeline_config is not None:
        from tfpipe.config import load_config
        from tfpipe.errors import ConfigError
        from tfpipe.pipeline import transform_specs

        cfg = load_config(pipeline_config)
        if cfg.features is None:
            raise ConfigError(f"{pipeline_config}: --pipeline-config needs a config with a "
                              "features: section")
        kwargs["transforms"] = [*kwargs.get("transforms", []), *transform_specs(cfg.features)]
    stats = read_statistics(out)
    report = drift(stats, new_data, **kwargs)
    if report_path is not None:
        report.write(report_path)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, sort_keys=True, default=str))
    else:
        from tfpipe.cli._console import console, table, text

        con = console()
        rows = [[c.name, c.kind, "FLAGGED" if c.flagged else "ok", "; ".join(c.flags)]
                for c in report.columns]
        rows += [[t.name, f"after {t.kind}", "FLAGGED" if t.flagged else "ok",
                  "; ".join(t.flags)] for t in report.transforms]
        con.print(table(f"drift: {report.new_data['source']} vs {report.baseline['source']}",
                        ["column", "compared as", "status", "why"], rows))
        con.print(text(f"{len(report.flagged_names)} flagged: "
                       f"{', '.join(report.flagged_names)}" if report.flagged
                       else "nothing flagged"))
        if report_path is not None:
            con.print(text(f"report: {report_path}"))
    sys.exit(1 if report.flagged else 0)

