"""TFDS reads what `convert` writes: `tfds.builder_from_directory` (tensorflow-datasets
from PyPI, the dev extra) against the manifest, PIL decodes of the source images, the
COCO JSON, and TFDS's own serialization of the equivalent FeaturesDict."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tfpipe.convert import convert, write_tfds_metadata
from tfpipe.convert._tfds import dataset_info, tfds_features
from tfpipe.records import Manifest, SplitInfo, classification_schema

tfds = pytest.importorskip("tensorflow_datasets")

TFDS_FILES = {"dataset_info.json", "features.json"}


def _pixels(path: Path) -> np.ndarray:
    """The source file's RGB pixels: PIL for lossless formats; JPEG through TF's
    own decoder (libjpeg-turbo with TF's settings rounds some pixels differently
    from Pillow's build, by 1-3 levels)."""
    data = path.read_bytes()
    with Image.open(io.BytesIO(data)) as img:
        if img.format != "JPEG":
            return np.asarray(img.convert("RGB"))
    import tensorflow as tf

    return tf.io.decode_jpeg(data, channels=3).numpy()


def _check_splits(info, manifest: Manifest) -> None:
    assert set(info.splits) == set(manifest.splits)
    for name, split in manifest.splits.items():
        assert info.splits[name].num_examples == split.num_records
        assert info.splits[name].shard_lengths == [s.num_records for s in split.shards]
        assert info.splits[name].num_bytes == split.num_bytes


def _show(ds, info) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    fig = tfds.show_examples(ds, info, rows=2, cols=2)
    assert isinstance(fig, Figure) and len(fig.axes) == 4
    plt.close(fig)


@pytest.fixture(scope="module")
def folder_out(folder_src: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("tfds_folder") / "out"
    manifest = convert(folder_src, out, split="train=0.75,val=0.25", shard_size="20KB",
                       workers=1)
    return out, manifest


def test_image_folder_reads_through_tfds(folder_src: Path, folder_out) -> None:
    out, manifest = folder_out
    assert len(manifest.splits["train"].shards) > 1  # the shard template is exercised
    builder = tfds.builder_from_directory(out)
    info = builder.info
    _check_splits(info, manifest)
    assert info.features["image/class/label"].names == manifest.class_names
    seen = set()
    for split in manifest.splits:
        for ex in tfds.as_numpy(builder.as_dataset(split=split)):
            rel = ex["image/filename"].decode()
            assert rel not in seen
            seen.add(rel)
            assert np.array_equal(ex["image/encoded"], _pixels(folder_src / rel)), rel
            assert manifest.class_names[ex["image/class/label"]] == rel.split("/")[0]
            assert ex["image/class/text"].decode() == rel.split("/")[0]
            assert (ex["image/height"], ex["image/width"]) == ex["image/encoded"].shape[:2]
    assert seen == {p.relative_to(folder_src).as_posix() for p in folder_src.rglob("*.*")}
    raw = builder.as_dataset(split="val",
                             decoders={"image/encoded": tfds.decode.SkipDecoding()})
    for ex in tfds.as_numpy(raw):  # the original bytes, for who wants them undecoded
        assert ex["image/encoded"] == (folder_src / ex["image/filename"].decode()).read_bytes()
    image, label = next(iter(tfds.as_numpy(builder.as_dataset(split="val",
                                                              as_supervised=True))))
    assert image.ndim == 3 and image.shape[2] == 3 and 0 <= label < len(manifest.class_names)
    _show(builder.as_dataset(split="train"), info)


def test_files_match_tfds_own_serialization(folder_out, tmp_path: Path) -> None:
    """features.json and the labels file are what TFDS itself writes for the
    equivalent FeaturesDict (TFDS's save_config is the oracle of the format)."""
    out, manifest = folder_out
    text = tfds.features.Text()
    expected = tfds.features.FeaturesDict({
        "image/encoded": tfds.features.Image(shape=(None, None, 3)),
        "image/format": text, "image/filename": text, "image/source_id": text,
        "image/height": np.int64, "image/width": np.int64,
        "image/class/label": tfds.features.ClassLabel(names=manifest.class_names),
        "image/class/text": text, "tfpipe/schema_version": np.int64,
    })
    expected.save_config(str(tmp_path))
    theirs = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert set(theirs) == {"features.json", "image.class.label.labels.txt"}
    for name, content in theirs.items():
        ours = (out / name).read_text()
        if name.endswith(".json"):
            assert json.loads(ours) == json.loads(content)
        else:
            assert ours == content
    # The dataset_info.json proto parses with TFDS's own reader.
    proto = tfds.core.dataset_info.read_from_json(out / "dataset_info.json")
    assert [s.name for s in proto.splits] == sorted(manifest.splits)


def test_coco_reads_through_tfds(coco_src: Path, tmp_path: Path) -> None:
    import tensorflow as tf

    data = json.loads(coco_src.read_text())
    out = tmp_path / "out"
    manifest = convert(coco_src, out, split="train=0.5,val=0.5", workers=1)
    builder = tfds.builder_from_directory(out)
    info = builder.info
    _check_splits(info, manifest)
    assert info.features["image/object"]["class"]["label"].names == manifest.class_names
    # Oracle for boxes and labels: the records through plain tf.data + parse_single_example.
    spec = {k: tf.io.VarLenFeature(tf.float32) for k in
            ("image/object/bbox/xmin", "image/object/bbox/ymin",
             "image/object/bbox/xmax", "image/object/bbox/ymax")}
    spec["image/object/class/label"] = tf.io.VarLenFeature(tf.int64)
    spec["image/source_id"] = tf.io.FixedLenFeature([], tf.string)
    shards = [str(out / s.path) for sp in manifest.splits.values() for s in sp.shards]
    plain = {}
    for rec in tf.data.TFRecordDataset(shards):
        parsed = tf.io.parse_single_example(rec, spec)
        sid = parsed.pop("image/source_id").numpy().decode()
        plain[sid] = {k: tf.sparse.to_dense(v).numpy() for k, v in parsed.items()}
    images = {str(im["id"]): im for im in data["images"]}
    cats = sorted(c["id"] for c in data["categories"])
    boxes_seen = 0
    for split in manifest.splits:
        for ex in tfds.as_numpy(builder.as_dataset(split=split)):
            sid = ex["image/source_id"].decode()
            im = images[sid]
            assert np.array_equal(ex["image/encoded"], _pixels(coco_src.parent / im["file_name"]))
            obj = ex["image/object"]
            for k in ("xmin", "ymin", "xmax", "ymax"):
                assert np.array_equal(obj["bbox"][k], plain[sid][f"image/object/bbox/{k}"])
            assert np.array_equal(obj["class"]["label"], plain[sid]["image/object/class/label"])
            anns = [a for a in data["annotations"] if a["image_id"] == im["id"]]
            want = [manifest.class_names[cats.index(a["category_id"])] for a in anns]
            assert [t.decode() for t in obj["class"]["text"]] == want
            assert len(obj["bbox"]["xmin"]) == len(anns)
            boxes_seen += len(anns)
    assert len(plain) == len(images) and boxes_seen == len(data["annotations"]) > 0
    _show(builder.as_dataset(split="train"), info)


def test_table_columns_read_through_tfds(table_src: tuple[Path, Path], tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    parquet = table_src[1]
    manifest = convert(parquet, tmp_path / "out", image_column="image", workers=1)
    builder = tfds.builder_from_directory(tmp_path / "out")
    _check_splits(builder.info, manifest)
    assert set(builder.info.features) == set(manifest.schema)
    rows = pq.read_table(parquet).to_pylist()
    seen = 0
    for ex in tfds.as_numpy(builder.as_dataset(split="train")):
        row = rows[int(ex["image/source_id"].decode().split(":")[1])]
        assert ex["label"].decode() == row["label"] and ex["label_id"] == row["label_id"]
        assert ex["weight"] == np.float32(row["weight"]) and ex["flag"] == row["flag"]
        assert ex["tags"].tolist() == row["tags"]  # a list column: Tensor [None]
        assert np.array_equal(ex["image/encoded"], _pixels(parquet.parent / row["image"]))
        seen += 1
    assert seen == len(rows)


def test_existing_dataset_and_gzip(folder_src: Path, folder_out, tmp_path: Path) -> None:
    out, _ = folder_out
    files = sorted(TFDS_FILES | {"image.class.label.labels.txt"})
    written = {name: (out / name).read_bytes() for name in files}
    # A dataset converted before these files existed: rebuilt from manifest.json alone,
    # byte for byte.
    copy = tmp_path / "copy"
    copy.mkdir()
    for p in out.iterdir():
        if p.name not in written:
            (copy / p.name).write_bytes(p.read_bytes())
    assert write_tfds_metadata(copy) == files
    assert {name: (copy / name).read_bytes() for name in files} == written
    # GZIP shards: TFDS opens TFRecords without a compression type, so nothing is written.
    gz = tmp_path / "gz"
    convert(folder_src, gz, compression="gzip", workers=1)
    assert not TFDS_FILES & {p.name for p in gz.iterdir()}
    assert write_tfds_metadata(gz) == []


def test_label_names_that_do_not_survive_a_labels_file() -> None:
    """TFDS strips each line of a .labels.txt: such names stay plain int64 labels,
    and an empty split (TFDS cannot read one) is left out of dataset_info.json."""
    manifest = Manifest(schema=classification_schema(), class_names=[" cat", "dog"],
                        splits={"train": SplitInfo()})
    features, labels = tfds_features(manifest)
    label = features["featuresDict"]["features"]["image/class/label"]
    assert label["pythonClassName"].endswith("tensor_feature.Tensor") and labels == {}
    assert dataset_info(manifest)["splits"] == []
    assert "supervisedKeys" not in dataset_info(manifest)
