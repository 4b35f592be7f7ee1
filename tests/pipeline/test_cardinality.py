"""The pipeline declares its length from the manifest (`assert_cardinality`), so
Keras shows real progress and never warns "Your input ran out of data" on a
correct run; under `on_error: skip` a pass still has exactly that many batches."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.errors import ConfigError, TfpipeError
from tfpipe.pipeline import batches_per_pass, build_pipeline, reset_skipped_counts, skipped_counts

try:
    from .conftest import CLASSES, base_config
except ImportError:  # imported by path
    from conftest import CLASSES, base_config  # type: ignore[no-redef]

N_TRAIN, N_VAL = 45, 13
# records whose image bytes are no image, in the dirty copy
BAD = {"train": (4, 9, 30), "val": (2, 11)}


def _write(out: Path, images, bad: dict[str, tuple[int, ...]] | None = None) -> Path:
    from tfpipe.records import (Manifest, ShardedWriter, ShardEntry, SplitInfo,
                                classification_schema, encode_example)

    schema = classification_schema()
    m = Manifest(schema=schema, class_names=[f"c{k}" for k in range(CLASSES)],
                 compression=None, source={"kind": "test"}, settings={})
    for split, n in (("train", N_TRAIN), ("val", N_VAL)):
        with ShardedWriter(out, split, 20_000, None) as w:  # several small shards
            for i in range(n):
                enc, fmt, img = images[i % len(images)]
                if i in (bad or {}).get(split, ()):
                    enc = b"\xff\xd8\xff\xe0 not a jpeg at all"
                w.write(encode_example({"image/encoded": enc, "image/format": fmt,
                                        "image/height": img.shape[0], "image/width": img.shape[1],
                                        "image/class/label": i % CLASSES}, schema))
        m.splits[split] = SplitInfo([ShardEntry.from_info(i, out) for i in w.infos], [])
    m.save(out)
    return out


@pytest.fixture(scope="module")
def clean(tmp_path_factory, images) -> Path:
    return _write(tmp_path_factory.mktemp("card"), images)


@pytest.fixture(scope="module")
def dirty(tmp_path_factory, images) -> Path:
    return _write(tmp_path_factory.mktemp("card_bad"), images, BAD)


def _cfg(path: Path | str, **over) -> dict:
    return base_config(str(path), **{"data.image_size": [16, 16], "pipeline.batch_size": 4,
                                     **over})


@pytest.fixture(scope="module")
def clean_train(clean: Path) -> tf.data.Dataset:
    """One train dataset for the module (a train build traces the whole augment graph)."""
    return build_pipeline(_cfg(clean), "train", as_supervised=True)


def _records_of(path: Path, split: str) -> list[int]:
    """Records per shard of `split`, counted by reading the files (not the manifest)."""
    shards = sorted(path.glob(f"{split}-*.tfrecord"))
    return [sum(1 for _ in tf.data.TFRecordDataset(str(f))) for f in shards]


@pytest.mark.slow
def test_cardinality_is_the_manifests_batches_and_what_a_pass_yields(
        clean: Path, clean_train: tf.data.Dataset) -> None:
    shards, val_shards = _records_of(clean, "train"), _records_of(clean, "val")
    assert sum(shards) == N_TRAIN and sum(val_shards) == N_VAL and len(shards) >= 3
    manifest = json.loads((clean / "manifest.json").read_text())
    assert [s["num_records"] for s in manifest["splits"]["train"]["shards"]] == shards

    # what a pass yields: two train epochs (each iteration is the next epoch), one eval pass
    assert int(clean_train.cardinality()) == N_TRAIN // 4  # drop_remainder: true
    for _ in range(2):
        assert sum(1 for _ in clean_train) == N_TRAIN // 4
    val = build_pipeline(_cfg(clean), "val")
    assert int(val.cardinality()) == math.ceil(N_VAL / 4)  # eval keeps the partial batch
    assert [int(b["label"].shape[0]) for b in val] == [4, 4, 4, 1]

    many = len(shards) + 1  # more workers than shards: elements are sharded
    cases = [  # (split, overrides, worker, expected batches)
        ("train", {"pipeline.drop_remainder": False}, None, math.ceil(N_TRAIN / 4)),
        ("train", {}, (1, 2), sum(shards[1::2]) // 4),  # file sharding: shards 1, 3, ...
        ("val", {}, (0, 2), math.ceil(sum(val_shards[0::2]) / 4)),
        ("train", {"pipeline.drop_remainder": False}, (2, many),
         math.ceil(len(range(2, N_TRAIN, many)) / 4)),
    ]
    for split, over, worker, want in cases:
        assert batches_per_pass(_cfg(clean, **over), split, worker) == want, (split, over, worker)
    # a worker's part smaller than one batch under drop_remainder: refused, not 0 batches
    part = len(range(0, N_TRAIN, many))
    assert part < 7
    with pytest.raises(ConfigError, match=f"pipeline.batch_size: 7 is more than the {part} "
                                          f"records of split 'train' \\(worker 0 of {many}'s"):
        batches_per_pass(_cfg(clean, **{"pipeline.batch_size": 7}), "train", (0, many))


def test_keras_fit_shows_progress_and_no_ran_out_of_data_warning(
        clean: Path, clean_train: tf.data.Dataset) -> None:
    import keras

    val = build_pipeline(_cfg(clean), "val", as_supervised=True)
    model = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.GlobalAveragePooling2D(),
                              keras.layers.Dense(CLASSES)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    seen: list[int] = []

    class Steps(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):  # the progress bar's target
            seen.append(self.params["steps"])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(clean_train, validation_data=val, epochs=2, verbose=0,
                            callbacks=[Steps()])
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "ran out of data" in m], messages
    assert seen == [N_TRAIN // 4] * 2  # known from the first epoch on
    assert len(history.history["loss"]) == 2 and len(history.history["val_loss"]) == 2


def test_skip_train_epoch_keeps_its_length_with_real_batches(dirty: Path) -> None:
    """3 of 45 train records do not decode: the epoch still has 45 // 4 = 11 batches
    (the 42 good samples make 10, the 11th is the epoch's first batch again)."""
    reset_skipped_counts()
    train = build_pipeline(_cfg(dirty, **{"pipeline.on_error": "skip"}), "train",
                           keep_index=True)
    assert int(train.cardinality()) == N_TRAIN // 4
    epoch = [b["index"].numpy() for b in train]  # no cardinality error
    assert len(epoch) == N_TRAIN // 4 and all(len(b) == 4 for b in epoch)
    first = np.concatenate(epoch[:-1])
    assert len(set(first.tolist())) == len(first) == 40  # each good sample at most once
    np.testing.assert_array_equal(epoch[-1], epoch[0])  # the top-up is real data
    assert sum(skipped_counts().values()) >= len(BAD["train"])


def test_skip_eval_short_pass_ends_with_empty_batches(dirty: Path) -> None:
    # 11 good of 13 val records: 3 batches (4, 4, 3); declared 4, so one empty batch
    val = build_pipeline(_cfg(dirty, **{"pipeline.on_error": "skip"}), "val")
    assert int(val.cardinality()) == math.ceil(N_VAL / 4)
    for _ in range(2):  # every pass, no cardinality error
        sizes = [int(b["label"].shape[0]) for b in val]
        assert sizes == [4, 4, 3, 0]
        assert sum(sizes) == N_VAL - len(BAD["val"])


def test_raise_declares_and_fails_on_the_record(dirty: Path) -> None:
    val = build_pipeline(_cfg(dirty, **{"pipeline.on_error": "raise"}), "val")
    assert int(val.cardinality()) == math.ceil(N_VAL / 4)
    with pytest.raises((tf.errors.InvalidArgumentError, TfpipeError)) as e:
        for _ in val:
            pass
    assert "record 2" in str(e.value) and "expected to contain" not in str(e.value)


def test_no_manifest_leaves_cardinality_unknown(tmp_path: Path, clean: Path) -> None:
    import shutil

    for f in clean.glob("val-*.tfrecord"):
        shutil.copy(f, tmp_path / f.name)
    cfg = _cfg(tmp_path / "val-*.tfrecord")  # a bare glob: no counts to trust
    assert int(build_pipeline(cfg, "val").cardinality()) == tf.data.UNKNOWN_CARDINALITY
    assert batches_per_pass(cfg, "val") is None
