"""The tabular doctor rules, on statistics built with NumPy (tests/features/tabular_oracle)
and on the ctr preset's converted table (a stale statistics file)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "features"))
from tabular_oracle import statistics  # noqa: E402

from tfpipe import doctor  # noqa: E402
from tfpipe.config import load_config  # noqa: E402
from tfpipe.doctor._core import RULES, Context  # noqa: E402
from tfpipe.features import TransformSpec  # noqa: E402
from tfpipe.pipeline import TabularSource  # noqa: E402


def _findings(stats, specs, manifest_sha=None):
    src = TabularSource("stats.json", stats, None, manifest_sha, tuple(specs), "label")
    ctx = Context(graph=None, options=None, batch_size_hint=None, ram_budget_bytes=0, cpus=1,
                  host_cpus=1, tabular=src)
    return [f for rule in doctor.TABULAR_RULES for f in RULES[rule].check(ctx)]


def test_tabular_rules_against_numpy_counts():
    rng = np.random.default_rng(0)
    ids = rng.zipf(1.1, 2000).tolist()             # long tail: many distinct values
    price = np.append(rng.normal(50, 5, 1999), 1e6).tolist()  # one huge outlier
    stats = statistics({"user_id": (ids, "int64"), "price": (price, "float32"),
                        "label": ([0, 1] * 1000, "int64")})
    distinct = len(set(ids))
    freq = np.sort(np.unique(ids, return_counts=True)[1])[::-1]
    top10 = freq[:10].sum() / len(ids)  # the oracle's coverage of a top-10 vocabulary
    specs = [TransformSpec("user", "embedding_id", ("user_id",), {"top_k": 10}),
             TransformSpec("user_all", "vocabulary", ("user_id",), {}),
             TransformSpec("uh", "hash", ("user_id",), {"num_bins": 65}),
             TransformSpec("p", "min_max", ("price",), {}),
             TransformSpec("pz", "normalize", ("price",), {})]
    found = {(f.rule, f.op): f for f in _findings(stats, specs)}
    assert top10 < 0.5
    cover = found[("vocabulary-coverage", "features.columns.user")]
    assert cover.severity == "warning" and f"covering {top10:.1%}" in cover.message
    assert f"keeps 10 of {distinct:,} values" in cover.message
    hashed = found[("hash-collisions", "features.columns.uh")]
    assert hashed.severity == "info" and f"{distinct:,} train distinct values into 64 bins" \
        in hashed.message and f"at least {distinct - 64:,} share" in hashed.message
    assert ("min-max-outlier", "features.columns.p") in found
    # a complete vocabulary, normalize and a matching hash are fine
    assert set(found) == {("vocabulary-coverage", "features.columns.user"),
                          ("hash-collisions", "features.columns.uh"),
                          ("min-max-outlier", "features.columns.p")}
    stale = _findings(stats, specs[1:2], manifest_sha="0" * 64)
    assert [(f.rule, f.severity) for f in stale] == [("stale-statistics", "error")]
    assert _findings(stats, specs[1:2], manifest_sha=stats.sha256) == []


def test_doctor_flags_statistics_of_another_conversion(converted, tmp_path):
    from tfpipe.features import compute_statistics, ctr_table, write_statistics

    data = tmp_path / "ctr"
    shutil.copytree(converted["tabular"], data)
    write_statistics(compute_statistics(ctr_table(500, seed=9)), data)  # not this table's
    cfg = load_config("ctr", {"data.path": str(data), "pipeline.batch_size": 256})
    found = doctor.check_config(cfg)
    stale = [f for f in found if f.rule == "stale-statistics"]
    assert len(stale) == 1 and stale[0].severity == "error"
    assert doctor.worst(found) == "error"
