"""Sweeps: every grid value measured, rounds, CSV columns, PNG, recommendation."""

from __future__ import annotations

import csv
import dataclasses

import pytest
import tensorflow as tf

from tfpipe.bench import CSV_METRICS, SweepResult, SweepRow, grid_points, measure, parse_sweep_option, sweep_builder


def _builder(calls: list[dict]) -> callable:
    def build(setting: dict) -> tf.data.Dataset:
        calls.append(dict(setting))
        return tf.data.Dataset.range(1000).map(lambda i: tf.zeros([setting["n"]])).batch(
            setting["b"])
    return build


def test_product_covers_every_combination_each_round() -> None:
    calls: list[dict] = []
    res = sweep_builder(_builder(calls), {"n": [1, 2, 3], "b": [4, 8]}, steps=2, warmup=0,
                        repeats=2)
    combos = {(n, b) for n in (1, 2, 3) for b in (4, 8)}
    assert {(r.setting["n"], r.setting["b"]) for r in res.rows} == combos
    assert len(calls) == 12
    # rounds: all points once, then all again (drift spreads over every point)
    assert calls[:6] == calls[6:]
    assert all(len(r.results) == 2 for r in res.rows)
    for r in res.rows:
        assert r.results[0].elements == 2 * r.setting["b"]


def test_one_at_a_time_varies_one_key() -> None:
    pts = grid_points({"a": [1, 2, 3], "b": ["x", "y"]}, "one_at_a_time")
    assert pts == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}, {"a": 3, "b": "x"},
                   {"a": 1, "b": "y"}]
    with pytest.raises(ValueError, match="sweep mode"):
        grid_points({"a": [1]}, "random")
    with pytest.raises(ValueError, match="no values"):
        grid_points({"a": []})


def test_csv_columns_and_png(tmp_path) -> None:
    res = sweep_builder(_builder([]), {"n": [1, 2], "b": [4]}, steps=2, warmup=0, repeats=2)
    path = res.write_csv(tmp_path / "out" / "sweep.csv")
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["n", "b", *CSV_METRICS, "elements_per_s_min",
                             "elements_per_s_max", "repeats"]
    assert CSV_METRICS == ["elements_per_s", "batches_per_s", "mb_per_s", "p50_ms", "p90_ms",
                           "peak_rss_mb", "cpu_util"]
    assert [(r["n"], r["b"], r["repeats"]) for r in rows] == [("1", "4", "2"), ("2", "4", "2")]
    for r in rows:
        assert float(r["elements_per_s_min"]) <= float(r["elements_per_s"]) <= float(
            r["elements_per_s_max"])
    png = res.plot(tmp_path / "sweep.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _fake(rates: dict[str, list[float]]) -> SweepResult:
    base = measure(tf.data.Dataset.range(10).batch(2), warmup=0, steps=1)
    rows = [SweepRow({"k": k}, [dataclasses.replace(base, elements_per_s=v) for v in vals])
            for k, vals in rates.items()]
    return SweepResult(keys=["k"], rows=rows)


def test_recommendation_says_when_within_noise() -> None:
    overlap = _fake({"a": [100.0, 120.0], "b": [110.0, 130.0]})
    assert overlap.best().setting == {"k": "b"}
    assert "within noise" in overlap.recommendation()
    clear = _fake({"a": [100.0, 105.0], "b": [200.0, 210.0]})
    text = clear.recommendation()
    assert "k=b" in text.split(";")[0] and "do not overlap" in text
    assert "2.00x the runner-up k=a" in text  # medians 205 / 102.5

def test_parse_sweep_option() -> None:
    assert parse_sweep_option("pipeline.num_parallel_calls=1,2,autotune") == (
        "pipeline.num_parallel_calls", [1, 2, "autotune"])
    assert parse_sweep_option("a=0.5, 1") == ("a", [0.5, 1])
    with pytest.raises(ValueError):
        parse_sweep_option("novalues")
    with pytest.raises(ValueError):
        parse_sweep_option("a=")
