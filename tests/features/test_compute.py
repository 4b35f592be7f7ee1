"""compute_statistics against pandas / NumPy oracles: exact fields exactly, sketches within bounds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from tfpipe.errors import ConfigError
from tfpipe.features import TableAccumulator, compute_statistics, ctr_table


@pytest.fixture(scope="module")
def small() -> pa.Table:
    return ctr_table(3_000, seed=5)


def _vocab_oracle(series: pd.Series) -> list[tuple]:
    vc = series.dropna().value_counts()
    items = [(k.item() if hasattr(k, "item") else k, int(v)) for k, v in vc.items()]
    return sorted(items, key=lambda kv: (-kv[1], kv[0]))


def _bins_oracle(x: np.ndarray, q: tuple) -> list[int]:
    edges = [-np.inf, *q, np.inf]
    return [int(((x >= lo) & (x < hi)).sum()) if i else int((x < hi).sum())
            for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:]))]


def test_small_table_is_exact_against_pandas_and_numpy(small):
    stats = compute_statistics(small, top_k=20, num_quantiles=10, chunk_rows=700)
    df = small.to_pandas()
    assert stats.num_rows == len(df) and stats.split == "train"
    for name in ("user_id", "timestamp", "price", "user_age", "position"):
        col = stats.column(name)
        num = col.numeric
        x = df[name].dropna().to_numpy(np.float64)
        if name == "price":  # the record holds float32
            assert col.dtype == "float32"
            x = x.astype(np.float32).astype(np.float64)
        assert num.count == x.size and num.missing == int(df[name].isna().sum())
        assert num.min == x.min() and num.max == x.max()
        assert num.mean == pytest.approx(x.mean(), rel=1e-12)
        assert num.std == pytest.approx(x.std(ddof=0), rel=1e-9)
        expected_q = np.quantile(x, np.arange(1, 10) / 10, method="inverted_cdf")
        assert num.quantiles == tuple(float(v) for v in expected_q), name
        assert list(num.histogram) == _bins_oracle(x, num.quantiles)
        assert num.quantile_rank_error == 0
    for name in ("user_id", "category", "device", "user_age", "label"):
        cat = stats.column(name).categorical
        oracle = _vocab_oracle(df[name])
        assert cat.num_unique == df[name].nunique() and cat.num_unique_exact
        assert list(cat.vocabulary) == oracle[:20], name
        assert cat.oov_count == sum(f for _, f in oracle[20:])
        assert cat.count == df[name].notna().sum() and cat.frequency_error == 0
    assert stats.column("category").numeric is None
    assert stats.column("price").categorical is None
    assert stats.column("device").categorical.missing == int(df.device.isna().sum()) > 0


def test_chunking_merging_and_file_formats_agree(small, tmp_path):
    one = compute_statistics(small, top_k=50, num_quantiles=20, chunk_rows=10_000)
    pq.write_table(small, tmp_path / "t.parquet", row_group_size=400)
    pacsv.write_csv(small, tmp_path / "t.csv")
    # The streaming CSV reader reads what the converter's read_csv reads (an empty
    # string stays "", not null).
    csv_whole = compute_statistics(pacsv.read_csv(tmp_path / "t.csv"), top_k=50,
                                   num_quantiles=20)
    for base, other in ((one, compute_statistics(tmp_path / "t.parquet", top_k=50,
                                                 num_quantiles=20, chunk_rows=333)),
                        (csv_whole, compute_statistics(tmp_path / "t.csv", top_k=50,
                                                       num_quantiles=20, chunk_rows=1_000))):
        assert other.column("device").categorical == base.column("device").categorical
        for name, col in base.columns.items():
            o = other.column(name)
            assert o.categorical == col.categorical, name
            if col.numeric is not None:
                assert o.numeric.quantiles == col.numeric.quantiles
                assert o.numeric.histogram == col.numeric.histogram
                assert o.numeric.mean == pytest.approx(col.numeric.mean, rel=1e-12)
    # Two partial accumulators merged = one pass.
    a = TableAccumulator.for_schema(small.schema)
    b = TableAccumulator.for_schema(small.schema)
    a.add_batch(small.slice(0, 1234).combine_chunks().to_batches()[0])
    b.add_batch(small.slice(1234).combine_chunks().to_batches()[0])
    merged = a.merge(b).result(top_k=50, num_quantiles=20, split="train", source="t",
                               settings={})
    assert merged.column("item_id").categorical == one.column("item_id").categorical
    assert merged.column("price").numeric.quantiles == one.column("price").numeric.quantiles


@pytest.fixture(scope="module")
def big() -> pa.Table:
    return ctr_table(200_000, seed=9)


def test_quantile_sketch_within_its_rank_bound(big):
    stats = compute_statistics(big, columns=["price", "timestamp", "user_id"], top_k=10,
                               num_quantiles=50, chunk_rows=30_000, sketch_k=256)
    df = big.to_pandas()
    for name in ("price", "timestamp", "user_id"):
        num = stats.column(name).numeric
        x = np.sort(df[name].to_numpy(np.float64).astype(
            np.float32 if name == "price" else np.float64).astype(np.float64))
        n = x.size
        bound = num.quantile_rank_error
        assert 0 < bound < 0.02 * n  # compacted, yet the guarantee is tight
        q = np.asarray(num.quantiles)
        lo = np.searchsorted(x, q, "left")  # values < q
        hi = np.searchsorted(x, q, "right")  # values <= q
        target = n * np.arange(1, 50) / 50
        # Some value equal to q has a rank within the bound of the target.
        assert np.all(lo <= target + bound) and np.all(hi >= target - bound), name
        exact_bins = np.array(_bins_oracle(x, num.quantiles))
        assert np.abs(np.array(num.histogram) - exact_bins).max() <= 2 * bound
        assert sum(num.histogram) == n
        assert num.mean == pytest.approx(x.mean(), rel=1e-12)  # moments stay exact


def test_heavy_hitters_past_the_exact_cap(big):
    stats = compute_statistics(big, columns=["user_id"], top_k=20, max_exact_unique=200,
                               chunk_rows=25_000)
    cat = stats.column("user_id").categorical
    true = big.column("user_id").to_pandas().value_counts()
    assert not cat.num_unique_exact and cat.num_unique <= true.size
    assert 0 < cat.frequency_error <= len(big) / 201
    for value, freq in cat.vocabulary:
        assert freq <= true[value] <= freq + cat.frequency_error
    # Every value more frequent than the error bound plus the 20th count is listed.
    listed = {v for v, _ in cat.vocabulary}
    floor = cat.vocabulary[-1][1] + cat.frequency_error
    assert set(true[true > floor].index) <= listed
    assert true.index[0] == cat.vocabulary[0][0]


def test_types_nan_select_and_errors():
    table = pa.table({
        "f": pa.array([1.5, float("nan"), None, 4.0, 2.0]),
        "b": pa.array([True, False, True, None, True]),
        "d": pa.array(["x", "y", "x", "x", None]).dictionary_encode(),
        "lst": pa.array([[1], [2, 3], [], None, [4]]),
        "s": pa.array([b"\xff", b"a", b"a", b"a", b"b"], pa.binary()),
    })
    stats = compute_statistics(table, top_k=5, num_quantiles=2)
    f = stats.column("f").numeric
    assert (f.count, f.missing, f.min, f.max, f.mean) == (3, 2, 1.5, 4.0, 2.5)
    b = stats.column("b")
    assert b.dtype == "int64" and b.categorical.vocabulary == ((1, 3), (0, 1))
    assert stats.column("d").categorical.vocabulary == (("x", 3), ("y", 1))
    assert stats.column("s").categorical.vocabulary[0] == ("a", 3)
    assert "lst" not in stats.columns and stats.settings["skipped_columns"] == {
        "lst": "list<item: int64>"}
    sel = compute_statistics(table, columns=["f"], select=lambda a, b: np.arange(a, b) >= 3)
    assert sel.num_rows == 2 and sel.column("f").numeric.mean == 3.0
    with pytest.raises(ConfigError, match=r"columns: 'nope' not in the table; columns are f, b"):
        compute_statistics(table, columns=["nope"])
    with pytest.raises(ConfigError, match="num_quantiles must be an int >= 2, got 1"):
        compute_statistics(table, num_quantiles=1)
    empty = compute_statistics(table.slice(0, 0), columns=["f"])
    assert empty.column("f").numeric.count == 0 and math.isnan(empty.column("f").numeric.mean)


def test_merge_order_changes_sketches_only_within_their_bounds(big):
    """What the Beam combiner does: partial accumulators merged in any grouping."""
    price = big.select(["price", "category"])
    parts = [price.slice(i * 23_000, 23_000).combine_chunks().to_batches()[0]
             for i in range(9)]
    accs = []
    for batch in parts:
        acc = TableAccumulator.for_schema(price.schema, sketch_k=128)
        acc.add_batch(batch)
        accs.append(acc)
    order = np.random.default_rng(0).permutation(len(accs))
    left = accs[order[0]]
    for i in order[1:5]:
        left.merge(accs[i])
    right = accs[order[5]]
    for i in order[6:]:
        right.merge(accs[i])
    merged = right.merge(left).result(top_k=12, num_quantiles=20, split="train", source="t",
                                      settings={})
    one = compute_statistics(price, top_k=12, num_quantiles=20, sketch_k=128)
    assert merged.column("category").categorical == one.column("category").categorical
    a, b = one.column("price").numeric, merged.column("price").numeric
    assert (a.count, a.min, a.max) == (b.count, b.min, b.max)
    assert b.mean == pytest.approx(a.mean, rel=1e-12) and b.std == pytest.approx(a.std, rel=1e-9)
    x = np.sort(big.column("price").to_numpy().astype(np.float32).astype(np.float64))
    target = x.size * np.arange(1, 20) / 20
    for num in (a, b):
        q = np.asarray(num.quantiles)
        assert np.all(np.searchsorted(x, q, "left") <= target + num.quantile_rank_error)
        assert np.all(np.searchsorted(x, q, "right") >= target - num.quantile_rank_error)
    # So the two agree within the sum of their bounds, measured in ranks (a value's
    # ranks are an interval [values below, values at or below]: prices repeat).
    qa, qb = np.asarray(a.quantiles), np.asarray(b.quantiles)
    lo_a, hi_a = np.searchsorted(x, qa, "left"), np.searchsorted(x, qa, "right")
    lo_b, hi_b = np.searchsorted(x, qb, "left"), np.searchsorted(x, qb, "right")
    gap = np.maximum(0, np.maximum(lo_b - hi_a, lo_a - hi_b))
    assert a.quantiles != b.quantiles  # the grouping did change the sketch
    assert np.all(gap <= a.quantile_rank_error + b.quantile_rank_error)


def test_value_counts_absorbed_in_groups_equal_chunk_by_chunk():
    """FrequencyAccumulator absorbs chunks in groups (re-aggregating the values it holds
    once per group, not per chunk): counts, bounds and the Misra-Gries summary equal
    absorbing each chunk as it comes, below and past max_exact, merges included."""
    from collections import Counter

    from tfpipe.features._sketch import FrequencyAccumulator

    rng = np.random.default_rng(3)
    chunks = [pa.array(rng.zipf(1.3, int(n)) % 5000) for n in rng.integers(1, 4000, 40)]
    for max_exact in (100, 3000, 10_000):
        accs = [FrequencyAccumulator(max_exact) for _ in range(4)]
        for acc in accs[2:]:  # the reference: every chunk absorbed when added
            acc._defer = acc._absorb  # type: ignore[method-assign]
        for i, chunk in enumerate(chunks):
            accs[i % 2].add(chunk, 1)
            accs[2 + i % 2].add(chunk, 1)
        grouped, reference = accs[0], accs[2]
        grouped.merge(accs[1])
        reference.merge(accs[3])
        got, want = grouped.result(50, decode=False), reference.result(50, decode=False)
        assert got == want, max_exact
        assert (grouped.exact, grouped.error, grouped.unique_lower_bound) == \
            (reference.exact, reference.error, reference.unique_lower_bound)
        if grouped.exact:  # and against the plain count
            counts = Counter(v for c in chunks for v in c.to_pylist())
            assert list(got.vocabulary) == sorted(counts.items(),
                                                  key=lambda kv: (-kv[1], kv[0]))[:50]
