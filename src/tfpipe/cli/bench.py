"""`tfpipe bench`: throughput of a config's pipeline, its stages, sweeps, input-boundness."""

from __future__ import annotations

import json
import sys
from typing import Any

import click


def _fmt(v: float, digits: int = 1) -> str:
    return f"{v:,.{digits}f}"


_METRICS = [("elements/s", lambda r: _fmt(r.elements_per_s)),
            ("batches/s", lambda r: _fmt(r.batches_per_s, 2)),
            ("MB/s", lambda r: _fmt(r.mb_per_s)),
            ("latency p50 / p90 / p99 ms",
             lambda r: f"{r.p50_ms:,.2f} / {r.p90_ms:,.2f} / {r.p99_ms:,.2f}"),
            ("peak RSS MB (delta)", lambda r: f"{r.peak_rss_mb:,.0f} ({r.rss_delta_mb:+,.0f})"),
            ("CPU (of available)", lambda r: f"{r.cpu_util:.0%} of {r.available_cpus}"),
            ("timed steps / warm-up", lambda r: f"{r.steps} / {r.warmup}"),
            ("warm-up time s (excluded)", lambda r: f"{r.warmup_s:,.2f}")]


def _results_table(title: str, named: list[tuple[str, Any]]) -> Any:
    return _table(title, ["metric"] + [n for n, _ in named],
                  [[m] + [f(r) for _, r in named] for m, f in _METRICS])


def _table(title: str, columns: list[str], rows: list[list[str]]) -> Any:
    from tfpipe.cli._console import table

    return table(title, columns, rows, right=columns[1:])


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("config")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (repeatable), e.g. --set pipeline.batch_size=32.")
@click.option("--split", default="train", show_default=True, help="Split to measure.")
@click.option("--steps", type=click.IntRange(min=1), default=20, show_default=True,
              help="Timed steps (batches) per measurement.")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True,
              help="Steps run before timing starts (excluded).")
@click.option("--stages", is_flag=True, help="Per-stage throughput; name the slowest stage.")
@click.option("--sweep", "sweeps", multiple=True, metavar="KEY=V1,V2,...",
              help="Sweep a config key over values (repeatable; the product of all keys).")
@click.option("--sweep-mode", type=click.Choice(["product", "one_at_a_time"]), default="product",
              show_default=True, help="Cartesian product, or vary one key at a time.")
@click.option("--repeats", type=click.IntRange(min=1), default=2, show_default=True,
              help="Measurements per sweep point (rounds), for the spread; with --stages, "
                   "rounds per stage prefix (the fastest is kept).")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Write the rows as CSV.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="Write a PNG bar chart of a sweep.")
@click.option("--model", "model_path", type=click.Path(exists=True),
              help="SavedModel dir or .keras/.h5 file: how much of each step waits for input.")
@click.option("--baseline", type=click.Choice(["naive"]),
              help="Also run the config the common slow way (Python in tf.py_function).")
@click.option("--tensorboard", "tb_dir", type=click.Path(file_okay=False),
              help="Write throughput scalars and a profiler trace of a few steps here.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def command(config: str, sets: tuple[str, ...], split: str, steps: int, warmup: int,
            stages: bool, sweeps: tuple[str, ...], sweep_mode: str, repeats: int,
            csv_path: str | None, plot_path: str | None, model_path: str | None,
            baseline: str | None, tb_dir: str | None, as_json: bool) -> None:
    """Measure the pipeline of CONFIG (a preset name or a YAML file).

    Default: the train pipeline's throughput, latency percentiles, peak RSS and
    CPU use over --steps batches after --warmup batches.
    """
    from tfpipe.cli._console import console as make_console
    from tfpipe.cli._console import is_terminal
    from tfpipe.errors import TfpipeError

    if plot_path and not sweeps:
        raise click.UsageError("--plot needs --sweep (it charts the sweep's settings)")
    if sweeps and (stages or model_path or baseline or tb_dir):
        raise click.UsageError("--sweep runs on its own: drop --stages / --model / --baseline "
                               "/ --tensorboard, or run them separately")
    console = make_console(stderr=as_json)
    # Progress lines (sweep points, baseline rounds) on a terminal only, on stderr.
    status = make_console(stderr=True) if is_terminal(stderr=True) and not as_json else None
    out: dict[str, Any] = {}
    try:
        _run(config, list(sets), split, steps, warmup, stages, sweeps, sweep_mode, repeats,
             csv_path, plot_path, model_path, baseline, tb_dir, as_json, console, status, out)
    except (TfpipeError, ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(out, indent=2, default=float))


