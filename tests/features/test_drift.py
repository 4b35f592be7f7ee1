"""Drift: flags injected shifts, stays quiet on a fresh sample of the same distribution."""

from __future__ import annotations

import json
from xml.etree import ElementTree

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tfpipe.cli.main import cli
from tfpipe.errors import ConfigError
from tfpipe.features import (DriftThresholds, TransformSpec, compute_statistics, ctr_table,
                             drift, js_divergence, psi, write_statistics)

ROWS = 20_000


@pytest.fixture(scope="module")
def baseline():
    table = ctr_table(ROWS, seed=1, world_seed=0)
    return table, compute_statistics(table)


@pytest.fixture(scope="module")
def fresh():
    return ctr_table(ROWS, seed=2, world_seed=0)


def _replace(table: pa.Table, name: str, column: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, column)


def test_metric_definitions_against_numpy():
    p = np.array([0.5, 0.3, 0.2, 0.0])
    q = np.array([0.25, 0.25, 0.25, 0.25])
    pe, qe = np.maximum(p, 1e-4), np.maximum(q, 1e-4)
    assert psi(p, q) == pytest.approx(np.sum((qe - pe) * np.log(qe / pe)))
    m = (p + q) / 2
    kl = lambda a: np.sum(a[a > 0] * np.log2(a[a > 0] / m[a > 0]))  # noqa: E731
    assert js_divergence(p, q) == pytest.approx(0.5 * kl(p) + 0.5 * kl(q))
    assert js_divergence(p, p) == 0.0 and js_divergence([1, 0], [0, 1]) == pytest.approx(1.0)


def test_quiet_on_a_fresh_sample_of_the_same_distribution(baseline, fresh):
    _, stats = baseline
    report = drift(stats, fresh)
    assert not report.flagged, report.flagged_names
    # timestamps are mostly distinct: compared as numbers only
    kinds = {(c.name, c.kind) for c in report.columns}
    assert ("timestamp", "numeric") in kinds and ("timestamp", "categorical") not in kinds
    price = next(c for c in report.columns if c.name == "price")
    assert price.metrics["psi"] < 0.05 and price.metrics["rows"] == ROWS


def test_flags_a_mean_shift_new_and_dropped_categories(baseline, fresh):
    _, stats = baseline
    shifted = _replace(fresh, "price", pc.multiply(fresh.column("price"), 1.6))
    cats = fresh.column("category").to_numpy(zero_copy_only=False).astype(object)
    rng = np.random.default_rng(0)
    cats[rng.random(cats.size) < 0.15] = "crypto"  # a category the train data never had
    shifted = _replace(shifted, "category", pa.array(cats))
    top = stats.column("category").categorical.vocabulary[0][0]
    shifted = shifted.filter(pc.not_equal(shifted.column("category"), top))  # dropped
    report = drift(stats, shifted)
    by = {(c.name, c.kind): c for c in report.columns}
    price, cat = by[("price", "numeric")], by[("category", "categorical")]
    assert price.flagged and price.metrics["psi"] > 0.2 and price.metrics["js"] > 0.05
    assert cat.flagged and cat.metrics["new_category_rate"] > 0.1
    assert top in cat.metrics["dropped_categories"]
    assert cat.metrics["top_new_values"][0][0] == "crypto"
    assert any("vanished" in f for f in cat.flags) and any("new-category" in f for f in cat.flags)
    assert not by[("device", "categorical")].flagged
    # Thresholds are configurable: lenient enough, nothing is flagged.
    lenient = drift(stats, shifted, thresholds={"psi": 10, "js": 1, "linf": 1,
                                                "new_category_rate": 1, "dropped_share": 1,
                                                "missing_rate": 1})
    assert not lenient.flagged
    with pytest.raises(ConfigError, match=r"thresholds\.psy: unknown threshold; allowed: psi"):
        DriftThresholds.from_mapping({"psy": 1})


