"""What doctor says about tfpipe's own pipeline must be true of it (issue 22, item 11).

Two claims were false: that a corrupt record drops the rest of its file (tfpipe's
reader resynchronises past framing damage with the native library), and that a
function draws no random numbers when the draws sit in a nested library function
(tfpipe.seeds' Philox twin is one `tfpipe_philox_*` function every site calls).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tensorflow as tf

from tfpipe import doctor, native
from tfpipe import seeds as tfpipe_seeds
from tfpipe.config import load_config
from tfpipe.pipeline import build_pipeline
from tfpipe.pipeline._source import read_records

AUTOTUNE = tf.data.AUTOTUNE


def _found(ds: tf.data.Dataset) -> list[tuple[str, str | None]]:
    return sorted((f.rule, f.function) for f in doctor.check(ds, cpus=4, host_cpus=4))


def _draw_with_tfpipe_seeds(i: tf.Tensor) -> tf.Tensor:
    seeds = tf.stack([tf.stack([i, i + 1])])         # [1, 2] int64 rows
    return tfpipe_seeds.uniform_rows(seeds, [2])


def test_a_draw_in_a_nested_library_function_counts_as_random() -> None:
    # Oracle: the map's output changes with the seed, so it does draw random numbers.
    ds = tf.data.Dataset.range(8).map(_draw_with_tfpipe_seeds, num_parallel_calls=2,
                                      deterministic=True)
    a = [x.numpy().tolist() for x in ds.take(2)]
    assert a[0] != a[1]
    assert ("serial-determinism", "_draw_with_tfpipe_seeds") not in _found(ds.prefetch(2))


def test_a_function_without_draws_still_gets_the_finding() -> None:
    ds = tf.data.Dataset.range(8).map(lambda i: i * 2, num_parallel_calls=2,
                                      deterministic=True)
    assert ("serial-determinism", "lambda") in _found(ds.prefetch(2))


@pytest.fixture(scope="module")
def cifar_config(converted: dict[str, str]):
    return load_config("cifar", {"data.path": converted["classification"],
                                 "pipeline.batch_size": 2})


def test_tfpipe_block_map_is_not_called_draw_free(cifar_config) -> None:
    ds = build_pipeline(cifar_config, split="train")
    messages = [f.message for f in doctor.check(ds) if f.rule == "serial-determinism"]
    assert [m for m in messages if "draws no random numbers" in m
            and "whose function block" in m] == []


@pytest.mark.skipif(not native.available(), reason="resynchronising needs the native library")
def test_doctor_does_not_say_tfpipes_reader_drops_the_rest_of_a_file(
        converted: dict[str, str], tmp_path: Path) -> None:
    cfg = load_config("imagenet", {"data.path": converted["classification"],
                                   "pipeline.batch_size": 2})
    found = doctor.check(build_pipeline(cfg, split="train"))
    assert [f.message for f in found if f.rule == "ignore-errors"] == []

    # ... and it is true: framing damage in the middle of a shard loses only the
    # damaged record; the ones after it are read (tf.data's own reader stops).
    data = tmp_path / "data"
    shutil.copytree(converted["classification"], data)
    shard = sorted(data.glob("train-*.tfrecord"))[0]
    raw = bytearray(shard.read_bytes())
    total = sum(1 for _ in tf.data.TFRecordDataset(str(shard)))
    first_len = int.from_bytes(raw[:8], "little")
    raw[16 + first_len + 12 + 5] ^= 0xFF               # payload of record 1: data CRC fails
    shard.write_bytes(bytes(raw))
    plain = 0
    try:
        for _ in tf.data.TFRecordDataset(str(shard)):
            plain += 1
    except tf.errors.DataLossError:
        pass
    assert plain == 1
    got = sum(1 for _ in read_records([str(shard)], None, 1))
    assert got == total - 1
