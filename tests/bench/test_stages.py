"""Stage report: a deliberately slow stage is named slowest, wherever it sits;
batched prefixes are counted in rows; end to end is measured on its own."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfpipe.bench._stages import report_from_datasets

BATCH = 8


def _heavy(x):
    # ~50 MFLOP of graph work per element: milliseconds, against microseconds
    # for the cheap stages (a 100x margin, so a busy machine does not flip it).
    a = tf.random.stateless_uniform([300, 300], tf.stack([tf.cast(x, tf.int64), 0]))
    return tf.reduce_sum(tf.linalg.matmul(a, a)) * 0 + tf.cast(x, tf.float32)


def _fake_stages(slow: str) -> list[tuple[str, tf.data.Dataset]]:
    """Prefixes named as tfpipe.pipeline.STAGES; the one named `slow` adds _heavy."""
    def add(ds, name, fn):
        return ds.map(_heavy if name == slow else fn)

    out = []
    ds = tf.data.Dataset.range(100_000)
    for name in ("read", "parse", "decode", "geometry"):
        ds = add(ds, name, lambda x: x + 1) if name != "read" else (
            ds.map(_heavy) if slow == "read" else ds)
        out.append((name, ds))
    ds = ds.batch(BATCH)
    out.append(("batch", ds))
    for name in ("pixel", "compose"):  # batched stages, as in the pipeline
        ds = ds.map(lambda b: tf.map_fn(_heavy, b, fn_output_signature=tf.float32)
                    if name == slow else b + 1)
        out.append((name, ds))
    return out


@pytest.mark.parametrize("slow", ["decode", "pixel"])
def test_deliberately_slow_stage_is_named_slowest(slow) -> None:
    rep = report_from_datasets(_fake_stages(slow), steps=3, warmup=1, batch_size=BATCH)
    assert [s.name for s in rep.stages] == ["read", "parse", "decode", "geometry", "batch",
                                            "pixel", "compose"]
    assert rep.slowest.name == slow, [(s.name, round(s.added_us)) for s in rep.stages]
    assert rep.slowest.share > 0.5
    # only the heavy stage's increment is large; the stages after it add little
    later = [s for s in rep.stages if s.name in ("compose",)]
    assert all(s.added_us < rep.slowest.added_us / 5 for s in later)
    assert f"slowest stage: {slow}" in rep.summary()


def test_batched_prefixes_count_rows_not_batches() -> None:
    rep = report_from_datasets(_fake_stages("none"), steps=3, warmup=1, batch_size=BATCH)
    by = {s.name: s for s in rep.stages}
    # every prefix is measured over 3 batches of 8 rows; a batched prefix whose
    # batches were counted as one element each would show 3
    assert {n: s.result.elements for n, s in by.items()} == {n: 3 * BATCH for n in by}
    assert [n for n, s in by.items() if s.batched] == ["batch", "pixel", "compose"]
    assert rep.end_to_end is None and "last prefix (compose)" in rep.summary()


def test_end_to_end_is_measured_apart() -> None:
    stages = _fake_stages("none")
    e2e = stages[-1][1].map(lambda b: tf.map_fn(_heavy, b, fn_output_signature=tf.float32))
    rep = report_from_datasets(stages, steps=3, warmup=1, batch_size=BATCH, end_to_end=e2e)
    assert rep.end_to_end is not None and rep.end_to_end.elements == 3 * BATCH
    # the heavy end-to-end dataset is far slower than any prefix, and it is not a stage
    assert rep.end_to_end.elements_per_s < min(s.elements_per_s for s in rep.stages) / 5
    assert "end to end (build_pipeline)" in rep.summary()
    assert rep.to_dict()["end_to_end"]["elements"] == 3 * BATCH


def test_no_stages() -> None:
    with pytest.raises(ValueError):
        report_from_datasets([], steps=1)

# The real pipeline's stage report runs through the CLI (test_cli.py, --stages).
