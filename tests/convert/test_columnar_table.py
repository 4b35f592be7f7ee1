"""Table conversion encodes column by column (tfpipe.records.columnar) with the same
bytes as the row-by-row path: every file of the output (the manifest holds the plan
digest, also hashed from Arrow now), several batches per shard, both the local
runner's row indices and the Beam runner's payload Items."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tfpipe.convert import convert, table as table_mod
from tfpipe.convert._plan import ShardPlan
from tfpipe.records import ColumnarEncoder, columnar, encode_example, encode_frame

from .test_table_streaming import csv_table, rich_table


def _files(out: Path) -> dict[str, str]:
    return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def rich_parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The golden table as it is: nulls inside lists, dates, timestamps, a dictionary,
    # a fixed-size list: every column normalized (`_table_normalize`) takes the C path.
    path = tmp_path_factory.mktemp("columnar") / "rich.parquet"
    pq.write_table(rich_table(900, seed=4), path, row_group_size=200)
    return path


@pytest.fixture(scope="module")
def rich_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A CSV: empty strings are nulls, dates and timestamps as text read by pyarrow.
    import pyarrow.csv as pacsv

    path = tmp_path_factory.mktemp("columnar") / "rich.csv"
    pacsv.write_csv(csv_table(900, seed=4), path)
    return path


@pytest.mark.parametrize("table,policy", [
    ("parquet", {}),  # list nulls dropped, price float32, timestamps int64 epoch seconds
    ("parquet", {"list_nulls": "drop-row", "keep_float64": ["price"], "time_unit": "ms"}),
    ("csv", {"keep_float64": ["price"]}),
])
def test_columnar_conversion_equals_row_by_row(rich_parquet, rich_csv, tmp_path, monkeypatch,
                                               table, policy) -> None:
    src = rich_parquet if table == "parquet" else rich_csv
    if columnar.library() is None:
        pytest.skip(f"no C encoder here: {columnar.reason()}")
    calls = []
    frames = ColumnarEncoder.frames

    def spy(self, batch):
        calls.append((self.native, batch.num_rows))
        return frames(self, batch)

    monkeypatch.setattr(ColumnarEncoder, "frames", spy)
    digested = []
    json_rows = columnar.json_rows
    monkeypatch.setattr(columnar, "json_rows",
                        lambda batch, rows: digested.append(len(rows)) or json_rows(batch, rows))
    monkeypatch.setattr(table_mod, "BATCH_ROWS", 97)  # several batches per shard
    monkeypatch.setattr(table_mod, "_JSON_ROWS", 13)  # several JSON buffers per batch
    kwargs = dict(split="train=0.7,val=0.3", shard_size="80KB", seed=5, workers=1,
                  stats=True, stats_quantiles=5, **policy)
    fast = convert(src, tmp_path / "fast", **kwargs)
    # drop-row: the rows holding a null inside "names" are bad rows, never encoded
    holed = sum(any((i + j) % 5 == 0 for j in range(i % 3)) for i in range(900))
    skipped = sum(len(info.skipped) for info in fast.splits.values())
    assert skipped == (holed if "list_nulls" in policy else 0) and holed > 100
    rows = 900 - skipped
    assert sum(n for _, n in calls) == sum(fast.num_records.values()) == rows
    shards = sum(len(info.shards) for info in fast.splits.values())
    assert all(native for native, _ in calls) and max(n for _, n in calls) <= 97
    assert len(calls) > shards > 2
    assert sum(digested) == rows  # the plan digest, from Arrow in C too
    # The row-by-row path: encode_example per row, canonical_json per row.
    monkeypatch.setattr(table_mod.TableSource, "encoded_frames", lambda *a: None)
    monkeypatch.delattr(table_mod.TableRows, "digest_into")
    convert(src, tmp_path / "rows", **kwargs)
    assert _files(tmp_path / "fast") == _files(tmp_path / "rows")


def test_payload_items_encode_like_encode_example(rich_parquet) -> None:
    """The Beam runner's shards carry Items with payloads: the same frames."""
    source = table_mod.TableSource(rich_parquet, "parquet")
    schema = source.schema()
    items = tuple(source.read_rows(list(range(0, 900, 7))))
    got = b"".join(bytes(buf) for buf, _ in
                   source.encoded_frames(ShardPlan("train", 0, 1, items), schema))
    want = b"".join(encode_frame(encode_example(source.encode_values(it)[0], schema))
                    for it in items)
    assert got == want


