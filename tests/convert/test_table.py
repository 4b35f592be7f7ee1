"""CSV and Parquet conversion, checked against pyarrow and plain tf.data."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from tfpipe.convert import convert
from tfpipe.errors import InputError

from .conftest import read_split


def _features(with_tags: bool):
    import tensorflow as tf

    s, i = tf.io.FixedLenFeature([], tf.string), tf.io.FixedLenFeature([], tf.int64)
    f = {"image": s, "label": s, "label_id": i, "weight": tf.io.FixedLenFeature([], tf.float32),
         "flag": i, "image/encoded": s, "image/format": s, "image/height": i,
         "image/width": i, "image/filename": s, "image/class/label": i, "image/class/text": s}
    # note has nulls: var-length in both formats (a CSV's empty field is null, item 6)
    f["note"] = tf.io.VarLenFeature(tf.string)
    if with_tags:
        f["tags"] = tf.io.VarLenFeature(tf.int64)
    return f


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_table_round_trip(table_src, tmp_path: Path, kind: str) -> None:
    path = table_src[0] if kind == "csv" else table_src[1]
    m = convert(path, tmp_path / "out", image_column="image", label_column="label",
                workers=1)
    table = (pacsv.read_csv(path) if kind == "csv" else pq.read_table(path)).to_pylist()
    assert m.class_names == sorted({r["label"] for r in table})
    schema = m.schema.to_json()
    assert schema["weight"]["dtype"] == "float32" and schema["flag"]["dtype"] == "int64"
    assert schema["label_id"]["dtype"] == "int64" and schema["label"]["dtype"] == "string"
    assert schema["note"]["kind"] == "var"  # has nulls: absence stays readable
    if kind == "parquet":
        assert schema["tags"]["kind"] == "var"
    records = read_split(tmp_path / "out", "train", _features(kind == "parquet"))
    assert len(records) == len(table) == m.num_records["train"]
    by_path = {r["image"].decode(): r for r in records}
    base = path.parent
    for row in table:
        rec = by_path[row["image"]]
        assert rec["image/encoded"] == (base / row["image"]).read_bytes()
        assert rec["image/filename"].decode() == row["image"]
        assert rec["label_id"] == row["label_id"]
        assert rec["flag"] == int(row["flag"])
        assert rec["weight"] == np.float32(row["weight"])
        assert m.class_names[rec["image/class/label"]] == row["label"]
        assert rec["image/class/text"].decode() == row["label"]
        assert [v.decode() for v in rec["note"]] == ([] if not row["note"]  # None, or CSV ""
                                                      else [row["note"]])
        if kind == "parquet":
            assert rec["tags"].tolist() == row["tags"]


def test_table_without_images_keeps_columns(tmp_path: Path) -> None:
    src = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3], "y": [0.5, 1.5, None],
                             "name": ["a", "b", "c"], "vec": [[1.0], [], [2.0, 3.0]]}), src)
    m = convert(src, tmp_path / "out", workers=1)
    import tensorflow as tf

    feats = {"x": tf.io.FixedLenFeature([], tf.int64), "y": tf.io.VarLenFeature(tf.float32),
             "name": tf.io.FixedLenFeature([], tf.string),
             "vec": tf.io.VarLenFeature(tf.float32)}
    recs = sorted(read_split(tmp_path / "out", "train", feats), key=lambda r: r["x"])
    assert [r["x"] for r in recs] == [1, 2, 3]
    assert [r["y"].tolist() for r in recs] == [[0.5], [1.5], []]
    assert [r["vec"].tolist() for r in recs] == [[1.0], [], [2.0, 3.0]]
    assert m.class_names == []


def test_bad_rows_skipped_and_raise_names_row(table_src, tmp_path: Path) -> None:
    csv_path = table_src[0]
    work = tmp_path / "t"
    shutil.copytree(csv_path.parent, work)
    rows = pacsv.read_csv(work / "table.csv").to_pylist()
    rows[3]["image"] = "images/missing.jpg"
    (work / rows[5]["image"]).write_bytes(b"not a jpeg")
    pacsv.write_csv(pa.Table.from_pylist(rows), work / "table.csv")
    m = convert(work / "table.csv", tmp_path / "out", image_column="image", workers=1)
    skipped = {s.input: s.reason for s in m.splits["train"].skipped}
    assert skipped["table.csv row 3"] == "image file not found: images/missing.jpg"
    assert "not a recognised image" in skipped[f"table.csv row 5 ({rows[5]['image']})"]
    assert m.num_records["train"] == len(rows) - 2
    with pytest.raises(InputError, match="table.csv row 3"):
        convert(work / "table.csv", tmp_path / "raise", image_column="image",
                on_error="raise", workers=1)
    # A null in the label column makes a bad row too (Parquet keeps nulls).
    rows = pq.read_table(table_src[1]).to_pylist()
    rows[2]["label"] = None
    shutil.copy(table_src[1], work / "t.parquet")
    pq.write_table(pa.Table.from_pylist(rows), work / "t.parquet")
    m = convert(work / "t.parquet", tmp_path / "pq", label_column="label", workers=1)
    assert [s.to_json() for s in m.splits["train"].skipped] == [
        {"input": "t.parquet row 2", "reason": "null in required column 'label'"}]
    with pytest.raises(InputError, match="'nope' is not a column"):
        convert(work / "t.parquet", tmp_path / "x", image_column="nope")


def test_nothing_to_convert_is_an_error(tmp_path: Path) -> None:
    src = tmp_path / "t.csv"
    src.write_text("image,label\nmissing.jpg,a\n")
    with pytest.raises(InputError, match="nothing to convert.*image file not found"):
        convert(src, tmp_path / "out", image_column="image", workers=1)