@pytest.mark.slow  # TensorFlow start-up (the transform graph) dominates
def test_after_transform_health(baseline, fresh):
    _, stats = baseline
    specs = [TransformSpec("item", "vocabulary", ("item_id",), {"top_k": 100}),
             TransformSpec("price_bucket", "bucketize", ("price",), {"num_buckets": 10})]
    quiet = drift(stats, fresh, transforms=specs)
    assert [t.name for t in quiet.transforms] == ["item", "price_bucket"]
    assert not any(t.flagged for t in quiet.transforms)
    bucket = quiet.transforms[1].metrics
    assert sum(bucket["bucket_share"]) == pytest.approx(1.0)
    assert max(abs(a - b) for a, b in zip(bucket["bucket_share"], bucket["expected_share"])) < 0.03
    ids = fresh.column("item_id").to_numpy().copy()
    new_items = np.random.default_rng(1).random(ids.size) < 0.3
    ids[new_items] += 10_000_000  # items launched after training
    shifted = _replace(fresh, "item_id", pa.array(ids))
    shifted = _replace(shifted, "price", pc.add(shifted.column("price"), 10_000.0))
    loud = drift(stats, shifted, transforms=specs)
    item, price = loud.transforms
    # The OOV share, counted from the layer's own indices, grows by the injected 30%.
    assert item.flagged and item.metrics["oov_rate"] - item.metrics["baseline_oov_rate"] > 0.25
    assert price.flagged and price.metrics["empty_buckets"] == list(range(9))
    assert price.metrics["overfull_buckets"] == [9]


def test_cli_exit_codes_reports_and_json(baseline, fresh, tmp_path):
    table, stats = baseline
    write_statistics(stats, tmp_path / "ds")
    pq.write_table(fresh, tmp_path / "fresh.parquet")
    shifted = _replace(fresh, "price", pc.multiply(fresh.column("price"), 2.0))
    pq.write_table(shifted, tmp_path / "shifted.parquet")
    run = CliRunner().invoke
    ok = run(cli, ["drift", str(tmp_path / "ds"), str(tmp_path / "fresh.parquet")])
    assert ok.exit_code == 0 and "nothing flagged" in ok.output
    md = tmp_path / "rep" / "drift.md"
    bad = run(cli, ["drift", str(tmp_path / "ds"), str(tmp_path / "shifted.parquet"),
                    "--report", str(md)])
    assert bad.exit_code == 1 and "1 flagged: price" in bad.output
    text = md.read_text()
    assert "### price (numeric)" in text and "![price](drift-plots/price-numeric.svg)" in text
    svg = (tmp_path / "rep" / "drift-plots" / "price-numeric.svg").read_text()
    assert svg.startswith("<svg") and "<polyline" in svg and "http" not in svg.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    root = ElementTree.fromstring(svg)  # well-formed XML
    bars = [r for r in root.iter("{http://www.w3.org/2000/svg}rect")][1:]
    assert len(bars) == len(stats.column("price").numeric.histogram)  # one per quantile bin
    page = tmp_path / "drift.html"
    js = run(cli, ["drift", str(tmp_path / "ds"), str(tmp_path / "shifted.parquet"), "--json",
                   "--report", str(page)])
    assert js.exit_code == 1
    obj = json.loads(js.output)
    assert obj["flagged"] and obj["flagged_names"] == ["price"]
    assert obj["baseline"]["sha256"] == stats.sha256
    html = page.read_text()
    assert html.count("<svg") == 1 and "<script" not in html
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("thresholds: {psi: 5, js: 1}\nignore: [timestamp]\n")
    assert run(cli, ["drift", str(tmp_path / "ds"), str(tmp_path / "shifted.parquet"),
                     "--config", str(cfg)]).exit_code == 0
    cfg.write_text("thresholds: {psi: -1}\n")
    err = run(cli, ["drift", str(tmp_path / "ds"), str(tmp_path / "shifted.parquet"),
                    "--config", str(cfg)])
    assert err.exit_code == 2 and "thresholds.psi: must be a number >= 0" in err.output
    (tmp_path / "empty").mkdir()
    err = run(cli, ["drift", str(tmp_path / "empty"), str(tmp_path / "fresh.parquet")])
    assert err.exit_code == 2 and "statistics.json: no statistics" in err.output
    err = run(cli, ["drift", str(tmp_path / "ds"), str(tmp_path / "fresh.parquet"),
                    "--ignore", "nope"])
    assert err.exit_code == 2 and "no column 'nope'" in err.output


