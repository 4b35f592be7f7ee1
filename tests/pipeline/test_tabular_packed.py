"""The packed table layout (`convert(..., rows_per_record=N)`, docs/tabular.md
"Packed layout") read by build_pipeline: oracles are the row layout's pipeline over
the same table, pandas' view of the Parquet, and the uninterrupted run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tfpipe.config import load_config  # noqa: E402
from tfpipe.pipeline import build_pipeline, reset_skipped_counts, skipped_counts  # noqa: E402
from tfpipe.records import Manifest  # noqa: E402

BATCH = 128
N = 16  # rows per record: ~15 blocks per shard, the last one short
FEATURES = {"label": "label", "columns": {
    "price": {"transform": "log1p"},
    "category": {"transform": "vocabulary"},
    "age": {"transform": "normalize", "column": "user_age", "missing_indicator": True},
    "device": {"transform": "vocabulary"},
    "position": {"transform": "passthrough"}}}


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """(parquet, row layout, packed layout, packed one split) of one CTR table."""
    from tfpipe.convert import convert
    from tfpipe.features import make_ctr_table

    root = tmp_path_factory.mktemp("packed")
    table = str(make_ctr_table(str(root / "ctr.parquet"), 3000, seed=7))
    out = {}
    for name, n, split in (("rows", 1, "train=0.8,val=0.2"), ("packed", N, "train=0.8,val=0.2"),
                           ("whole", N, None)):
        out[name] = str(root / name)
        convert(table, out[name], split=split, progress=False, workers=1,
                shard_size=64 << 10, stats=split is not None, stats_quantiles=20,
                rows_per_record=n)
    return table, out["rows"], out["packed"], out["whole"]


@pytest.fixture
def small_groups(monkeypatch):
    """Groups of 256 rows (16 blocks), so a pass holds many and a step falls inside one."""
    from tfpipe.pipeline import _tabular_pack

    monkeypatch.setattr(_tabular_pack, "GROUP_ROWS", 256)


def cfg(path, stats_from=None, **pipe):
    features = dict(FEATURES)
    if stats_from:  # the row layout's statistics: the same transforms on both
        features["statistics"] = os.path.join(stats_from, "statistics.json")
    return load_config({"seed": 5, "data": {"path": path},
                        "pipeline": {"batch_size": BATCH, "shuffle_buffer": 600,
                                     "interleave_cycle": 1, **pipe},
                        "features": features})


def arrays(ds, n=None):
    return [{**{k: v.numpy() for k, v in f.items()}, "label": y.numpy()}
            for f, y in (ds if n is None else ds.take(n))]


def digests(batches):
    out = []
    for b in batches:
        h = hashlib.sha256()
        for k in sorted(b):
            h.update(k.encode() + b[k].tobytes())
        out.append(h.hexdigest())
    return out


def rows_of(batches):
    """Every row of the batches as a tuple of its values' bytes, sorted (a multiset)."""
    keys = sorted(batches[0])
    rows = []
    for b in batches:
        for i in range(len(b["label"])):
            rows.append(tuple(b[k][i].tobytes() for k in keys))
    return sorted(rows)


