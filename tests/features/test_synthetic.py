"""The synthetic CTR table: deterministic, chunk-size independent, realistic structure."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq

from tfpipe.features import ctr_batches, ctr_table, make_ctr_table


def test_deterministic_and_independent_of_chunking(tmp_path):
    a = ctr_table(70_000, seed=3)
    b = ctr_table(70_000, seed=3, chunk_rows=9_999)
    assert a.equals(b)
    assert max(batch.num_rows for batch in ctr_batches(70_000, seed=3, chunk_rows=9_999)) == 9_999
    assert not a.equals(ctr_table(70_000, seed=4))
    path = make_ctr_table(tmp_path / "ctr.parquet", 70_000, seed=3, chunk_rows=20_000)
    assert pq.read_table(path).equals(a)


def test_structure_zipf_daily_cycle_nulls_and_label_signal():
    df = ctr_table(120_000, seed=0).to_pandas()
    assert list(df.columns) == ["user_id", "item_id", "timestamp", "price", "category",
                                "device", "user_age", "position", "label"]
    # Zipf: the most popular user has far more rows than the median user.
    counts = df.user_id.value_counts()
    assert counts.iloc[0] > 50 * counts.median()
    hours = (df.timestamp // 3600) % 24
    by_hour = hours.value_counts()
    assert by_hour[20] > 3 * by_hour[4]  # evening peak, night trough
    assert (df.timestamp.max() - df.timestamp.min()) > 27 * 86_400
    assert 0.01 < df.device.isna().mean() < 0.03 and 0.03 < df.user_age.isna().mean() < 0.07
    assert df.price.gt(0).all()
    medians = df.groupby("category").price.median()
    assert medians["travel"] > 10 * medians["grocery"]  # per-category price levels
    # The label depends on the features: CTR differs by hour and by position.
    ctr_h = df.groupby(hours).label.mean()
    assert ctr_h[20] > 1.5 * ctr_h[7]
    ctr_p = df.groupby("position").label.mean()
    assert ctr_p[1] > ctr_p[5]
    assert 0.05 < df.label.mean() < 0.3
    assert np.issubdtype(df.user_id.dtype, np.integer)
