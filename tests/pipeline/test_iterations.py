"""Two iterators of one dataset alive at once (issue 22, item 2).

Every iteration keeps its own state (the positions pending in the per-element
error isolation, the shortfall count of a pass): a second iterator taking
batches while a first is mid-epoch must change nothing in the first. Oracle:
fresh builds of each epoch, iterated alone. Data: a photo folder through
`tfpipe convert` (a manifest, so the cardinality is declared).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.pipeline import build_pipeline, reset_skipped_counts, skipped_counts

try:
    from .bad_data import converted_dataset
    from .conftest import base_config
except ImportError:  # imported by path
    from bad_data import converted_dataset  # type: ignore[no-redef]
    from conftest import base_config  # type: ignore[no-redef]

TRAIN_BATCHES = 10  # 40 train records (4 shards of 10) / batch 4


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return converted_dataset(tmp_path_factory.mktemp("iters"))


def _cfg(data, **over) -> dict:
    return base_config(str(data), **{"data.image_size": [24, 24], "pipeline.batch_size": 4,
                                     "pipeline.shuffle_buffer": 16, **over})


def _digest(batch) -> str:
    h = hashlib.sha256()
    for k in sorted(batch):
        h.update(k.encode() + np.asarray(batch[k]).tobytes())
    return h.hexdigest()[:16]


def _digests(ds) -> list[str]:
    return [_digest(b) for b in ds]


@pytest.fixture(scope="module")
def fresh(data) -> list[list[str]]:
    """Epochs 0 and 1, each from its own build, iterated alone."""
    return [_digests(build_pipeline(_cfg(data), epoch=e)) for e in range(2)]


@pytest.mark.parametrize("block", [True, False], ids=["block-path", "per-element"])
def test_interleaved_iterators_each_get_their_own_epoch(data, fresh, block):
    """Both ways a batch is made: the block path, and the per-element path with
    its table of pending positions."""
    from tfpipe.pipeline import _block

    assert [len(f) for f in fresh] == [TRAIN_BATCHES] * 2 and fresh[0] != fresh[1]
    with _block.forced(block):
        ds = build_pipeline(_cfg(data))
    a = iter(ds)
    got_a = [_digest(next(a)) for _ in range(3)]
    b = iter(ds)  # starts while `a` is mid-epoch: the next epoch
    got_b = [_digest(next(b)) for _ in range(2)]
    got_a += [_digest(x) for x in a]
    got_b += [_digest(x) for x in b]
    assert got_a == fresh[0]
    assert got_b == fresh[1]


def test_zip_of_a_dataset_with_itself(data, fresh):
    for _ in range(3):  # the shared-state race failed about every other run
        ds = build_pipeline(_cfg(data))
        pairs = list(tf.data.Dataset.zip((ds, ds)))
        assert [_digest(x) for x, _ in pairs] == fresh[0]
        assert [_digest(y) for _, y in pairs] == fresh[1]


def test_two_iterators_under_a_strategy(data, fresh):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    dist = strategy.experimental_distribute_dataset(build_pipeline(_cfg(data)))
    a = iter(dist)
    got_a = [_digest(next(a)) for _ in range(4)]
    b = iter(dist)
    got_b = [_digest(next(b)) for _ in range(3)]
    got_a += [_digest(x) for x in a]
    got_b += [_digest(x) for x in b]
    assert got_a == fresh[0] and got_b == fresh[1]


@pytest.mark.parametrize("block", [True, False], ids=["block-path", "per-element"])
def test_eval_iterators_interleaved_log_nothing(data, capfd, block):
    from tfpipe.pipeline import _block

    cfg = _cfg(data)
    one = _digests(build_pipeline(cfg, "val"))
    assert len(one) == 2  # 8 records
    capfd.readouterr()
    reset_skipped_counts()
    with _block.forced(block):
        val = build_pipeline(cfg, "val")
    a = iter(val)
    got_a = [_digest(next(a))]
    b = iter(val)
    got_b = [_digest(x) for x in b]
    got_a += [_digest(x) for x in a]
    assert got_a == one and got_b == one
    err = capfd.readouterr().err
    assert "bad record" not in err, err
    assert skipped_counts() == {}


def test_record_reader_keeps_each_shard_read_apart(tmp_path, images, capfd):
    """The reader counts each shard's (records, bytes) to find where framing
    damage stopped it; a second iterator starting on the same shard while a first
    is in it must not reset the first's count (which then "resynchronised" past
    damage that is not there: 64 records twice, and a false framing report)."""
    from tfpipe.pipeline._source import read_records

    try:
        from .conftest import _example, write_shards
    except ImportError:
        from conftest import _example, write_shards  # type: ignore[no-redef]

    recs = [_example(images[i % len(images)][0], images[i % len(images)][1], 0)
            for i in range(150)]
    (path,) = write_shards(tmp_path, "train", recs, 1)
    ds = read_records([path], None, 1)
    capfd.readouterr()
    a = iter(ds)
    got_a = [int(next(a)[1]) for _ in range(100)]
    b = iter(ds)
    got_b = [int(next(b)[1]) for _ in range(5)]
    got_a += [int(x[1]) for x in a]
    got_b += [int(x[1]) for x in b]
    assert got_a == list(range(150)) and got_b == list(range(150))
    assert "framing damage" not in capfd.readouterr().err
