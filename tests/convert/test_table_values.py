"""Issue #26's table value rules (convert/_table_normalize.py), checked against pandas /
NumPy / TensorFlow as oracles: nulls inside lists (item 3), no silent narrowing
(item 4), timestamps as int64 epoch the `time` transform reads (item 5), and the same
DataFrame as CSV and as Parquet giving the same schema and bytes (item 6)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tfpipe.convert import conversion_summary, convert
from tfpipe.errors import InputError

from .conftest import read_split


def _parse_all(out: Path, features: dict) -> list[dict]:
    return read_split(out, "train", features)


def _by_id(records: list[dict]) -> dict[int, dict]:
    return {int(r["id"]): r for r in records}


# ----------------------------------------------------------------------------- item 3
@pytest.fixture(scope="module")
def list_nulls_table(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("listnulls") / "lists.parquet"
    pq.write_table(pa.table({
        "id": pa.array(range(6), pa.int64()),
        "names": pa.array([["a", None, "b"], [], None, [None], ["c"], ["d", "e"]],
                          pa.list_(pa.string())),
        "scores": pa.array([[1.5, 2.5], [None, 0.25], [3.0], [], None, [4.0, None, 5.0]],
                           pa.list_(pa.float64())),
        "vec": pa.array([[1.0, 2.0], [3.0, None], [5.0, 6.0], [7.0, 8.0], [9.0, 1.0],
                         [2.0, 3.0]], pa.list_(pa.float32(), 2)),
    }), path)
    return path


def _list_features():
    import tensorflow as tf

    return {"id": tf.io.FixedLenFeature([], tf.int64),
            "names": tf.io.VarLenFeature(tf.string), "scores": tf.io.VarLenFeature(tf.float32),
            "vec": tf.io.VarLenFeature(tf.float32)}


def test_null_inside_a_list_is_dropped_counted_and_named(list_nulls_table, tmp_path) -> None:
    # Before: the strings' null became the text "None", the floats' aborted convert
    # with "TypeError: float() argument must be ... not 'NoneType'".
    m = convert(list_nulls_table, tmp_path / "out", workers=1)
    df = pd.read_parquet(list_nulls_table)
    got = _by_id(_parse_all(tmp_path / "out", _list_features()))
    assert len(got) == len(df)
    for row in df.to_dict("records"):
        rec = got[row["id"]]
        for col in ("names", "scores", "vec"):
            want = [] if row[col] is None else [v for v in row[col] if not pd.isna(v)]
            if col == "names":
                assert [v.decode() for v in rec[col]] == want, (row["id"], col)
            else:
                assert rec[col].tolist() == [np.float32(v) for v in want], (row["id"], col)
    # counted per column, in the manifest and the summary
    dropped = {"names": 2, "scores": 2, "vec": 1}
    assert m.source["normalized"]["list_null_elements_dropped"] == dropped
    assert conversion_summary(m)["table"]["list_null_elements_dropped"] == dropped
    # a fixed-size list that lost an element is var-length (no invented value)
    assert m.schema["vec"].kind == "var"


def test_list_null_policies_drop_row_and_error(list_nulls_table, tmp_path) -> None:
    m = convert(list_nulls_table, tmp_path / "rows", workers=1, list_nulls="drop-row")
    got = _by_id(_parse_all(tmp_path / "rows", _list_features()))
    assert sorted(got) == [2, 4]  # rows 0, 1, 3, 5 hold a null element
    skipped = {s.input: s.reason for s in m.splits["train"].skipped}
    assert skipped == {
        "lists.parquet row 0": "null inside list column 'names' (list_nulls=drop-row)",
        "lists.parquet row 1": "null inside list column 'scores' (list_nulls=drop-row)",
        "lists.parquet row 3": "null inside list column 'names' (list_nulls=drop-row)",
        "lists.parquet row 5": "null inside list column 'scores' (list_nulls=drop-row)"}
    assert m.schema["vec"].kind == "fixed"  # rows kept: no list lost an element
    with pytest.raises(InputError, match=r"lists.parquet row 0, column 'names': a null inside "
                                         r"a list; choose --list-nulls drop-element"):
        convert(list_nulls_table, tmp_path / "err", workers=1, list_nulls="error")


# ----------------------------------------------------------------------------- item 4
def test_csv_integer_beyond_int64_is_an_error_naming_row_and_column(tmp_path) -> None:
    # Before: pyarrow read the column as float64 and every row became a float32
    # (1 -> 1.0, ..., 18446744073709551615 -> 1.8446744e19), silently.
    src = tmp_path / "ids.csv"
    src.write_text("id,user\n0,1\n1,2\n2,9223372036854775807\n3,18446744073709551615\n")
    with pytest.raises(InputError, match=r"ids.csv row 3, column 'user': 18446744073709551615 "
                                         r"is beyond int64"):
        convert(src, tmp_path / "out", workers=1)
    src.write_text("id,user\n0,1\n1,-9223372036854775808\n2,9223372036854775807\n")
    m = convert(src, tmp_path / "ok", workers=1)  # the int64 extremes stay exact
    import tensorflow as tf

    got = _by_id(_parse_all(tmp_path / "ok", {"id": tf.io.FixedLenFeature([], tf.int64),
                                              "user": tf.io.FixedLenFeature([], tf.int64)}))
    assert [int(got[i]["user"]) for i in range(3)] == [1, -(1 << 63), (1 << 63) - 1]
    assert m.schema["user"].dtype == "int64"


def test_uint64_beyond_int64_is_an_error_naming_row_and_column(tmp_path) -> None:
    src = tmp_path / "u.parquet"
    pq.write_table(pa.table({"id": [0, 1, 2], "h": pa.array([5, 1 << 63, 7], pa.uint64())}), src)
    with pytest.raises(InputError, match=r"u.parquet row 1, column 'h': 9223372036854775808 is "
                                         r"beyond int64"):
        convert(src, tmp_path / "out", workers=1)


@pytest.fixture(scope="module")
def floats_table(tmp_path_factory) -> Path:
    rng = np.random.default_rng(4)
    path = tmp_path_factory.mktemp("floats") / "f.parquet"
    epoch = 1.7e9 + rng.random(40) * 1e6  # epoch seconds with a fraction: float32 loses ~64 s
    pq.write_table(pa.table({"id": np.arange(40), "t": epoch,
                             "x": np.r_[16777217.0, 0.5, rng.normal(size=38)],
                             "exact": np.arange(40) * 0.25}), path)
    return path


def test_float64_narrowing_is_reported_per_column_with_its_largest_error(floats_table,
                                                                         tmp_path) -> None:
    # Before: float64 -> float32 silently (16777217.0 -> 16777216.0), nothing reported.
    m = convert(floats_table, tmp_path / "out", workers=1)
    df = pd.read_parquet(floats_table)
    narrowed = m.source["normalized"]["narrowed"]
    assert set(narrowed) == {"t", "x"}  # "exact" holds quarters: float32 stores them exactly
    for col in ("t", "x"):
        x = df[col].to_numpy()
        err = np.abs(x.astype(np.float32).astype(np.float64) - x)
        assert narrowed[col] == {"rows": int((err > 0).sum()), "max_abs_error": err.max(),
                                 "max_rel_error": (err[err > 0] / np.abs(x[err > 0])).max()}
    assert narrowed["x"]["max_abs_error"] >= 1.0  # 16777217 -> 16777216
    assert conversion_summary(m)["table"]["narrowed"] == narrowed


def test_keep_float64_stores_the_exact_bits_the_pipeline_reads_back(floats_table,
                                                                     tmp_path) -> None:
    import tensorflow as tf

    m = convert(floats_table, tmp_path / "out", workers=1, keep_float64="t,x")
    assert m.schema["t"].dtype == "int64" and m.schema["t"].encoding == "float64_bits"
    assert m.schema["exact"].dtype == "float32" and m.schema["exact"].encoding is None
    assert "normalized" not in m.source  # nothing narrowed: "exact" holds quarters
    assert Path(tmp_path / "out" / "manifest.json").read_text().count("float64_bits") == 2
    df = pd.read_parquet(floats_table)
    spec = {"id": tf.io.FixedLenFeature([], tf.int64), "t": tf.io.FixedLenFeature([], tf.int64),
            "x": tf.io.FixedLenFeature([], tf.int64)}
    got = _by_id(_parse_all(tmp_path / "out", spec))
    for row in df.to_dict("records"):
        back = tf.bitcast(tf.constant(got[row["id"]]["t"]), tf.float64).numpy()
        assert back == row["t"]  # bit-exact
        assert tf.bitcast(tf.constant(got[row["id"]]["x"]), tf.float64).numpy() == row["x"]
    # the tabular pipeline's parse: the exact float64, rounded once to float32
    from tfpipe.pipeline._tabular import float64_bits_as_float32

    bits = tf.constant([got[i]["x"] for i in range(40)], tf.int64)
    assert float64_bits_as_float32(bits).numpy().tolist() == \
        df["x"].to_numpy().astype(np.float32).tolist()


# ----------------------------------------------------------------------------- item 5
def test_timestamps_are_int64_epoch_seconds_the_time_transform_reads(tmp_path) -> None:
    # Before: ISO text (dtype string), and the time transform refused it
    # ("column 'ts' holds string; 'time' takes int64 or float32 columns").
    import tensorflow as tf

    from tfpipe.features import TransformSpec, build_transforms

    ts = pd.to_datetime(["2026-01-05 00:00:00", "2026-01-05 13:45:10.750",
                         "2026-01-10 23:59:59.999", None, "1969-12-31 23:30:00.5"],
                        format="ISO8601")
    df = pd.DataFrame({"id": range(5), "ts": ts, "day": [pd.Timestamp("2026-01-06").date()] * 5})
    src = tmp_path / "t.parquet"
    df.to_parquet(src)
    m = convert(src, tmp_path / "out", workers=1)
    assert m.schema["ts"].dtype == "int64" and m.schema["ts"].encoding == "timestamp_s"
    assert m.schema["day"].encoding == "timestamp_s"
    got = _by_id(_parse_all(tmp_path / "out", {
        "id": tf.io.FixedLenFeature([], tf.int64), "ts": tf.io.VarLenFeature(tf.int64),
        "day": tf.io.FixedLenFeature([], tf.int64)}))
    want = [None if pd.isna(t) else int(np.floor(t.value / 1e9)) for t in ts]  # floor, UTC
    assert [got[i]["ts"].tolist() for i in range(5)] == [[] if w is None else [w] for w in want]
    assert {int(got[i]["day"]) for i in range(5)} == {1767657600}  # 2026-01-06 00:00 UTC
    # sub-second parts floored: reported like float narrowing, in seconds
    n = m.source["normalized"]["narrowed"]["ts"]
    assert n["rows"] == 3 and n["max_abs_error"] == pytest.approx(0.999)
    # the time transform on the stored column: pandas' hour and weekday
    layer = build_transforms([TransformSpec("h", "time", ["ts"], {"part": "hour"}),
                              TransformSpec("d", "time", ["ts"], {"part": "day_of_week"})],
                             None, dtypes={"ts": m.schema["ts"].dtype}, nullable=["ts"])
    values = tf.constant([0 if w is None else w for w in want], tf.int64)
    out = layer({"ts": values, "ts__missing": tf.constant([w is None for w in want])})
    assert out["h"].numpy().tolist() == [24 if pd.isna(t) else t.hour for t in ts]
    assert out["d"].numpy().tolist() == [7 if pd.isna(t) else t.day_of_week for t in ts]
    # a finer unit keeps the milliseconds, recorded in the schema
    m = convert(src, tmp_path / "ms", workers=1, time_unit="ms")
    assert m.schema["ts"].encoding == "timestamp_ms"
    got = _by_id(_parse_all(tmp_path / "ms", {"id": tf.io.FixedLenFeature([], tf.int64),
                                              "ts": tf.io.VarLenFeature(tf.int64)}))
    assert got[1]["ts"].tolist() == [ts[1].value // 10**6]


# ----------------------------------------------------------------------------- item 6
def test_one_dataframe_as_csv_and_parquet_gives_the_same_schema_and_bytes(tmp_path) -> None:
    # Before: a null category was "" (fixed string) from the CSV and missing (var)
    # from the Parquet; a label with a null was float (refused as a label).
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({
        "id": np.arange(n),
        "cat": pd.Series(rng.choice(["red", "green", "blue", None], n), dtype=object),
        "price": rng.lognormal(3, 1, n).round(6),
        "clicks": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 9, n)),
                           dtype="Int64"),
        "seen": pd.to_datetime(1_767_000_000 + rng.integers(0, 10**6, n), unit="s"),
        "flag": rng.random(n) < 0.5,
        "label": np.where(rng.random(n) < 0.05, np.nan, rng.integers(0, 3, n)),
    })
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet", index=False)
    kw = dict(split="train=0.8,val=0.2", shard_size="8KB", seed=3, workers=1,
              label_column="label")
    a = convert(tmp_path / "t.csv", tmp_path / "csv", **kw)
    b = convert(tmp_path / "t.parquet", tmp_path / "pq", **kw)
    assert a.schema.to_json() == b.schema.to_json()
    schema = a.schema.to_json()
    assert schema["cat"]["kind"] == "var" and schema["label"] == {
        "dtype": "int64", "shape": [], "kind": "fixed"}
    assert a.class_names == b.class_names == ["0", "1", "2"]
    shards = sorted(p.name for p in (tmp_path / "csv").glob("*.tfrecord"))
    assert len(shards) > 2
    assert shards == sorted(p.name for p in (tmp_path / "pq").glob("*.tfrecord"))
    for name in shards:
        assert (tmp_path / "csv" / name).read_bytes() == (tmp_path / "pq" / name).read_bytes()
    assert [s.input.split(" ", 1)[1] for s in a.splits["train"].skipped] == \
        [s.input.split(" ", 1)[1] for s in b.splits["train"].skipped]
    assert sum(len(i.skipped) for i in a.splits.values()) == int(df["label"].isna().sum())
    # what the records hold, against pandas
    import tensorflow as tf

    spec = {"id": tf.io.FixedLenFeature([], tf.int64), "cat": tf.io.VarLenFeature(tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64),
            "seen": tf.io.FixedLenFeature([], tf.int64)}
    got = _by_id(read_split(tmp_path / "pq", "train", spec) + read_split(tmp_path / "pq", "val",
                                                                         spec))
    for row in df.dropna(subset=["label"]).to_dict("records"):
        rec = got[row["id"]]
        assert rec["cat"].tolist() == ([] if row["cat"] is None else [row["cat"].encode()])
        assert rec["label"] == int(row["label"])
        assert rec["seen"] == row["seen"].value // 10**9
    assert json.loads((tmp_path / "csv" / "manifest.json").read_text())["source"]["format"] == \
        "csv"


def test_cli_options_and_summary_lines(list_nulls_table, floats_table, tmp_path) -> None:
    from click.testing import CliRunner

    from tfpipe.cli.main import cli
    from tfpipe.records import Manifest

    runner = CliRunner()
    r = runner.invoke(cli, ["convert", str(list_nulls_table), str(tmp_path / "a"),
                            "--workers", "1", "--list-nulls", "drop-element"])
    assert r.exit_code == 0, r.output
    assert "names: 2 null list elements dropped (--list-nulls)" in r.output
    r = runner.invoke(cli, ["convert", str(floats_table), str(tmp_path / "b"), "--workers", "1",
                            "--keep-float64", "x", "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    assert set(summary["table"]["narrowed"]) == {"t"}  # x kept exactly
    assert Manifest.load(tmp_path / "b").schema["x"].encoding == "float64_bits"
    r = runner.invoke(cli, ["convert", str(floats_table), str(tmp_path / "c"), "--workers", "1"])
    assert r.exit_code == 0, r.output
    x = pd.read_parquet(floats_table)["x"].to_numpy()
    changed = int((x.astype(np.float32).astype(np.float64) != x).sum())
    assert f"x: {changed} values narrowed (largest error 1, relative" in r.output
    r = runner.invoke(cli, ["convert", str(list_nulls_table), str(tmp_path / "d"),
                            "--list-nulls", "error"])
    assert r.exit_code == 1 and "row 0, column 'names'" in r.output


def test_pipeline_time_transform_refuses_a_finer_stored_unit(tmp_path) -> None:
    """`time` reads epoch seconds (the default unit, tested above with the transform
    itself): a column stored in ms is refused at build, not read as wrong hours."""
    from tfpipe.config import load_config
    from tfpipe.errors import ConfigError
    from tfpipe.pipeline import build_pipeline

    ts = pd.Timestamp("2026-01-05") + pd.to_timedelta(np.arange(8) * 1234.5, unit="s")
    pd.DataFrame({"ts": ts, "label": np.arange(8) % 2}).to_parquet(tmp_path / "t.parquet")
    convert(tmp_path / "t.parquet", tmp_path / "ms", workers=1, time_unit="ms")
    config = load_config({"data": {"path": str(tmp_path / "ms")}, "features": {
        "label": "label", "columns": {"hour": {"transform": "time", "column": "ts"}}}})
    with pytest.raises(ConfigError, match=r"features.hour: transform 'time' reads epoch "
                                          r"seconds, but column 'ts' holds timestamp_ms"):
        build_pipeline(config)


def test_a_url_parquet_is_read_by_ranges_not_downloaded_whole(tmp_path, monkeypatch) -> None:
    """A table on a tf.io.gfile URL (ram://): reading one row reads its row group (and
    the footer), a small part of the file."""
    import uuid

    import tensorflow as tf

    from tfpipe.convert import table as table_mod

    local = tmp_path / "big.parquet"
    rng = np.random.default_rng(1)
    pq.write_table(pa.table({"id": np.arange(20_000), "x": rng.random(20_000),
                             "s": [f"word{i}" * 3 for i in range(20_000)]}), local,
                   row_group_size=1000, compression="none")
    url = f"ram://tfpipe-{uuid.uuid4().hex}/big.parquet"
    tf.io.gfile.makedirs(url.rsplit("/", 1)[0])
    tf.io.gfile.copy(str(local), url)
    source = table_mod.TableSource(url, "parquet")
    read: list[int] = []
    plain_read, plain_into = table_mod._GFileReader.read, table_mod._GFileReader.readinto

    def counted_read(self, size=-1):
        data = plain_read(self, size)
        read.append(len(data))
        return data

    def counted_into(self, buffer):
        n = plain_into(self, buffer)
        read.append(n)
        return n

    monkeypatch.setattr(table_mod._GFileReader, "read", counted_read)
    monkeypatch.setattr(table_mod._GFileReader, "readinto", counted_into)
    (item,) = source.read_rows(np.array([15_500]))
    assert item.payload[1]["id"] == 15_500
    assert 0 < sum(read) < local.stat().st_size / 5
    tf.io.gfile.rmtree(url.rsplit("/", 1)[0])


def test_pipeline_reads_a_kept_float64_column_as_the_narrowed_one(floats_table,
                                                                 tmp_path) -> None:
    """The tabular pipeline on a --keep-float64 column (int64 bits) gives the transforms
    the same float32 values as the default conversion (rounded once): same batches."""
    from tfpipe.config import load_config
    from tfpipe.pipeline import build_pipeline

    df = pd.read_parquet(floats_table).assign(label=lambda d: d["id"] % 2)
    df.to_parquet(tmp_path / "t.parquet")
    features = {"label": "label", "columns": {"x": {"transform": "normalize"},
                                              "t": {"transform": "passthrough"}}}
    batches = []
    for name, keep in (("plain", None), ("kept", "x,t")):
        convert(tmp_path / "t.parquet", tmp_path / name, workers=1, stats=True,
                keep_float64=keep)
        config = load_config({"seed": 1, "data": {"path": str(tmp_path / name)},
                              "features": features,
                              "pipeline": {"batch_size": 40, "shuffle_buffer": 1}})
        feats, label = next(iter(build_pipeline(config)))
        batches.append({k: v.numpy().tolist() for k, v in feats.items()})
    assert batches[0] == batches[1]
    assert sorted(batches[0]["t"]) == sorted(df["t"].to_numpy().astype(np.float32).tolist())