def _run(config: str, sets: list[str], split: str, steps: int, warmup: int, stages: bool,
         sweeps: tuple[str, ...], sweep_mode: str, repeats: int, csv_path: str | None,
         plot_path: str | None, model_path: str | None, baseline: str | None,
         tb_dir: str | None, as_json: bool, console: Any, status: Any,
         out: dict[str, Any]) -> None:
    from tfpipe import bench
    from tfpipe.bench import build_from, resolve_config

    cfg = resolve_config(config, sets)
    show = (lambda x: None) if as_json else console.print
    progress = (lambda msg: status.print(f"[dim]{msg}[/dim]")) if status is not None else None

    if sweeps:
        grid = dict(bench.parse_sweep_option(s) for s in sweeps)
        res = bench.sweep(config, grid, steps=steps, warmup=warmup, repeats=repeats,
                          mode=sweep_mode, overrides=sets, split=split, progress=progress)
        keys = res.keys
        rows = []
        for row in res.table():
            rows.append([str(row[k]) for k in keys] + [
                _fmt(row["elements_per_s"]), f"{_fmt(row['elements_per_s_min'])}-"
                f"{_fmt(row['elements_per_s_max'])}", _fmt(row["mb_per_s"]),
                _fmt(row["p50_ms"], 2), _fmt(row["p90_ms"], 2), _fmt(row["peak_rss_mb"], 0),
                f"{row['cpu_util']:.0%}"])
        show(_table(f"sweep ({sweep_mode}, {repeats} rounds, median)", keys + [
            "elements/s", "range", "MB/s", "p50 ms", "p90 ms", "peak RSS MB", "CPU"], rows))
        show(res.recommendation())
        out["sweep"] = {"mode": sweep_mode, "repeats": repeats, "rows": res.table(),
                        "best": res.best().setting, "recommendation": res.recommendation()}
        if csv_path:
            res.write_csv(csv_path)
            show(f"wrote {csv_path}")
        if plot_path:
            res.plot(plot_path)
            show(f"wrote {plot_path}")
        return

    dataset = build_from(cfg, split=split)
    result = bench.measure(dataset, warmup=warmup, steps=steps)
    named = [(f"tfpipe ({split})", result)]
    out["result"] = result.to_dict()
    if baseline == "naive":
        cmp = bench.compare_naive(cfg, split=split, steps=steps, warmup=warmup, rounds=2,
                                  first=result, progress=progress)
        result = cmp.best
        named = [(f"tfpipe ({split})", result), (cmp.label, cmp.baseline_best)]
        out["result"] = result.to_dict()
        out["baseline"] = cmp.to_dict()
    show(_results_table(f"{config}: {split} pipeline, {steps} steps after {warmup} warm-up",
                        named))
    if baseline == "naive":
        lo, hi = cmp.speedup_range
        show(f"tfpipe / naive: {lo:.2f}x-{hi:.2f}x elements/s ({len(cmp.ours)} alternating rounds)")
        if cmp.not_reproduced:
            show(f"[yellow]naive baseline skips config ops: {', '.join(cmp.not_reproduced)}[/yellow]")
    if csv_path:
        bench.write_result_csv(csv_path, result)
        show(f"wrote {csv_path}")

    if stages:
        rep = bench.stage_report(cfg, steps=steps, warmup=warmup, split=split, rounds=repeats)
        rows = [[s.name, _fmt(s.elements_per_s), _fmt(s.us_per_element, 0), _fmt(s.added_us, 0),
                 f"{s.share:.0%}"] for s in rep.stages]
        if rep.end_to_end is not None:
            e = rep.end_to_end
            rows.append(["end to end (build_pipeline)", _fmt(e.elements_per_s),
                         _fmt(1e6 / max(e.elements_per_s, 1e-9), 0), "", ""])
        show(_table("stages (prefix k = stages 1..k; added = prefix k - prefix k-1, approximate)",
                    ["stage", "elements/s", "us/element", "added us", "share"], rows))
        show(rep.summary())
        out["stages"] = rep.to_dict()

    if model_path:
        ib = bench.input_bound(cfg, model_path, steps=steps, warmup=warmup, split=split)
        show(_table(f"input-bound analysis ({ib.step_kind} per step)",
                    ["model alone ms/step", "fed ms/step", "input wait"],
                    [[_fmt(ib.t_model_ms, 2), _fmt(ib.t_fed_ms, 2),
                      f"{ib.input_wait_fraction:.0%}"]]))
        show(ib.verdict())
        out["input_bound"] = ib.to_dict()

    if tb_dir:
        from tfpipe.bench import trace_to_tensorboard, write_scalars

        write_scalars(tb_dir, result)
        traces = trace_to_tensorboard(build_from(cfg, split=split), tb_dir, steps=min(steps, 5))
        out["tensorboard"] = {"logdir": tb_dir, "traces": [str(p) for p in traces]}
        show(f"wrote scalars and {len(traces)} trace file(s) under {tb_dir} "
             "(view: tensorboard --logdir DIR, with tensorboard-plugin-profile installed)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(command())
