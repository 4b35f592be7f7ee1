"""Consoles, tables and progress bars for the verbs.

On a terminal, rich fits tables to the window. Anywhere else (a pipe, a CI log,
`| tee`, `| grep`) nothing is wrapped, folded or cut with an ellipsis: a table is
as wide as its longest cell, so a script grepping the output for a shard's name,
a path or a byte offset finds it whole on one line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

# Wider than any line a table of file paths and messages needs; rich sizes a
# table to its content, so this only lifts the 80-column default of a pipe.
UNWRAPPED_WIDTH = 1 << 16


def is_terminal(stderr: bool = False) -> bool:
    stream = sys.stderr if stderr else sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def console(stderr: bool = False) -> Any:
    """A rich Console for stdout (or stderr): terminal-sized on a TTY, unwrapped otherwise."""
    from rich.console import Console

    if is_terminal(stderr):
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=UNWRAPPED_WIDTH, soft_wrap=True)


def text(value: Any) -> Any:
    """A cell or line of data, never read as rich markup (a "[train]" stays)."""
    from rich.text import Text

    return value if isinstance(value, Text) else Text("" if value is None else str(value))


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
          right: Sequence[str] = (), show_lines: bool = False, show_header: bool = True,
          styles: dict[str, str] | None = None) -> Any:
    """A rich Table of plain-text cells (`right`: right-aligned columns)."""
    from rich.table import Table

    terminal = is_terminal()
    t = Table(title=title, title_justify="left", show_lines=show_lines,
              show_header=show_header)
    for c in columns:
        # On a terminal, long cells fold (never an ellipsis: a cut path is
        # useless); elsewhere the console is wide enough that nothing folds.
        t.add_column(c, justify="right" if c in right else "left", overflow="fold",
                     no_wrap=not terminal, style=(styles or {}).get(c))
    for row in rows:
        t.add_row(*[text(v) for v in row])
    return t


class Rows:
    """Rows collected with `add_row(*cells)`, for `table`."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []

    def add_row(self, *cells: Any) -> None:
        self.rows.append(list(cells))


@contextmanager
def progress(description: str, enabled: bool = True
             ) -> Iterator[Callable[[int, int | None], None]]:
    """A progress bar on stderr, shown only on a terminal; yields update(done, total)."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)

    err = console(stderr=True)
    show = enabled and is_terminal(stderr=True)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=err, disable=not show, transient=True)
    task = bar.add_task(description, total=None)

    def update(done: int, total: int | None = None, what: str | None = None) -> None:
        bar.update(task, completed=done, total=total,
                   description=description if what is None else f"{description} {what}")

    with bar:
        yield update