def test_manifest_counts_blocks_as_records_and_rows_as_rows(tables):
    _, rows, packed, _ = tables
    r, p = Manifest.load(rows), Manifest.load(packed)
    assert p.source["rows_per_record"] == N and "rows_per_record" not in r.source
    for split in ("train", "val"):
        assert p.settings["stats"][split]["rows"] == r.splits[split].num_records
        blocks = sum(-(-p.settings["shard_stats"][s.path]["rows"] // N)
                     for s in p.splits[split].shards)
        assert p.splits[split].num_records == blocks
    assert json.loads(Path(rows, "statistics.json").read_text()) == json.loads(
        Path(packed, "statistics.json").read_text())  # statistics are of rows


def test_eval_pass_is_the_row_layouts_bit_for_bit(tables):
    _, rows, packed, _ = tables
    want = build_pipeline(cfg(rows), "val")
    got = build_pipeline(cfg(packed), "val")
    assert int(got.cardinality()) == int(want.cardinality())
    assert digests(arrays(got)) == digests(arrays(want))


def test_train_epoch_holds_every_row_once_seeded_and_reshuffled(tables, small_groups):
    _, rows, packed, _ = tables
    c = cfg(packed, drop_remainder=False)
    ds = build_pipeline(c, epoch=0)
    e0, e1 = arrays(ds), arrays(ds)  # each iteration is the next epoch
    assert len(e0) == int(ds.cardinality())
    want = rows_of(arrays(build_pipeline(cfg(rows, drop_remainder=False), "train")))
    assert rows_of(e0) == want and rows_of(e1) == want  # no row lost or repeated
    assert digests(arrays(build_pipeline(c, epoch=0))) == digests(e0)  # same seed
    assert digests(e0) != digests(e1)


def test_resume_at_a_step_gives_the_remaining_batches(tables, small_groups):
    _, _, packed, _ = tables
    c = cfg(packed)
    whole = digests(arrays(build_pipeline(c, epoch=1)))
    for step in (3, 5):  # 384 rows: inside group 1; 640: a group boundary + 128
        assert digests(arrays(build_pipeline(c, epoch=1, step=step), len(whole) - step)) \
            == whole[step:]


def test_nullable_columns_read_back_as_pandas_sees_the_parquet(tables):
    import pandas as pd

    from tfpipe.pipeline._tabular_pack import PackedTabular
    from tfpipe.pipeline._settings import settings

    table, _, _, whole = tables
    config = load_config({"seed": 0, "data": {"path": whole},
                          "pipeline": {"batch_size": 64},
                          "features": {"label": "label", "statistics": os.path.join(
                              tables[2], "statistics.json"), "columns": {
                                  "age": {"transform": "passthrough", "column": "user_age"},
                                  "device": {"transform": "vocabulary"}}}})
    t = PackedTabular(settings(config), "train", (0, 1))
    blocks = tf.constant([r.numpy() for r in tf.data.TFRecordDataset(t.files)])
    raw = t.raw_group(blocks, None)

    def cells(x, n, as_py):  # a SparseTensor [rows, 1] -> a value or None per row
        out = [None] * n
        for (i, _), v in zip(x.indices.numpy().tolist(), x.values.numpy().tolist()):
            out[i] = as_py(v)
        return out

    labels = raw["label"].numpy().tolist()
    got = sorted(zip(labels, cells(raw["user_age"], len(labels), int),
                     cells(raw["device"], len(labels), bytes.decode)), key=repr)
    # the SparseTensors are [rows, 1] (or [rows, 0] when none is present)
    assert raw["user_age"].dense_shape.numpy().tolist() == [len(got), 1]
    df = pd.read_parquet(table)
    assert df["user_age"].isna().any() and df["device"].isna().any()
    want = sorted(zip(df["label"].astype(int).tolist(),
                      [None if pd.isna(a) else int(a) for a in df["user_age"]],
                      [None if d is None or (isinstance(d, float) and np.isnan(d)) else d
                       for d in df["device"]]), key=repr)
    assert got == want


def test_a_damaged_block_is_skipped_counted_and_named(tables, tmp_path):
    _, _, packed, _ = tables
    bad = str(tmp_path / "bad")
    shutil.copytree(packed, bad)
    m = Manifest.load(bad)
    files = m.shard_paths(bad, "val")
    records = [r.numpy() for r in tf.data.TFRecordDataset(files[0])]
    lost = tf.train.Example.FromString(records[2]).features.feature["tfpipe/rows"] \
        .int64_list.value[0]
    records[2] = b"\xff\xff not a block of rows"
    with tf.io.TFRecordWriter(files[0]) as w:
        for r in records:
            w.write(r)
    man = json.loads(Path(bad, "manifest.json").read_text())
    entry = man["splits"]["val"]["shards"][0]
    entry["num_bytes"] = os.path.getsize(files[0])
    entry["sha256"] = hashlib.sha256(Path(files[0]).read_bytes()).hexdigest()
    Path(bad, "manifest.json").write_text(json.dumps(man))
    c = cfg(bad, stats_from=packed, on_error="skip")
    reset_skipped_counts()
    got = sum(len(b["label"]) for b in arrays(build_pipeline(c, "val")))
    assert skipped_counts() == {files[0]: 1}
    assert got == m.settings["stats"]["val"]["rows"] - lost
    c.pipeline.on_error = "raise"
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"bad record 2 in shard {files[0]}"):
        for _ in build_pipeline(c, "val"):
            pass


