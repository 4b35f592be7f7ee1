"""Records tfpipe did not write (issue #25): TFDS-prepared directories read as they
are, and any keys through `data.keys`.

The TFDS directories are made by real `tfds` builders (`GeneratorBasedBuilder`,
`download_and_prepare`), so the files, names and metadata are TFDS's own. Oracles:
the shard files read with plain `tf.data.TFRecordDataset` + `tf.train.Example`
protos, TF's own `decode_jpeg`, TFDS's `builder_from_directory`, and the same
images written with tfpipe's own keys through the same config.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.errors import ConfigError
from tfpipe.pipeline import build_pipeline, framing_losses, reset_skipped_counts, skipped_counts
from tfpipe.records import iter_frames

tfds = pytest.importorskip("tensorflow_datasets")

H, W = 40, 48  # every image: the eval render at this size is the decode itself
CLASSES = ["cat", "dog", "fox"]
BOX_CLASSES = ["ball", "cone"]
N_TRAIN, N_VAL, SHARDS = 24, 6, 3


def _jpegs(n: int, seed: int) -> list[bytes]:
    from tfpipe import sample_data

    rng = np.random.default_rng(seed)
    photos = list(sample_data.source_photos().values())
    return [sample_data.encode(_crop(photos[i % len(photos)], rng)) for i in range(n)]


def _crop(photo: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    y = int(rng.integers(0, photo.shape[0] - H))
    x = int(rng.integers(0, photo.shape[1] - W))
    return np.ascontiguousarray(photo[y:y + H, x:x + W])


def _boxes(i: int) -> list[tuple[float, float, float, float]]:
    """0-2 boxes, normalized yxyx, different per image."""
    return [((i % 5) / 10, k / 4, 0.5 + (i % 4) / 10, k / 4 + 0.25) for k in range(i % 3)]


class TfpipeKeysCls(tfds.core.GeneratorBasedBuilder):
    """imagenet2012-style: image, label (ClassLabel), file_name."""

    # a one-part module name: TFDS looks a dotted test module up as a package
    # resource (`code_path`), which needs `importlib_resources` (not installed)
    __module__ = "tfpipe_test_builders"

    VERSION = tfds.core.Version("1.0.0")
    files: dict[str, list[Path]] = {}

    def _info(self):
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
            "image": tfds.features.Image(encoding_format="jpeg"),
            "label": tfds.features.ClassLabel(names=CLASSES),
            "file_name": tfds.features.Text()}))

    def _split_generators(self, dl_manager):
        return {split: self._generate_examples(split) for split in self.files}

    def _generate_examples(self, split):
        for i, path in enumerate(self.files[split]):
            # a path: TFDS stores the file's bytes as they are (never re-encoded)
            yield path.name, {"image": str(path), "label": i % len(CLASSES),
                              "file_name": path.name}


class TfpipeKeysDet(tfds.core.GeneratorBasedBuilder):
    """coco-style: image, objects/{bbox (BBoxFeature), label (ClassLabel)}."""

    __module__ = "tfpipe_test_builders"

    VERSION = tfds.core.Version("1.0.0")
    files: dict[str, list[Path]] = {}

    def _info(self):
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
            "image": tfds.features.Image(encoding_format="jpeg"),
            "objects": tfds.features.Sequence({
                "bbox": tfds.features.BBoxFeature(),
                "label": tfds.features.ClassLabel(names=BOX_CLASSES)})}))

    def _split_generators(self, dl_manager):
        return {split: self._generate_examples(split) for split in self.files}

    def _generate_examples(self, split):
        for i, path in enumerate(self.files[split]):
            yield path.name, {"image": str(path), "objects": {
                "bbox": [tfds.features.BBox(*b) for b in _boxes(i)],
                "label": [(i + k) % len(BOX_CLASSES) for k in range(len(_boxes(i)))]}}


def _prepare(builder_cls, root: Path, counts: dict[str, int]) -> Path:
    images = root / "images"
    images.mkdir(parents=True)
    files: dict[str, list[Path]] = {}
    for s, (split, n) in enumerate(counts.items()):
        files[split] = []
        for i, data in enumerate(_jpegs(n, seed=s)):
            files[split].append(images / f"{split}_{i:03d}.jpg")
            files[split][-1].write_bytes(data)
    builder_cls.files = files
    builder = builder_cls(data_dir=str(root / "tfds"), file_format="tfrecord")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(num_shards=SHARDS))
    return Path(builder.data_dir)


@pytest.fixture(scope="session")
def tfds_cls(tmp_path_factory) -> Path:
    return _prepare(TfpipeKeysCls, tmp_path_factory.mktemp("tfds_cls"),
                    {"train": N_TRAIN, "validation": N_VAL})


@pytest.fixture(scope="session")
def tfds_det(tmp_path_factory) -> Path:
    return _prepare(TfpipeKeysDet, tmp_path_factory.mktemp("tfds_det"), {"validation": 8})


def _shards(d: Path, split: str) -> list[Path]:
    return sorted(d.glob(f"*-{split}.tfrecord-*"))


def _interleaved(d: Path, split: str) -> list[tf.train.Example]:
    """The records in the pipeline's eval order: one from each shard in turn
    (interleave, cycle >= shards, block 1), read by plain tf.data."""
    per = [[tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(p))]
           for p in _shards(d, split)]
    return [e for row in itertools.zip_longest(*per) for e in row if e is not None]


def _eval_cfg(path: Path, base: str = "imagenet", **data) -> dict:
    return {"base": base, "seed": 5,
            "data": {"path": str(path), "image_size": [H, W], "eval_crop_fraction": 1.0,
                     "output_dtype": "uint8", **data},
            "pipeline": {"batch_size": 4, "shuffle_buffer": 8, "num_parallel_calls": 2}}


def test_tfds_classification_dir_reads_with_no_mapping(tfds_cls: Path) -> None:
    """Before: `feature 'image/encoded' is required but missing` (no manifest.json)."""
    cfg = _eval_cfg(tfds_cls)
    ds = build_pipeline(cfg, "validation", as_supervised=True)
    assert int(ds.cardinality()) == -(-N_VAL // 4)  # from dataset_info.json's shardLengths
    images, labels = zip(*[(x.numpy(), y.numpy()) for x, y in ds])
    images, labels = np.concatenate(images), np.concatenate(labels)
    want = _interleaved(tfds_cls, "validation")
    assert len(want) == N_VAL == len(labels)
    for got_img, got_label, ex in zip(images, labels, want):
        f = ex.features.feature
        assert got_label == f["label"].int64_list.value[0]
        assert np.array_equal(got_img, tf.io.decode_jpeg(f["image"].bytes_list.value[0],
                                                         channels=3).numpy())
    # class names (what export and preview label with): TFDS's own reader is the oracle
    info = tfds.builder_from_directory(str(tfds_cls)).info
    from tfpipe.pipeline.serving import class_names

    assert class_names(cfg) == info.features["label"].names == CLASSES


def test_tfds_train_cardinality_and_exact_resume(tfds_cls: Path) -> None:
    cfg = {"base": "imagenet", "seed": 7,
           "data": {"path": str(tfds_cls), "image_size": [24, 24]},
           "pipeline": {"batch_size": 4, "shuffle_buffer": 16, "num_parallel_calls": 2}}
    ds = build_pipeline(cfg, "train", as_supervised=True)
    full = list(ds)
    assert len(full) == int(ds.cardinality()) == N_TRAIN // 4  # shardLengths' count
    resumed = [b for b in build_pipeline(cfg, "train", as_supervised=True, step=2)]
    assert len(resumed) == len(full) - 2
    for (x0, y0), (x1, y1) in zip(full[2:], resumed):
        assert np.array_equal(x0.numpy(), x1.numpy()) and np.array_equal(y0.numpy(), y1.numpy())
    labels = sorted(int(v) for _, y in full for v in y.numpy())
    assert labels == sorted(i % len(CLASSES) for i in range(N_TRAIN))


def test_tfds_damaged_shard_skip_counts_it_raise_raises(tfds_cls: Path, tmp_path: Path,
                                                        capfd) -> None:
    d = tmp_path / "copy"
    shutil.copytree(tfds_cls, d)
    shard = _shards(d, "validation")[1]
    offsets = [off for _, off, _ in iter_frames(shard)]
    data = bytearray(shard.read_bytes())
    data[offsets[1] + 40] ^= 0xFF  # inside record 1's payload: its CRC fails
    shard.write_bytes(bytes(data))
    reset_skipped_counts()
    got = sum(len(y) for _, y in build_pipeline(_eval_cfg(d), "validation", as_supervised=True))
    lost = skipped_counts()
    assert lost == {str(shard): 1} and got == N_VAL - 1  # resynchronised after it
    assert framing_losses()[str(shard)]["records_read"] == 1
    assert f"framing damage in shard {shard}" in capfd.readouterr().err
    cfg = _eval_cfg(d)
    cfg["pipeline"]["on_error"] = "raise"
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"framing damage in shard {shard}"):
        for _ in build_pipeline(cfg, "validation"):
            pass


def test_tfds_detection_dir_boxes_and_labels(tfds_det: Path) -> None:
    ds = build_pipeline(_eval_cfg(tfds_det, base="detection"), "validation")
    assert int(ds.cardinality()) == 8 // 4
    batches = list(ds)
    want = _interleaved(tfds_det, "validation")
    rows = [(b, k) for b in batches for k in range(int(b["image"].shape[0]))]
    assert len(rows) == len(want) == 8
    assert sum(int(n) for b in batches for n in b["num_boxes"]) > 4  # boxes are there
    for (b, k), ex in zip(rows, want):
        f = ex.features.feature
        boxes = np.asarray(f["objects/bbox"].float_list.value, np.float32).reshape(-1, 4)
        n = int(b["num_boxes"][k])
        assert n == len(boxes)
        np.testing.assert_allclose(b["boxes"][k][:n].numpy(), boxes, atol=1e-6)
        assert b["classes"][k][:n].numpy().tolist() == list(f["objects/label"].int64_list.value)
        assert np.array_equal(b["image"][k].numpy(), tf.io.decode_jpeg(
            f["image"].bytes_list.value[0], channels=3).numpy())


# --------------------------------------------------------------------- custom keys
def _example(feats: dict) -> bytes:
    def one(v):
        if isinstance(v, bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))
        v = np.atleast_1d(v)
        if v.dtype.kind == "f":
            return tf.train.Feature(float_list=tf.train.FloatList(value=v.tolist()))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v.tolist()))

    return tf.train.Example(features=tf.train.Features(
        feature={k: one(v) for k, v in feats.items()})).SerializeToString()


def _write(path: Path, records: list[bytes]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as w:
        for r in records:
            w.write(r)
    return str(path)


@pytest.fixture(scope="module")
def foreign(tmp_path_factory) -> tuple[str, str]:
    """The same 8 images and boxes twice: foreign keys (one-key xyxy boxes in
    pixels, `cls`, `img`) and tfpipe's own keys (normalized, per coordinate)."""
    root = tmp_path_factory.mktemp("foreign")
    theirs, ours = [], []
    for i, data in enumerate(_jpegs(8, seed=9)):
        yxyx = np.asarray(_boxes(i + 1), np.float32).reshape(-1, 4)
        scale = np.asarray([H, W, H, W], np.float32)
        pixels_xyxy = (yxyx * scale)[:, [1, 0, 3, 2]]
        norm = pixels_xyxy[:, [1, 0, 3, 2]] / scale  # what tfpipe must compute, in float32
        labels = np.arange(len(yxyx)) % 2
        theirs.append(_example({"img": data, "cls": i % 3, "bb": pixels_xyxy.ravel(),
                                "bb_cls": labels, "name": f"{i}.jpg".encode()}))
        own = {"image/encoded": data, "image/class/label": i % 3,
               "image/object/class/label": labels}
        for c, k in enumerate(("ymin", "xmin", "ymax", "xmax")):
            own[f"image/object/bbox/{k}"] = norm[:, c]
        ours.append(_example(own))
    return (_write(root / "theirs" / "val-00000-of-00001.tfrecord", theirs),
            _write(root / "ours" / "val-00000-of-00001.tfrecord", ours))