@pytest.mark.parametrize("buckets", [1, 8, 1 << 16])
def test_streaming_plan_equals_the_per_item_plan(tmp_path, monkeypatch, buckets) -> None:
    """The table plan keeps no per-row arrays (histogram + per-shard files); its shards
    hold exactly the rows, in exactly the order, of `_plan.plan_shards` over Items,
    and read them from one partitioning pass over the table. Few buckets put many
    cuts inside one bucket (the exactly ranked path)."""
    from tfpipe.convert._plan import plan_shards

    t = rich_table(700, seed=9).select(["id", "word", "label"])
    labels = pa.array([None if i % 97 == 5 else v for i, v in
                       enumerate(t.column("label").to_pylist())], pa.int64())
    t = t.set_column(2, "label", labels)
    path = tmp_path / "t.parquet"
    pq.write_table(t, path, row_group_size=150)
    source = table_mod.TableSource(path, "parquet", label_column="label")
    enumeration = source.enumerate()
    assert len(enumeration.bad) == 8 and len(enumeration.items) == 692
    monkeypatch.setattr(table_mod, "_BUCKETS", buckets)
    ratios = {"train": 0.6, "val": 0.3, "test": 0.1}
    got = plan_shards(enumeration.items, ratios, 3, 2000)
    want = plan_shards(list(enumeration.items), ratios, 3, 2000)  # plain Items: _plan's path
    assert len(got.shards) == len(want.shards) > 20
    for g, w in zip(got.shards, want.shards):
        assert (g.split, g.index, g.count, len(g.items)) == (w.split, w.index, w.count,
                                                             len(w.items))
        assert [f"row:{i}" for i in g.items.rows.tolist()] == [it.key for it in w.items]
        assert g.items.sizes.tolist() == [it.size for it in w.items]
        assert g.digest() == w.digest()
        assert list(g.items) == list(w.items)  # read from the shard's own copy of its rows


def test_statistics_on_the_partitioning_pass_equal_a_pass_of_their_own(tmp_path,
                                                                        monkeypatch) -> None:
    """convert --stats computes the statistics on the batches the plan's one pass over
    the table reads (`StreamedStatistics`): statistics.json is byte-identical to
    `local_statistics`' own pass, over several batches, with bad rows left out."""
    from tfpipe.convert import _table_stats
    from tfpipe.convert._plan import plan_shards
    from tfpipe.features import read_statistics

    t = rich_table(700, seed=9).select(["id", "count", "price", "word", "label"])
    labels = pa.array([None if i % 97 == 5 else v for i, v in
                       enumerate(t.column("label").to_pylist())], pa.int64())
    path = tmp_path / "t.parquet"
    pq.write_table(t.set_column(4, "label", labels), path, row_group_size=150)
    monkeypatch.setattr(table_mod, "BATCH_ROWS", 64)
    own_pass = _table_stats.local_statistics
    fallbacks: list[int] = []
    monkeypatch.setattr(_table_stats, "local_statistics",
                        lambda *a, **k: fallbacks.append(1) or own_pass(*a, **k))
    ratios = {"train": 0.7, "val": 0.3}
    convert(path, tmp_path / "out", split=ratios, stats=True, workers=1, seed=5,
            label_column="label", stats_top_k=20, stats_quantiles=10)
    assert not fallbacks  # the statistics came from the partitioning pass
    source = table_mod.TableSource(path, "parquet", label_column="label")
    plan = plan_shards(source.enumerate().items, ratios, 5, 256 << 20)
    want = own_pass(source, plan, top_k=20, num_quantiles=10)
    got = read_statistics(tmp_path / "out")
    assert got.num_rows == sum(len(s.items) for s in plan.shards if s.split == "train") < 700
    assert got.sha256 == want.sha256
