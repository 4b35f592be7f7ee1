"""What the side-by-side benchmarks share: equal-time step counts from a probe,
rounds in alternating order, and median (range) cells for the markdown tables.

Used by pipeline_bench.py, preset_bench.py, detection_bench.py, segmentation_bench.py and
block_decode_bench.py; each keeps its own rows, lines and columns. A row is any
hashable key (a name, a (preset, kind) pair); `run(key, steps)` builds a fresh
dataset for it and returns `tfpipe.bench.measure`'s Result.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

K = TypeVar("K", bound=Hashable)

PROBE_STEPS = 3


def sized_steps(keys: Sequence[K], run: Callable[[K, int], Any], seconds: float,
                min_steps: int, max_steps: int | None = None) -> dict[K, int]:
    """key -> timed steps for about `seconds` per round, from a short probe of each.

    Equal time, not equal steps: a fast row timed over 20 batches runs for a
    fraction of a second and one scheduler hiccup swings it 2x. The probe's few
    steps can come out of the prefetch stock the warm-up left (they look free and
    would size the row at thousands of steps), so where the probe asks for more than
    `max_steps`, a second probe of `max_steps` steps (past that stock) decides: an
    inflated rate is corrected, a fast row keeps its equal time. None: one probe."""
    steps = {}
    for key in keys:
        want = round(seconds * run(key, PROBE_STEPS).batches_per_s)
        if max_steps is not None and want > max_steps:
            want = round(seconds * run(key, max_steps).batches_per_s)
        steps[key] = max(min_steps, want)
    return steps


def alternating_rounds(keys: Sequence[K], rounds: int, run: Callable[[K], Any],
                       line: Callable[[int, K, Any], str] | None = None) -> list[dict[K, Any]]:
    """Every key measured once per round; the order flips each round so drift (other
    load, thermal) does not favour one end of the list. -> one {key: result} a round.
    `line(round, key, result)`: printed (flushed) after each measurement."""
    out: list[dict[K, Any]] = []
    for rnd in range(rounds):
        order = list(keys) if rnd % 2 == 0 else list(reversed(keys))
        this: dict[K, Any] = {}
        for key in order:
            this[key] = r = run(key)
            if line is not None:
                print(line(rnd, key, r), flush=True)
        out.append(this)
    return out


def cpu_ms_per_image(r: Any) -> float:
    """Process CPU time per element of a Result, in ms (all threads of this process;
    not child processes): steadier than images/s on a shared machine."""
    return r.cpu_util * r.wall_s * r.available_cpus / r.elements * 1e3


def med_range(values: Sequence[float], fmt: str = ".2f") -> str:
    """'median (min-max)', each formatted with `fmt` (',.0f' for rates)."""
    return (f"{statistics.median(values):{fmt}} "
            f"({min(values):{fmt}}-{max(values):{fmt}})")


def table_head(*columns: str, after: str = "") -> str:
    """A markdown header row and its rule; `after` follows the last '|' (a note)."""
    head = "| " + " | ".join(columns) + " |" + after
    return head + "\n" + "|---" * len(columns) + "|"


def image_rounds(names: Sequence[K], run: Callable[[K, int], Any], seconds: float,
                 min_steps: int, rounds: int, width: int = 60
                 ) -> tuple[list[dict[K, float]], dict[K, list[float]]]:
    """Equal-time steps per row (`sized_steps`, probes capped at 10 x `min_steps`),
    then `rounds` alternating rounds, a line per measurement -> (per round {row:
    images/s}, {row: [process CPU-ms per image, one per round]})."""
    steps = sized_steps(names, run, seconds, min_steps, max_steps=10 * min_steps)
    print("steps per variant:", steps, flush=True)
    results = alternating_rounds(
        names, rounds, lambda name: run(name, steps[name]),
        lambda rnd, name, r: (f"round {rnd + 1}: {str(name):{width}s} "
                              f"{r.elements_per_s:8.1f} images/s "
                              f"{cpu_ms_per_image(r):6.2f} CPU-ms/image"))
    rates = [{n: r.elements_per_s for n, r in this.items()} for this in results]
    cpu_ms = {n: [cpu_ms_per_image(this[n]) for this in results] for n in names}
    return rates, cpu_ms
