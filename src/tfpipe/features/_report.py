"""Drift reports as Markdown or self-contained HTML, with a small SVG plot per flagged column.

The SVG is written here (no plotting library, no network, no script): baseline
shares as grey bars, new shares as an orange step line, per quantile bin
(numbers) or per vocabulary value plus one OOV bar (categories).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any

WIDTH, HEIGHT, PAD = 420, 150, 28


def svg_plot(column: Any) -> str:
    """An inline <svg> of `column.plot` (ColumnDrift)."""
    plot = column.plot
    base = [float(v) for v in plot.get("baseline", [])]
    new = [float(v) for v in plot.get("new", [])]
    n = max(len(base), 1)
    top = max([*base, *new, 1e-12]) * 1.1
    w = (WIDTH - 2 * PAD) / n
    h = HEIGHT - 2 * PAD

    def y(v: float) -> float:
        return PAD + h - h * v / top

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(column.name)}">',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
             f'<text x="{PAD}" y="16" font-family="sans-serif" font-size="12">'
             f'{escape(column.name)} ({escape(column.kind)}): baseline (bars) vs new (line)'
             '</text>']
    for i, v in enumerate(base):
        parts.append(f'<rect x="{PAD + i * w:.2f}" y="{y(v):.2f}" width="{max(w - 0.5, 0.5):.2f}" '
                     f'height="{PAD + h - y(v):.2f}" fill="#b0b0b0"/>')
    if new:
        pts = []
        for i, v in enumerate(new):
            pts += [f"{PAD + i * w:.2f},{y(v):.2f}", f"{PAD + (i + 1) * w:.2f},{y(v):.2f}"]
        parts.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="#e8590c" '
                     'stroke-width="1.6"/>')
    parts.append(f'<line x1="{PAD}" y1="{PAD + h}" x2="{WIDTH - PAD}" y2="{PAD + h}" '
                 'stroke="black" stroke-width="0.8"/>')
    if column.kind == "numeric" and plot.get("boundaries"):
        b = plot["boundaries"]
        parts.append(f'<text x="{PAD}" y="{HEIGHT - 8}" font-family="sans-serif" '
                     f'font-size="10">&lt; {b[0]:.4g}</text>')
        parts.append(f'<text x="{WIDTH - PAD}" y="{HEIGHT - 8}" text-anchor="end" '
                     f'font-family="sans-serif" font-size="10">&#8805; {b[-1]:.4g}</text>')
    elif plot.get("labels"):
        labels = plot["labels"]
        parts.append(f'<text x="{PAD}" y="{HEIGHT - 8}" font-family="sans-serif" '
                     f'font-size="10">{escape(labels[0][:24])} ... {escape(labels[-1][:24])} '
                     f'({len(labels)} bars, most frequent first)</text>')
    parts.append(f'<text x="{PAD - 4}" y="{PAD + 4}" text-anchor="end" font-family="sans-serif" '
                 f'font-size="9">{top / 1.1:.2g}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        if not v:
            return "none"
        return ", ".join(_fmt(x) for x in v[:8]) + (" ..." if len(v) > 8 else "")
    return str(v)


_SHOWN = ("psi", "js", "linf", "new_category_rate", "expected_new_category_rate",
          "missing_rate", "mean", "baseline_mean", "dropped_categories", "oov_rate",
          "baseline_oov_rate", "empty_buckets", "overfull_buckets", "rows")


def _summary_rows(report: Any) -> list[tuple[str, str, str, str]]:
    rows = []
    for c in report.columns:
        shown = "; ".join(f"{k} {_fmt(c.metrics[k])}" for k in _SHOWN if k in c.metrics)
        rows.append((c.name, c.kind, "FLAGGED" if c.flagged else "ok", shown))
    for t in report.transforms:
        shown = "; ".join(f"{k} {_fmt(t.metrics[k])}" for k in _SHOWN if k in t.metrics)
        rows.append((t.name, f"after {t.kind}", "FLAGGED" if t.flagged else "ok", shown))
    return rows


def _header(report: Any) -> list[str]:
    b, n = report.baseline, report.new_data
    verdict = (f"{len(report.flagged_names)} flagged: {', '.join(report.flagged_names)}"
               if report.flagged else "nothing flagged")
    return [f"Baseline: {b['source']} ({b['split']} split, {b['num_rows']:,} rows, statistics "
            f"sha256 {b['sha256'][:12]}). New data: {n['source']} ({n['num_rows']:,} rows).",
            f"Result: {verdict}."]


def markdown(report: Any, plots: Mapping[str, str] | None = None) -> str:
    """The report as Markdown; `plots` maps a flagged column to the file of its SVG plot
    (the CLI writes them beside the report); without it the SVG is inlined."""
    lines = ["# Drift report", "", *(_header(report)), ""]
    lines += ["| column | compared as | status | metrics |", "|---|---|---|---|"]
    for name, kind, status, shown in _summary_rows(report):
        lines.append(f"| {name} | {kind} | {status} | {shown.replace('|', '/')} |")
    lines.append("")
    flagged = [c for c in report.columns if c.flagged] + \
        [t for t in report.transforms if t.flagged]
    if flagged:
        lines += ["## Flagged", ""]
    for item in flagged:
        lines += [f"### {item.name} ({item.kind})", ""]
        lines += [f"- {f}" for f in item.flags]
        lines.append("")
        if getattr(item, "plot", None):
            key = f"{item.name}:{item.kind}"
            if plots and key in plots:
                lines += [f"![{item.name}]({plots[key]})", ""]
            else:
                lines += [svg_plot(item), ""]
    for note in report.notes:
        lines.append(f"Note: {note}")
    t = report.thresholds
    lines += ["", "Thresholds: " + ", ".join(f"{k} {v:g}" for k, v in vars(t).items()), ""]
    return "\n".join(lines)


def html(report: Any) -> str:
    """A self-contained HTML page (inline CSS and SVG, no script, nothing fetched)."""
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<title>Drift report</title><style>body{font-family:sans-serif;margin:2em}"
           "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;"
           "text-align:left;font-size:13px}.flag{color:#c92a2a;font-weight:bold}</style>",
           "</head><body><h1>Drift report</h1>"]
    out += [f"<p>{escape(line)}</p>" for line in _header(report)]
    out.append("<table><tr><th>column</th><th>compared as</th><th>status</th>"
               "<th>metrics</th></tr>")
    for name, kind, status, shown in _summary_rows(report):
        cls = ' class="flag"' if status == "FLAGGED" else ""
        out.append(f"<tr><td>{escape(name)}</td><td>{escape(kind)}</td><td{cls}>{status}</td>"
                   f"<td>{escape(shown)}</td></tr>")
    out.append("</table>")
    for item in [c for c in report.columns if c.flagged] + \
            [t for t in report.transforms if t.flagged]:
        out.append(f"<h2>{escape(item.name)} ({escape(item.kind)})</h2><ul>")
        out += [f"<li>{escape(f)}</li>" for f in item.flags]
        out.append("</ul>")
        if getattr(item, "plot", None):
            out.append(svg_plot(item))
    out += [f"<p>Note: {escape(n)}</p>" for n in report.notes]
    t = report.thresholds
    out.append("<p>Thresholds: " + escape(", ".join(f"{k} {v:g}" for k, v in vars(t).items()))
               + "</p></body></html>")
    return "\n".join(out) + "\n"


def write_report(report: Any, path: str | os.PathLike[str]) -> Path:
    """Write `report` to `path`: .md (each flagged column's SVG in `<stem>-plots/` beside
    it) or .html / .htm (SVG inline). Returns the path."""
    from tfpipe.errors import ConfigError

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".md", ".html", ".htm"):
        raise ConfigError(f"{path}: a drift report ends in .md or .html, got {suffix!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".md":
        plots: dict[str, str] = {}
        folder = path.with_name(path.stem + "-plots")
        for c in report.columns:
            if c.flagged and c.plot:
                folder.mkdir(exist_ok=True)
                safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in c.name)
                svg = folder / f"{safe}-{c.kind}.svg"
                svg.write_text(svg_plot(c))
                plots[f"{c.name}:{c.kind}"] = f"{folder.name}/{svg.name}"
        path.write_text(markdown(report, plots))
    else:
        path.write_text(html(report))
    return path
