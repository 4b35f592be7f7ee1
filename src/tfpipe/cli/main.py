"""Entry point of the `tfpipe` command.

Each verb lives in its own module (`tfpipe.cli.<verb>`) exposing a click
command named `command`; modules load only when their verb runs, so
`tfpipe --help` stays fast and TensorFlow is imported only when needed.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from tfpipe._version import __version__

# verb -> (module, one-line help shown by `tfpipe --help`)
VERBS: dict[str, tuple[str, str]] = {
    "convert": ("tfpipe.cli.convert", "Convert raw data into sharded TFRecords with a manifest."),
    "inspect": ("tfpipe.cli.inspect", "Show schema, counts, class histogram and first records."),
    "verify": ("tfpipe.cli.verify", "Check manifest, checksums and every record; salvage damage."),
    "adopt": ("tfpipe.cli.adopt", "Write a manifest for existing shards, without rewriting them."),
    "env": ("tfpipe.cli.env", "TensorFlow build, devices, CPUs and RAM this process may use."),
    "config": ("tfpipe.cli.config", "Show fully resolved configs and presets."),
    "preview": ("tfpipe.cli.preview", "Write a PNG grid of what the pipeline feeds the model."),
    "materialize": ("tfpipe.cli.materialize", "Write N augmented epochs to disk."),
    "bench": ("tfpipe.cli.bench", "Measure pipeline throughput, stages, sweeps, input-boundness."),
    "check": ("tfpipe.cli.check", "Pre-flight checklist before a long training run."),
    "doctor": ("tfpipe.cli.doctor", "Find anti-patterns in any tf.data pipeline."),
    "export": ("tfpipe.cli.export", "SavedModel with the eval preprocessing + TF Serving files."),
    "service": ("tfpipe.cli.service", "Start a tf.data service dispatcher or worker."),
    "drift": ("tfpipe.cli.drift", "Compare new data with the stored train statistics."),
    "sample-data": ("tfpipe.cli.sample_data", "Generate sample data: a synthetic CTR table, image folders."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        available = []
        for verb, (module, _) in VERBS.items():
            if importlib.util.find_spec(module) is not None:
                available.append(verb)
        return available

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in VERBS:
            return None
        module_name, short_help = VERBS[name]
        if importlib.util.find_spec(module_name) is None:
            return None
        command = importlib.import_module(module_name).command
        command.short_help = command.short_help or short_help
        return command

    def invoke(self, ctx: click.Context) -> object:
        # One line per error, naming what failed, never a traceback (--debug
        # or TFPIPE_DEBUG=1 shows it): see tfpipe.cli._errors.
        from tfpipe.cli._errors import run_reporting_errors

        return run_reporting_errors(lambda: super(LazyGroup, self).invoke(ctx),
                                    debug=_debug(ctx))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Use the static one-liners so `--help` never imports the verbs' modules.
        rows = [(verb, VERBS[verb][1]) for verb in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _debug(ctx: click.Context) -> bool:
    if ctx.params.get("debug"):
        return True
    from tfpipe import switches

    try:
        return bool(switches.get("TFPIPE_DEBUG"))
    except switches.SwitchError:  # a bad value: the error itself is reported without it
        return False


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tfpipe")
@click.option("-v", "--verbose", is_flag=True,
              help="Show TensorFlow's own logs (C++ start-up notices, Python warnings).")
@click.option("--debug", is_flag=True,
              help="Show the full traceback of an error (also: TFPIPE_DEBUG=1).")
def cli(verbose: bool, debug: bool) -> None:
    """tfpipe: fast, reproducible TensorFlow input pipelines."""
    from tfpipe.cli._quiet import configure

    # Before any verb imports TensorFlow (a TF_CPP_MIN_LOG_LEVEL you set wins).
    configure(verbose=verbose)


def main() -> None:
    # Without TensorFlow, importing this module already failed in
    # tfpipe/__init__.py with an ImportError that names the extra to install.
    cli()


if __name__ == "__main__":
    main()
