"""The CLI's one error handler: an exception becomes one line and an exit code.

tfpipe's own errors already name the file, record, offset or config key; a
TensorFlow runtime error is reduced to its message (tfpipe's graph assertions
name the shard and record) without TF's function-node and op internals, plus
the next step where one is known. `--debug` (or TFPIPE_DEBUG=1) re-raises, so
the traceback is there when a bug needs reporting.

Exit codes: 2 for an error that stopped the verb (bad input, bad config, a
missing file); a verb's own verdict codes (1: DAMAGED, a failed check) are
unchanged; 130 for Ctrl-C.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

T = TypeVar("T")
EXIT_ERROR = 2

DAMAGED_HINT = ("run `tfpipe verify DATA` to locate the damage and "
                "`tfpipe verify DATA --salvage OUT` to keep every readable record")


def describe(exc: BaseException) -> str:
    """The message the user sees for `exc` (without the "error: " prefix)."""
    from tfpipe.errors import ConfigError, TfpipeError, tf_error_text

    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(exc, tf.errors.OpError):
        msg = tf_error_text(exc)
        if isinstance(exc, tf.errors.DataLossError) and "verify" not in msg:
            msg += f"; {DAMAGED_HINT}"
        return msg
    from tfpipe.switches import SwitchError

    if isinstance(exc, SwitchError):  # names the variable and its allowed values
        return str(exc)
    if isinstance(exc, ConfigError):
        source = getattr(exc, "source", None)
        head = (f"invalid config {source}" if source and source != "<mapping>"
                else "invalid config")
        lines = str(exc).splitlines()
        if len(lines) == 1:  # one line, as every other error (README, "Use")
            return f"{head}: {lines[0]}"
        return head + "\n" + "\n".join(f"  {ln}" for ln in lines)
    if isinstance(exc, TfpipeError):
        return str(exc).replace("\n", "\n  ")
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    if isinstance(exc, (ValueError, OSError)):
        return str(exc)
    first = (str(exc).strip().splitlines() or [""])[0]
    return (f"{type(exc).__name__}: {first} (unexpected: rerun with --debug for the traceback "
            f"and report it)")


def run_reporting_errors(fn: Callable[[], T], debug: bool = False) -> T:
    """Run `fn`; an exception that is not click's own ends the process with one line."""
    try:
        return fn()
    except click.ClickException as exc:
        # click's usage errors keep their usage text (exit 2); a verb's own
        # ClickException (exit 1, "Error: ...") reads like every other error here.
        if debug or isinstance(exc, click.UsageError) or exc.exit_code != 1:
            raise
        click.echo(f"error: {exc.format_message()}", err=True)
        raise SystemExit(EXIT_ERROR) from None
    except (click.exceptions.Exit, click.Abort, SystemExit):
        raise
    except KeyboardInterrupt:
        if debug:
            raise
        click.echo("interrupted", err=True)
        raise SystemExit(130) from None
    except Exception as exc:  # noqa: BLE001 - this is the last line of defence
        if debug:
            raise
        click.echo(f"error: {describe(exc)}", err=True)
        raise SystemExit(EXIT_ERROR) from None


def fail(message: str, code: int = EXIT_ERROR) -> Any:
    """End a verb with one error line (for checks the verb makes itself)."""
    click.echo(f"error: {message}", err=True)
    raise SystemExit(code)
