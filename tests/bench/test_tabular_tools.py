"""`tfpipe check` and `tfpipe bench` on a tabular config: the ctr preset on the synthetic
CTR table converted with --stats (check through click's CliRunner; issue 26: check, doctor and
bench understand tabular pipelines). Before, check failed 5 of its checks on such a
config (SchemaError 'image/encoded', IndexError on the image shape, ...) and
`bench --stages` / `--baseline naive` stopped with "feature 'image/encoded' is required"."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[1] / "features"))
from tabular_oracle import make_ctr_dataset  # noqa: E402

from tfpipe.cli.check import command as check  # noqa: E402

ROWS = 1500


@pytest.fixture(scope="module")
def ctr(tmp_path_factory) -> str:
    table, data = make_ctr_dataset(tmp_path_factory.mktemp("ctr-tools"), rows=ROWS)
    assert pq.read_metadata(table).num_rows == ROWS
    return data


def _json(output: str):
    return json.loads(output[output.index("{"):])


def test_check_on_the_ctr_preset(ctr):
    from tfpipe.config import load_config
    from tfpipe.features import read_statistics
    from tfpipe.pipeline import tabular_transforms
    from tfpipe.records import Manifest

    res = CliRunner().invoke(check, [
        "ctr", "--set", f"data.path={ctr}", "--set", "pipeline.batch_size=256", "--json",
        *[a for c in ("dtypes", "labels", "statistics", "vocabulary", "enable_rate")
          for a in ("--only", c)]])
    assert res.exit_code == 0, res.output
    by = {c["name"]: c for c in _json(res.output)["checks"]}
    assert all(c["passed"] for c in by.values()), by
    manifest = Manifest.load(ctr)
    n = {s: manifest.splits[s].num_records for s in ("train", "val")}
    assert n["train"] + n["val"] == ROWS
    stats = read_statistics(ctr)
    assert f"sha256 {stats.sha256[:12]} as the manifest records" in by["statistics"]["detail"]
    assert f"non-null in all {n['train']:,} train rows" in by["label"]["detail"]
    # coverage of the ctr preset's top-1000 user vocabulary, from the stored counts
    users = stats.column("user_id").categorical
    cover = sum(f for _, f in users.vocabulary[:1000]) / users.count
    assert f"user {min(1000, len(users.vocabulary)):,} values cover {cover:.1%}" \
        in by["vocabulary coverage"]["detail"]
    info = tabular_transforms(load_config("ctr", {"data.path": ctr})).output_info
    for name, spec in info.items():
        assert f"{name} {spec.dtype}[256{''.join(f', {d}' for d in spec.shape)}]" \
            in by["dtypes and shapes"]["detail"], name
    assert by["enable_rate"]["skipped"]


def test_check_fails_on_statistics_of_another_conversion(ctr, tmp_path):
    from tfpipe.bench.check import run_checks
    from tfpipe.features import compute_statistics, ctr_table, read_statistics, write_statistics

    data = tmp_path / "ctr"
    shutil.copytree(ctr, data)
    write_statistics(compute_statistics(ctr_table(400, seed=9)), data)
    [res] = run_checks("ctr", [f"data.path={data}", "pipeline.batch_size=256"],
                       only=["statistics"])
    assert not res.passed
    assert f"sha256 {read_statistics(data).sha256[:12]}, the dataset's manifest records " \
        f"{read_statistics(ctr).sha256[:12]}" in res.detail


def test_bench_stages_and_naive_baseline_of_a_tabular_config(ctr):
    """The datasets `bench --stages` and `--baseline naive` measure (bench/_tabular.py):
    batches of the shapes the transforms declare, and over one epoch the same
    transformed rows (the naive path parses record by record, in another order)."""
    from tfpipe.bench import _tabular
    from tfpipe.bench._check_tabular import row_hashes
    from tfpipe.config import load_config
    from tfpipe.pipeline import tabular_transforms
    from tfpipe.records import Manifest

    train = Manifest.load(ctr).splits["train"]
    batch = train.shards[0].num_records  # equal shards: whole batches, nothing dropped
    assert {s.num_records for s in train.shards} == {batch}
    cfg = load_config("ctr", {"data.path": ctr, "pipeline.batch_size": batch})
    stages = _tabular.stages(cfg)
    assert [n for n, _ in stages] == ["batch: read + batch", "parse", "transforms"]
    info = tabular_transforms(cfg).output_info
    epochs = {}
    for name, ds in (("stages", stages[-1][1]), ("naive", _tabular.naive(cfg))):
        rows = []
        for feats, label in ds.take(len(train.shards)):
            assert sorted(feats) == sorted(info)
            for k, spec in info.items():
                assert feats[k].dtype.name == spec.dtype
                assert feats[k].shape == (batch, *spec.shape)
            rows += row_hashes([{**{k: v.numpy() for k, v in feats.items()},
                                 "label": label.numpy()}])
        epochs[name] = sorted(rows)
    assert len(epochs["stages"]) == train.num_records and epochs["stages"] == epochs["naive"]
