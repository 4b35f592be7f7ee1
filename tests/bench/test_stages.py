"""Stage report: every prefix measured, increments and shares consistent."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfpipe.bench._stages import report_from_datasets


def test_shares_and_slowest_from_prefixes() -> None:
    base = tf.data.Dataset.range(10_000)
    heavy = base.map(lambda i: tf.reduce_sum(tf.random.stateless_uniform([200, 200], [i, i])))
    stages = [("read", base), ("decode", heavy), ("batch", heavy.batch(8))]
    rep = report_from_datasets(stages, steps=3, warmup=1, batch_size=8)
    assert [s.name for s in rep.stages] == ["read", "decode", "batch"]
    assert sum(s.share for s in rep.stages) == pytest.approx(1.0)
    assert all(s.added_us >= 0 for s in rep.stages)
    assert rep.slowest.added_us == max(s.added_us for s in rep.stages)
    assert rep.stages[0].added_us == pytest.approx(rep.stages[0].us_per_element)
    d = rep.to_dict()
    assert d["slowest"] == rep.slowest.name and "slowest stage" in d["summary"]
    with pytest.raises(ValueError):
        report_from_datasets([], steps=1)

# The real pipeline's stage report runs through the CLI (test_cli.py, --stages).