@pytest.mark.slow  # TensorFlow start-up (the pipeline config's transform graph)
def test_cli_takes_the_transforms_of_a_pipeline_config(baseline, fresh, tmp_path):
    _, stats = baseline
    write_statistics(stats, tmp_path / "ds")
    ids = fresh.column("item_id").to_numpy().copy()
    ids[: ids.size // 2] += 10_000_000  # half the items are new
    pq.write_table(_replace(fresh, "item_id", pa.array(ids)), tmp_path / "new.parquet")
    cfg = tmp_path / "tabular.yaml"
    cfg.write_text(f"data: {{path: {tmp_path / 'ds'}}}\n"
                   "features:\n  label: label\n  columns:\n"
                   "    item: {transform: vocabulary, column: item_id, top_k: 200}\n"
                   "    price_bucket: {transform: bucketize, column: price, num_buckets: 5}\n")
    r = CliRunner().invoke(cli, ["drift", str(tmp_path / "ds"), str(tmp_path / "new.parquet"),
                                 "--pipeline-config", str(cfg), "--json",
                                 "--ignore", "item_id"])
    assert r.exit_code == 1, r.output
    obj = json.loads(r.output)
    health = {t["name"]: t for t in obj["transforms"]}
    assert obj["flagged_names"] == ["item"] and health["item"]["metrics"]["oov_rate"] > 0.45
    assert not health["price_bucket"]["flagged"]


# ----------------------------------------- issue 26 item 11: long-tailed IDs, Good-Turing
ZIPF_ROWS = 20_000


def _zipf_table(seed: int, rows: int = ZIPF_ROWS) -> pa.Table:
    """Long-tailed ID columns (Zipf 1.2: ~5,000 distinct values in 20,000 rows, a fifth
    of the rows a value seen once), an int and a string version, and a price."""
    rng = np.random.default_rng(seed)
    ids = rng.zipf(1.2, rows).astype(np.int64)
    items = rng.zipf(1.2, rows)
    return pa.table({"user_id": pa.array(ids),
                     "item": pa.array([f"i{v}" for v in items]),
                     "price": pa.array(rng.lognormal(3.0, 0.5, rows))})


@pytest.fixture(scope="module")
def zipf():
    base = _zipf_table(11)
    return base, compute_statistics(base), _zipf_table(12)


def _good_turing(values) -> float:
    """The oracle: share of the sample's values whose value occurs exactly once."""
    _, counts = np.unique(np.asarray(values), return_counts=True)
    return float((counts == 1).sum() / len(values))


def test_good_turing_share_from_the_stored_vocabulary(zipf):
    base, stats, _ = zipf
    for name in ("user_id", "item"):
        values = base.column(name).to_numpy(zero_copy_only=False)
        cat = stats.column(name).categorical
        assert cat.oov_count == 0  # the default top_k lists every value
        assert cat.unseen_share == pytest.approx(_good_turing(values), abs=1e-15)
    # a truncated vocabulary cannot say N1; drift then needs only the listed singletons
    small = compute_statistics(base, top_k=200).column("user_id").categorical
    assert small.unseen_share is None and small.listed_singletons == 0


@pytest.mark.parametrize("top_k", [10_000, 200])
def test_a_fresh_zipf_sample_is_not_flagged(zipf, top_k):
    base, stats, fresh = zipf
    if top_k != 10_000:
        stats = compute_statistics(base, top_k=top_k)
    report = drift(stats, fresh)
    assert not report.flagged, [(c.name, c.flags) for c in report.columns if c.flags]
    by = {(c.name, c.kind): c for c in report.columns}
    uid = by[("user_id", "categorical")]
    gt = _good_turing(base.column("user_id").to_numpy())
    assert uid.metrics["baseline_unseen_share"] == (pytest.approx(gt, abs=1e-12)
                                                    if top_k == 10_000 else None)
    assert uid.metrics["new_category_rate"] > 0.15  # what was flagged before
    if top_k == 10_000:  # the vocabulary lists every value: expected = N1 / N exactly
        assert uid.metrics["expected_new_category_rate"] == pytest.approx(gt, abs=1e-12)
    assert ("user_id", "numeric") in by  # ints: compared as numbers too (< half distinct)


def test_zipf_columns_still_flag_real_drift(zipf):
    base, stats, fresh = zipf
    rng = np.random.default_rng(5)
    ids = fresh.column("user_id").to_numpy().copy()
    fresh_ids = rng.random(ids.size) < 0.15
    ids[fresh_ids] = 10**9 + np.arange(fresh_ids.sum())  # ids the baseline never had
    items = fresh.column("item").to_numpy(zero_copy_only=False).astype(object)
    top_item = stats.column("item").categorical.vocabulary[0][0]
    items[items == top_item] = "i2" if top_item != "i2" else "i3"  # a dropped category
    shifted = fresh.set_column(0, "user_id", pa.array(ids))
    shifted = _replace(shifted, "item", pa.array(items))
    shifted = _replace(shifted, "price", pc.multiply(fresh.column("price"), 1.5))
    report = drift(stats, shifted)
    by = {(c.name, c.kind): c for c in report.columns}
    assert any("new-category" in f for f in by[("user_id", "categorical")].flags)
    assert top_item in by[("item", "categorical")].metrics["dropped_categories"]
    assert any("vanished" in f for f in by[("item", "categorical")].flags)
    assert by[("price", "numeric")].flagged
    assert report.flagged_names == ["user_id", "item", "price"]
