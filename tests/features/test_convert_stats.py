"""`convert --stats`: statistics of exactly the train shards' rows, locally and on Beam."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pandas as pd
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tfpipe.cli.main import cli
from tfpipe.convert import convert
from tfpipe.errors import ConfigError
from tfpipe.features import ctr_table, read_statistics
from tfpipe.records import Manifest, decode_example, iter_frames

needs_beam = pytest.mark.skipif(importlib.util.find_spec("apache_beam") is None,
                                reason="apache-beam is not installed (tfpipe[beam])")
ROWS = 1_500


@pytest.fixture(scope="module")
def table_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("ctr") / "ctr.parquet"
    pq.write_table(ctr_table(ROWS, seed=2), path, row_group_size=400)
    return path


@pytest.fixture(scope="module")
def local_out(table_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "ds"
    convert(table_path, out, split="train=0.7,val=0.3", stats=True, stats_top_k=30,
            stats_quantiles=10, workers=1, seed=4)
    return out


def _train_records(out) -> pd.DataFrame:
    """The oracle: the values in the train shards, decoded with the protobuf classes."""
    manifest = Manifest.load(out)
    rows = []
    for entry in manifest.splits["train"].shards:
        for _, _, data in iter_frames(out / entry.path):
            ex = decode_example(data)
            rows.append({k: (v[0] if v else None) for k, v in ex.items()})
    return pd.DataFrame(rows)


@pytest.mark.slow  # alone ~12 s: TensorFlow's start-up (the protobuf decoder of the oracle)
def test_local_stats_are_the_train_shards_rows(local_out):
    stats = read_statistics(local_out)
    manifest = Manifest.load(local_out)
    assert manifest.settings["statistics"] == {"file": "statistics.json",
                                               "sha256": stats.sha256, "split": "train"}
    df = _train_records(local_out)
    assert stats.num_rows == len(df) == manifest.splits["train"].num_records < ROWS
    for name in ("price", "user_age", "timestamp"):
        x = df[name].dropna().to_numpy(np.float64)
        num = stats.column(name).numeric
        assert (num.count, num.min, num.max) == (x.size, x.min(), x.max())
        assert num.missing == df[name].isna().sum()
        assert num.mean == pytest.approx(x.mean(), rel=1e-12)
        assert num.quantiles == tuple(np.quantile(x, np.arange(1, 10) / 10,
                                                  method="inverted_cdf"))
    for name in ("category", "device", "item_id"):
        cat = stats.column(name).categorical
        vc = df[name].dropna().map(lambda v: v.decode() if isinstance(v, bytes) else v)
        counts = sorted(vc.value_counts().items(), key=lambda kv: (-kv[1], kv[0]))
        assert list(cat.vocabulary) == [(k, int(v)) for k, v in counts[:30]]
        assert cat.oov_count == sum(v for _, v in counts[30:])


@needs_beam
def test_beam_direct_runner_gives_the_same_statistics(table_path, local_out, tmp_path,
                                                      monkeypatch):
    # Several chunks, so the combiner really merges partial accumulators.
    monkeypatch.setattr("tfpipe.convert._beam_stats.CHUNK_ROWS", 150)
    out = tmp_path / "beam"
    convert(table_path, out, split="train=0.7,val=0.3", stats=True, stats_top_k=30,
            stats_quantiles=10, seed=4, runner="direct")
    local, beam = read_statistics(local_out), read_statistics(out)
    assert Manifest.load(out).settings["statistics"]["sha256"] == beam.sha256
    assert not (out / ".tfpipe-stats").exists()
    assert (beam.num_rows, beam.split, beam.source, beam.settings) == \
        (local.num_rows, local.split, local.source, local.settings)
    assert list(beam.columns) == list(local.columns)
    for name, col in local.columns.items():
        other = beam.column(name)
        assert other.categorical == col.categorical, name  # exact counts: equal
        if col.numeric is not None:
            a, b = col.numeric, other.numeric
            # Below the sketch size quantiles are exact on both; moments to rounding.
            assert (a.count, a.missing, a.min, a.max, a.quantiles, a.histogram) == \
                (b.count, b.missing, b.min, b.max, b.quantiles, b.histogram), name
            assert b.mean == pytest.approx(a.mean, rel=1e-12)
            assert b.std == pytest.approx(a.std, rel=1e-9)


def test_csv_cli_and_errors(table_path, tmp_path):
    csv = tmp_path / "t.csv"
    pacsv.write_csv(pq.read_table(table_path).slice(0, 300), csv)
    r = CliRunner().invoke(cli, ["convert", str(csv), str(tmp_path / "o"), "--stats",
                                 "--stats-top-k", "5", "--json"])
    assert r.exit_code == 0, r.output
    stats = read_statistics(tmp_path / "o")
    assert stats.num_rows == 300 and stats.source == "t.csv"
    assert len(stats.column("item_id").categorical.vocabulary) == 5
    assert json.loads(r.output)["splits"]["train"]["records"] == 300
    with pytest.raises(ConfigError, match=r"stats: .*'train' split, but --split has only a, b"):
        convert(csv, tmp_path / "o2", split="a=0.5,b=0.5", stats=True)
    (tmp_path / "imgs" / "c").mkdir(parents=True)
    with pytest.raises(ConfigError, match="stats: statistics are computed for csv and parquet"):
        convert(tmp_path / "imgs", tmp_path / "o3", stats=True)
