"""Statistics model: JSON round trip, hash and version checks, column lookup."""

from __future__ import annotations

import json
import math

import pytest

from tfpipe.errors import ConfigError, InputError
from tfpipe.features import (STATISTICS_FILE, CategoricalStats, ColumnStats, NumericStats,
                             Statistics, read_statistics, write_statistics)


def _stats() -> Statistics:
    num = NumericStats(4, 1, 1.0, 9.0, 4.25, 3.0, (2.0, 5.0), (1, 1, 2), 0)
    empty = NumericStats(0, 3, math.nan, math.nan, math.nan, math.nan, (), (0,), 0)
    cat = CategoricalStats(4, 1, 3, True, (("b", 2), ("a", 1)), 1)
    ids = CategoricalStats(4, 0, 2, True, ((7, 3), (1, 1)), 0)
    cols = {"price": ColumnStats("price", "float32", num, None),
            "empty": ColumnStats("empty", "float32", empty, None),
            "cat": ColumnStats("cat", "string", None, cat),
            "id": ColumnStats("id", "int64", num, ids)}
    return Statistics(cols, 5, "train", "t.parquet", {"top_k": 2})


def test_round_trip_and_hash(tmp_path):
    stats = _stats()
    path = write_statistics(stats, tmp_path)
    assert path == tmp_path / STATISTICS_FILE
    back = read_statistics(tmp_path)
    assert back.sha256 == stats.sha256
    assert back.column("cat").categorical.vocabulary == (("b", 2), ("a", 1))
    assert back.column("id").categorical.vocabulary == ((7, 3), (1, 1))
    assert math.isnan(back.column("empty").numeric.mean)
    assert back.column("price") == stats.column("price")
    obj = json.loads(path.read_text())
    assert obj["sha256"] == stats.sha256 and obj["version"] == 1


def test_edited_file_is_refused_naming_it(tmp_path):
    path = write_statistics(_stats(), tmp_path)
    obj = json.loads(path.read_text())
    obj["columns"][0]["numeric"]["mean"] = 5.0
    path.write_text(json.dumps(obj))
    with pytest.raises(InputError, match=r"statistics\.json: sha256 mismatch"):
        read_statistics(tmp_path)


def test_version_and_missing_file(tmp_path):
    path = write_statistics(_stats(), tmp_path)
    obj = json.loads(path.read_text())
    obj["version"] = 2
    path.write_text(json.dumps(obj))
    with pytest.raises(InputError, match=r"statistics\.json: statistics version 2 .*newer"):
        read_statistics(tmp_path)
    with pytest.raises(InputError, match=r"no statistics; convert"):
        read_statistics(tmp_path / "nowhere")
    path.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        read_statistics(path)


def test_unknown_column_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"no column 'nope'; columns are price, empty, cat, id"):
        _stats().column("nope")
