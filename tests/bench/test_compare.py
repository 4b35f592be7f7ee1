"""compare_naive: alternating rounds and the speed-up range; one result as CSV.
(`tfpipe bench --baseline naive` runs the two-round path in tests/bench/test_cli.py.)"""

from __future__ import annotations

import csv

from tfpipe.bench import BaselineComparison, compare_naive, measure, write_result_csv


def test_compare_naive_pairs_rounds_and_writes_csv(tiny_config, tmp_path) -> None:
    import tensorflow as tf

    # round 1's tfpipe side is given (the CLI passes the measurement it just made);
    # any real measurement does for the pairing logic, and a small one is quick
    batch = {"image": tf.zeros([8, 32, 32, 3]), "label": tf.zeros([8], tf.int64)}
    first = measure(tf.data.Dataset.from_tensors(batch).repeat(), warmup=0, steps=1)
    seen: list[str] = []
    cmp = compare_naive(tiny_config, steps=1, warmup=0, rounds=1, first=first,
                        progress=seen.append)
    assert cmp.ours == [first] and len(cmp.theirs) == 1 and len(seen) == 1
    assert cmp.theirs[0].steps == 1 and cmp.not_reproduced == list(cmp.not_reproduced)
    ratio = first.elements_per_s / cmp.theirs[0].elements_per_s
    assert cmp.speedup_range == (ratio, ratio)

    # two rounds of real measurements: the range spans the per-round ratios
    naive = cmp.theirs[0]
    again = compare_naive(tiny_config, steps=1, warmup=0, rounds=1, first=first).theirs[0]
    two = BaselineComparison([first, first], [naive, again])
    ratios = sorted(first.elements_per_s / t.elements_per_s for t in (naive, again))
    assert two.speedup_range == (ratios[0], ratios[1])
    assert two.baseline_best.elements_per_s == max(naive.elements_per_s, again.elements_per_s)
    d = two.to_dict()
    assert d["rounds"] == 2 and d["speedup_range"] == ratios and d["kind"] == "naive"

    path = write_result_csv(tmp_path / "r" / "one.csv", first)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and "elements_per_s" in rows[0]
    want = first.to_dict()
    assert {k: float(v) for k, v in rows[0].items()} == {k: float(want[k]) for k in rows[0]}
