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
    # best of 5 rounds: on a busy machine one measurement can run 2x slow, and
    # every prefix after the heavy stage contains it
    rep = report_from_datasets(_fake_stages(slow), steps=10, warmup=1, batch_size=BATCH,
                               rounds=5)
    assert [s.name for s in rep.stages] == ["read", "parse", "decode", "geometry", "batch",
                                            "pixel", "compose"]
    assert rep.slowest.name == slow, [(s.name, round(s.added_us)) for s in rep.stages]
    assert rep.slowest.share > 0.4
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
    rep = report_from_datasets(stages, steps=5, warmup=1, batch_size=BATCH, end_to_end=e2e,
                               rounds=2)
    assert rep.end_to_end is not None and rep.end_to_end.elements == 5 * BATCH
    # the heavy end-to-end dataset is slower than any prefix, and it is not a stage
    assert rep.end_to_end.elements_per_s < min(s.elements_per_s for s in rep.stages) / 2
    assert "end to end (build_pipeline)" in rep.summary()
    assert rep.to_dict()["end_to_end"]["elements"] == 5 * BATCH


def test_no_stages() -> None:
    with pytest.raises(ValueError):
        report_from_datasets([], steps=1)
    with pytest.raises(ValueError, match="rounds"):
        report_from_datasets(_fake_stages("none"), steps=1, rounds=0)

# The real pipeline's stage report runs through the CLI (test_cli.py, --stages).