def test_verify_deep_and_inspect_read_the_packed_layout(tables, tmp_path):
    from tfpipe.records import summarize, verify

    _, _, packed, _ = tables
    assert verify(packed, deep=True).ok
    assert summarize(packed, num_records=1)["schema"]["tfpipe/rows"]
    edited = str(tmp_path / "edited")
    shutil.copytree(packed, edited)
    man = json.loads(Path(edited, "manifest.json").read_text())
    name = man["splits"]["val"]["shards"][0]["path"]
    man["settings"]["shard_stats"][name]["rows"] += 1
    Path(edited, "manifest.json").write_text(json.dumps(man))
    report = verify(edited, deep=True)
    assert [f.kind for f in report.findings] == ["count-mismatch"]
    assert "settings.shard_stats says" in report.findings[0].message


def test_serving_warmup_rows_are_the_row_layouts(tables):
    from tfpipe.pipeline import raw_rows

    _, rows, packed, _ = tables
    want, got = raw_rows(cfg(rows), 40), raw_rows(cfg(packed), 40)
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def test_cli_flag_and_what_the_layout_refuses(tables, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from tfpipe.cli.main import cli
    from tfpipe.convert import convert
    from tfpipe.errors import ConfigError, InputError

    table = tables[0]
    r = CliRunner().invoke(cli, ["convert", table, str(tmp_path / "a"), "--workers", "1",
                                 "--rows-per-record", "100", "--json"])
    assert r.exit_code == 0, r.output
    m = Manifest.load(tmp_path / "a")
    assert m.source["rows_per_record"] == 100 and m.splits["train"].num_records == 30
    lists = tmp_path / "lists.parquet"
    pq.write_table(pa.table({"x": [1, 2], "tags": [[1], [2, 3]]}), lists)
    with pytest.raises(InputError, match="column.s. tags hold lists"):
        convert(str(lists), str(tmp_path / "b"), workers=1, rows_per_record=8)
    with pytest.raises(ConfigError, match="rows_per_record must be an int >= 1"):
        convert(table, str(tmp_path / "c"), workers=1, rows_per_record=0)


def test_two_workers_split_the_shards_by_rows(tables):
    from tfpipe.pipeline._tabular_pack import PackedTabular
    from tfpipe.pipeline._settings import settings

    _, _, packed, _ = tables
    c = load_config({"data": {"path": packed}, "pipeline": {"batch_size": 256},
                     "features": {"label": "label", "columns": {
                         "position": {"transform": "passthrough"}}}})
    t = PackedTabular(settings(c), "val", (0, 1))
    raw = t.raw_group(tf.constant([r.numpy() for r in tf.data.TFRecordDataset(t.files)]), None)
    want = sorted(zip(raw["label"].numpy().tolist(), raw["position"].numpy().tolist()))
    got, parts = [], []
    for w in range(2):
        ds = build_pipeline(c, "val", worker=(w, 2))
        rows = [(y, p) for b in arrays(ds) for y, p in zip(b["label"].tolist(),
                                                            b["position"].tolist())]
        assert int(ds.cardinality()) == -(-len(rows) // 256)  # from the manifest's rows
        parts.append(len(rows))
        got += rows
    assert sorted(got) == want and min(parts) > 0