KEYS = {"image": "img", "label": "cls", "boxes": "bb", "box_format": "xyxy",
        "box_units": "pixels", "box_labels": "bb_cls", "filename": "name"}


def test_custom_keys_give_the_batches_of_tfpipe_keys(foreign) -> None:
    """Foreign keys through `data.keys` (one-key xyxy boxes in pixels) == the same
    data under tfpipe's own keys (normalized, per coordinate), bit for bit.
    (Classification through a mapping: the TFDS tests above.)"""
    theirs, ours = foreign
    got = list(build_pipeline(_eval_cfg(theirs, "detection", keys=KEYS), "val"))
    want = list(build_pipeline(_eval_cfg(ours, "detection"), "val"))
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        assert set(g) == set(w)
        for k in g:
            assert np.array_equal(g[k].numpy(), w[k].numpy()), k


@pytest.mark.parametrize("keys,match", [
    ({"image": "img", "label": "klass"},
     r"data\.keys\.label: key 'klass' is not in the records of .*theirs.*the label role "
     r"needs int64 scalar.*The records have: bb \(float32 list\), .*cls \(int64 scalar\), "
     r"img \(string scalar\)"),
    ({"image": "img", "label": "name"},
     r"data\.keys\.label: key 'name' is string scalar in the records of .*, the label role "
     r"needs int64 scalar.*The records have: .*img \(string scalar\)"),
    ({"image": "img", "label": "cls", "mask": "img"},
     r"data\.keys\.mask: .* does not use the mask role \(data\.task 'segmentation' reads it"),
    ({"image": "img", "label": "cls", "keypoints": "bb"},
     r"data\.keys\.keypoints: .* does not use the keypoints role \(data\.keypoints reads "
     r"tfpipe's own keys image/object/keypoint/"),
])
def test_wrong_mapping_names_key_role_and_types(foreign, keys: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_pipeline(_eval_cfg(foreign[0], keys=keys), "val")


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
def test_pixel_boxes_divide_by_height_width_keys_or_the_image_header(fmt: str) -> None:
    """`box_units: pixels`: by the mapped height/width keys when given, else by the
    size in the encoded image's header (PNG's IHDR, JPEG's SOF); oracle: NumPy."""
    from tfpipe import sample_data
    from tfpipe.pipeline._keys import BOX_KEYS, KeyedParse, resolve
    from tfpipe.records import schema_from_example

    img = np.zeros((30, 50, 3), np.uint8)
    boxes = np.asarray([[5, 10, 25, 40], [0, 0, 30, 50]], np.float32)  # yxyx pixels
    rec = _example({"im": sample_data.encode(img, fmt), "b": boxes.ravel(),
                    "c": np.asarray([1, 0]), "hh": 60, "ww": 100})
    schema = schema_from_example(rec)
    for hw, scale in (({}, [30, 50, 30, 50]), ({"height": "hh", "width": "ww"},
                                               [60, 100, 60, 100])):
        keys = {"image": "im", "boxes": "b", "box_units": "pixels", "box_labels": "c", **hw}
        parse = KeyedParse(resolve(keys, None, schema, "detection", "test"))
        got = parse(tf.constant(rec))
        want = boxes / np.asarray(scale, np.float32)
        assert np.array_equal(np.stack([got[k].numpy() for k in BOX_KEYS], -1), want)
        assert got["image/object/class/label"].numpy().tolist() == [1, 0]


@pytest.mark.parametrize("keys,match", [
    ({"imgae": "x"}, r"data\.keys\.imgae: unknown key \(did you mean 'image'\?\); allowed: "
                     r"image, label, class_text, boxes, box_format, box_units, box_labels, "
                     r"mask, keypoints, height, width, filename"),
    ({"box_format": "xyxy"}, r"data\.keys\.box_format/\.box_units: describe `boxes`"),
    ({"boxes": {"ymin": "a", "xmin": "b", "ymax": "c", "xmax": "d"}, "box_format": "xyxy"},
     r"data\.keys\.box_format: only for boxes in ONE key"),
    ({"box_units": "inches", "boxes": "b"}, r"data\.keys\.box_units: .*'normalized'.*'pixels'"),
])
def test_keys_config_errors_name_the_allowed_values(keys: dict, match: str) -> None:
    from tfpipe.config import load_config

    with pytest.raises(ConfigError, match=match):
        load_config({"data": {"path": "x", "keys": keys}})


def test_own_records_page_examples(tfds_cls: Path, tfds_det: Path, foreign) -> None:
    """docs/own-records.md: every YAML config of its TFDS / Model Garden / own-keys
    sections loads; the own-keys mapping resolves against records of that shape;
    the derived mappings its table states are what real TFDS dirs give."""
    import re

    import yaml

    from tfpipe.config import load_config
    from tfpipe.pipeline._keys import resolve
    from tfpipe.records import schema_from_example, tfds_manifest

    page = (Path(__file__).resolve().parents[2] / "docs" / "own-records.md").read_text()
    ours = page.split("\n## Shards from another tool")[0]  # later sections: shards, globs, adopt
    configs = [load_config(yaml.safe_load(b)) for b in re.findall(r"```yaml\n(.*?)```", ours,
                                                                  re.S)]
    assert len(configs) == 7
    custom = next(c for c in configs if c.data.keys and c.data.keys.boxes == "bb")
    first = next(iter(tf.data.TFRecordDataset(foreign[0]))).numpy()
    plan = resolve(custom.data.keys.mapped(), None, schema_from_example(first), "detection",
                   "doc")
    assert plan.keys["boxes"] == "bb" and (plan.box_format, plan.box_units) == ("xyxy", "pixels")
    four = next(c for c in configs if c.data.keys and not isinstance(c.data.keys.boxes, str)
                and c.data.keys.boxes is not None)
    assert four.data.keys.boxes.ymin == "box/y0"
    derived = {"cls": tfds_manifest(tfds_cls).source["keys"],
               "det": tfds_manifest(tfds_det).source["keys"]}
    assert derived == {
        "cls": {"image": "image", "label": "label", "filename": "file_name"},
        "det": {"image": "image", "boxes": "objects/bbox", "box_format": "yxyx",
                "box_units": "normalized", "box_labels": "objects/label"}}
    row = lambda keys: ", ".join(f"`{k}: {v}`" for k, v in keys.items())  # noqa: E731
    assert row(derived["cls"]) in page and row(derived["det"]) in page


def test_tfds_dataset_hash_follows_its_metadata(tfds_cls: Path, tmp_path: Path) -> None:
    """The resume check's data identity (`tfpipe.train.dataset_hash`) of a TFDS dir
    is its dataset_info.json (shardLengths, numBytes): a re-prepared dataset shows."""
    from tfpipe.train import dataset_hash

    d = tmp_path / "copy"
    shutil.copytree(tfds_cls, d)
    cfg = {"data": {"path": str(d)}}
    before = dataset_hash(cfg)
    assert before == dataset_hash({"data": {"path": str(tfds_cls)}})
    info = d / "dataset_info.json"
    meta = json.loads(info.read_text())
    meta["splits"][0]["shardLengths"][0] = "1"  # a shard re-prepared with other records
    info.write_text(json.dumps(meta))
    assert dataset_hash(cfg) != before and before.startswith("manifest:")


def test_check_and_inspect_read_a_tfds_dir(tfds_cls: Path) -> None:
    """`tfpipe check` compares a TFDS directory's shards with its metadata's counts and
    scans its labels under TFDS's key (before: records skipped, 'no manifest.json'),
    and `tfpipe inspect` reads its splits from the metadata."""
    from click.testing import CliRunner

    from tfpipe.cli.main import cli

    res = CliRunner().invoke(cli, ["check", "imagenet", "--set", f"data.path={tfds_cls}",
                                   "--set", "data.image_size=[24,24]",
                                   "--set", "pipeline.batch_size=4",
                                   "--only", "records", "--only", "labels"])
    assert res.exit_code == 0, res.output
    assert f"every record the manifest lists is read (train {N_TRAIN} of {N_TRAIN}" \
        in res.output, res.output
    res = CliRunner().invoke(cli, ["inspect", str(tfds_cls), "--json"])
    assert res.exit_code == 0, res.output
    assert str(N_TRAIN) in res.output
