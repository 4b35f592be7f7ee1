"""The pipeline declares its length from the manifest, so Keras shows real
progress and never warns "Your input ran out of data" on a correct run; under
`on_error: skip` a pass with skipped records ends after its real batches (no
sample repeated or invented) and one line reports the shortfall."""

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


def _shard_of(path: Path, split: str, record: int) -> str:
    """The shard file holding record `record` of `split` (the writer fills shards in order)."""
    shards = sorted(str(p) for p in path.glob(f"{split}-*.tfrecord"))
    ends = np.cumsum(_records_of(path, split))
    return shards[int(np.searchsorted(ends, record, side="right"))]


def _shortfall_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "ended after" in line]


def test_skip_train_epoch_ends_short_and_never_repeats(dirty: Path, capfd) -> None:
    """3 of 45 train records do not decode: the 42 good samples make 10 batches of
    4 and the epoch ends there (the manifest's 11 stays the declared length).
    Every sample at most once per epoch; each bad record counted once per epoch,
    under its own shard; one line per short epoch says so."""
    reset_skipped_counts()
    capfd.readouterr()
    train = build_pipeline(_cfg(dirty, **{"pipeline.on_error": "skip"}), "train",
                           keep_index=True)
    assert int(train.cardinality()) == N_TRAIN // 4
    for _ in range(2):  # two epochs: no cardinality error, no top-up
        epoch = [b["index"].numpy() for b in train]
        assert [len(b) for b in epoch] == [4] * ((N_TRAIN - len(BAD["train"])) // 4)
        seen = np.concatenate(epoch)
        assert len(set(seen.tolist())) == len(seen) == 40
    want: dict[str, int] = {}
    for r in BAD["train"]:
        want[_shard_of(dirty, "train", r)] = want.get(_shard_of(dirty, "train", r), 0) + 2
    assert skipped_counts() == want
    lines = _shortfall_lines(capfd.readouterr().err)
    assert len(lines) == 2, lines
    for line in lines:
        assert "10 of the 11 batches" in line and "3 records skipped" in line, line
        for shard in want:
            assert Path(shard).name in line, line


def test_skip_eval_short_pass_ends_without_empty_batches(dirty: Path, capfd) -> None:
    # 11 good of 13 val records: 3 batches (4, 4, 3), declared 4: the pass ends after 3
    reset_skipped_counts()
    capfd.readouterr()
    val = build_pipeline(_cfg(dirty, **{"pipeline.on_error": "skip"}), "val")
    assert int(val.cardinality()) == math.ceil(N_VAL / 4)
    for _ in range(2):  # every pass, no cardinality error
        sizes = [int(b["label"].shape[0]) for b in val]
        assert sizes == [4, 4, 3]
    assert sum(skipped_counts().values()) == 2 * len(BAD["val"])
    lines = _shortfall_lines(capfd.readouterr().err)
    assert len(lines) == 2 and all("3 of the 4 batches" in x for x in lines), lines


def test_keras_fit_and_evaluate_on_skipped_records(dirty: Path) -> None:
    """model.fit trains each good sample once per epoch (10 steps, not 11) and
    goes on to the next epoch; model.evaluate's loss is the mean over the 11 val
    samples that decode (oracle: NumPy on the model's logits for those samples)."""
    import keras

    cfg = _cfg(dirty, **{"pipeline.on_error": "skip"})
    train = build_pipeline(cfg, "train", as_supervised=True)
    val = build_pipeline(cfg, "val", as_supervised=True)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.GlobalAveragePooling2D(),
                              keras.layers.Dense(CLASSES)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    steps: list[int] = []

    class Steps(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            steps.append(0)

        def on_train_batch_end(self, batch, logs=None):
            steps[-1] += 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Keras: "Your input ran out of data" (documented)
        history = model.fit(train, validation_data=val, epochs=3, verbose=0,
                            callbacks=[Steps()])
        got = model.evaluate(val, verbose=0)
    assert steps == [10, 10, 10]
    assert len(history.history["loss"]) == 3
    assert np.all(np.isfinite(history.history["loss"] + history.history["val_loss"]))
    x = np.concatenate([b[0].numpy() for b in val])
    y = np.concatenate([b[1].numpy() for b in val])
    assert len(y) == N_VAL - len(BAD["val"])
    logits = model(x).numpy().astype(np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) \
        - logits.max(1, keepdims=True)
    want = -logp[np.arange(len(y)), y].mean()
    assert got == pytest.approx(want, rel=1e-5)


def test_manifest_that_lists_more_records_ends_the_pass_and_says_so(
        tmp_path: Path, clean: Path, capfd) -> None:
    """A manifest edited from 45 to 57 train records: nothing skipped, the shards
    hold 45 (11 batches, declared 14): the pass ends after 11, no sample repeated,
    and one line says the shards hold fewer records than the manifest lists."""
    import shutil

    try:
        from .bad_data import edit_count
    except ImportError:
        from bad_data import edit_count  # type: ignore[no-redef]

    data = tmp_path / "d"
    shutil.copytree(clean, data)
    edit_count(data, "train", 0, 12)
    capfd.readouterr()
    train = build_pipeline(_cfg(data, **{"pipeline.on_error": "skip"}), "train",
                           keep_index=True)
    assert int(train.cardinality()) == (N_TRAIN + 12) // 4
    seen = np.concatenate([b["index"].numpy() for b in train])
    assert len(seen) == 44 and len(set(seen.tolist())) == 44
    lines = _shortfall_lines(capfd.readouterr().err)
    assert len(lines) == 1 and "11 of the 14 batches" in lines[0], lines
    assert "no record was skipped" in lines[0] and "manifest" in lines[0], lines


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
