"""`tfpipe bench` and `tfpipe check` through click's CliRunner: exit codes and outputs."""

from __future__ import annotations

import csv
import json

import pytest
import tensorflow as tf
from click.testing import CliRunner

from tfpipe.cli.bench import command as bench
from tfpipe.cli.check import command as check


def _sets(overrides: list[str]) -> list[str]:
    return [a for o in overrides for a in ("--set", o)]


def test_bench_json_with_every_analysis(tiny_overrides, tmp_path) -> None:
    import keras

    model = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Conv2D(2, 3),
                              keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(4)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.save(tmp_path / "m.keras")
    res = CliRunner().invoke(bench, [
        "imagenet", *_sets(tiny_overrides), "--steps", "2", "--warmup", "1", "--stages",
        "--model", str(tmp_path / "m.keras"), "--baseline", "naive",
        "--tensorboard", str(tmp_path / "tb"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["result"]["steps"] == 2 and out["result"]["elements"] == 16
    from tfpipe.pipeline import STAGES

    stages = out["stages"]["stages"]
    assert [s["name"] for s in stages] == list(STAGES)
    # every prefix from `batch` on yields batches: 2 steps of 8 rows each
    first = list(STAGES).index("batch")
    assert [s["batched"] for s in stages] == [i >= first for i in range(len(STAGES))]
    assert [s["elements"] for s in stages] == [16] * len(STAGES)
    # end to end is build_pipeline itself, measured apart from the stages
    assert out["stages"]["end_to_end"]["elements"] == 16
    assert "end to end (build_pipeline)" in out["stages"]["summary"]
    assert out["input_bound"]["step_kind"] == "train_on_batch"
    assert 0.0 <= out["input_bound"]["input_wait_fraction"] <= 1.0
    lo, hi = out["baseline"]["speedup_range"]
    assert 0 < lo <= hi and out["baseline"]["result"]["elements"] == 16
    assert out["tensorboard"]["traces"][0].endswith(".xplane.pb")
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_bench_stages_names_the_slow_stage(tiny_overrides, monkeypatch) -> None:
    """The CLI reports the stage that is slow: build_stages swapped for prefixes
    where `decode` holds an expensive graph op."""
    import tfpipe.pipeline as P

    def heavy(x):
        a = tf.random.stateless_uniform([300, 300], tf.stack([tf.cast(x, tf.int64), 0]))
        return tf.reduce_sum(tf.linalg.matmul(a, a)) * 0 + tf.cast(x, tf.float32)

    def fake_stages(config, split="train", epoch=0, **kw):
        out, ds = [], tf.data.Dataset.range(100_000)
        for name in P.STAGES:
            if name == "batch":
                ds = ds.batch(8)
            elif name != "read":
                ds = ds.map(heavy if name == "decode" else (lambda x: x + 1))
            out.append((name, ds))
        return out

    monkeypatch.setattr(P, "build_stages", fake_stages)
    # best of 5 rounds per prefix (--repeats): robust to a busy machine
    res = CliRunner().invoke(bench, ["imagenet", *_sets(tiny_overrides), "--steps", "10",
                                     "--warmup", "1", "--repeats", "5", "--stages", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)["stages"]
    assert out["slowest"] == "decode", out["stages"]
    assert out["summary"].startswith("slowest stage: decode")


def test_bench_sweep_writes_csv_and_plot(tiny_overrides, tmp_path) -> None:
    csv_path, png = tmp_path / "s.csv", tmp_path / "s.png"
    res = CliRunner().invoke(bench, ["imagenet", *_sets(tiny_overrides), "--steps", "1",
                                     "--warmup", "0", "--repeats", "1",
                                     "--sweep", "pipeline.num_parallel_calls=1,autotune",
                                     "--csv", str(csv_path), "--plot", str(png)])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(csv_path.open()))
    assert [r["pipeline.num_parallel_calls"] for r in rows] == ["1", "autotune"]
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "best:" in res.output


def test_bench_usage_and_config_errors(tiny_overrides) -> None:
    res = CliRunner().invoke(bench, ["imagenet", *_sets(tiny_overrides), "--plot", "x.png"])
    assert res.exit_code == 2 and "--plot needs --sweep" in res.output
    res = CliRunner().invoke(bench, ["imagenet", *_sets(tiny_overrides),
                                     "--set", "pipeline.batch_size=0"])
    assert res.exit_code == 1 and "pipeline.batch_size" in res.output


def test_check_exit_codes(tiny_overrides, monkeypatch) -> None:
    from tfpipe.bench import check as C

    def good(config, split="train", epoch=0, worker=None, **kw):
        return tf.data.Dataset.range(24).map(
            lambda i: {"image": tf.zeros([32, 32, 3]), "label": i % 4}).batch(8)

    def stateful(config, **kw):
        return good(config).map(lambda b: {**b, "image": tf.random.uniform([8, 32, 32, 3])})

    args = ["imagenet", *_sets(tiny_overrides), "--only", "reproducible", "--only", "dtypes"]
    monkeypatch.setattr(C, "default_builder", good)
    res = CliRunner().invoke(check, args + ["--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["passed"] is True
    monkeypatch.setattr(C, "default_builder", stateful)
    res = CliRunner().invoke(check, args)
    assert res.exit_code == 1
    assert "FAIL" in res.output and "stateful random ops" in res.output
    from tfpipe.cli.main import cli  # its error handler: `error: ...`, exit 2

    res = CliRunner().invoke(cli, ["check", "imagenet", *_sets(tiny_overrides), "--only",
                                   "bogus"])
    assert res.exit_code == 2 and "unknown checks" in res.output
