"""A gallery of small pipelines, each with ONE known anti-pattern and its fixed twin.

Every entry: (rule id, builder, check kwargs). A builder takes the paths of tiny
TFRecord files (Examples with a float feature "x" of length 4) and a scratch
directory, and returns (bad dataset, clean dataset).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE
FEATURES = {"x": tf.io.FixedLenFeature([4], tf.float32)}


def numbers(n: int = 64) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(np.arange(n * 4, dtype=np.float32).reshape(n, 4))


def images(n: int = 32) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(np.zeros((n, 8, 8, 3), np.float32))


def read(files: list[str]) -> tf.data.Dataset:
    """The right way to read shards: parallel interleave."""
    return tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TFRecordDataset, cycle_length=len(files), num_parallel_calls=AUTOTUNE)


def parse_one(record):
    return tf.io.parse_single_example(record, FEATURES)["x"]


# ---- the user functions doctor must name ----------------------------------------------
def my_augment(x):
    return tf.numpy_function(lambda v: v * 2, [x], tf.float32)


def tf_augment(x):
    return x * 2.0


@tf.function
def nested_helper(x):
    return tf.py_function(lambda v: v + 1, [x], tf.float32)


def outer_fn(x):
    return tf.cond(tf.reduce_sum(x) > 0, lambda: nested_helper(x), lambda: x)


def random_augment(image):
    image = tf.image.random_brightness(image, 0.2)
    return tf.image.random_flip_left_right(image)


def stateless_augment(index, image):
    seed = tf.stack([tf.constant(7, tf.int64), index])
    return tf.image.stateless_random_brightness(image, 0.2, seed=seed)


TABLE = tf.lookup.StaticHashTable(
    tf.lookup.KeyValueTensorInitializer(tf.constant([0, 1], tf.int64),
                                        tf.constant([5, 6], tf.int64)), default_value=-1)


def preprocess(image):
    # A label lookup makes the function stateful, so tf.data cannot auto-parallelize it.
    label = TABLE.lookup(tf.constant(1, tf.int64))
    image = tf.image.resize(image, [16, 16])
    return tf.image.adjust_contrast(image, 1.2), label


FLIP = tf.keras.layers.RandomFlip("horizontal")


def keras_augment(image):
    return FLIP(image)


def plain(x):
    return x + 1.0


def gen():
    for i in range(8):
        yield np.float32(i)


# ---- the gallery -------------------------------------------------------------------------
@dataclass
class Case:
    id: str
    rule: str
    build: Callable[[list[str], str], tuple[tf.data.Dataset, tf.data.Dataset]]
    kwargs: dict[str, Any] = field(default_factory=dict)
    function: str | None = None  # expected Finding.function on the bad pipeline


def _py(files, tmp):
    bad = numbers().map(my_augment, num_parallel_calls=AUTOTUNE).batch(8).prefetch(AUTOTUNE)
    clean = numbers().map(tf_augment, num_parallel_calls=AUTOTUNE).batch(8).prefetch(AUTOTUNE)
    return bad, clean


def _py_nested(files, tmp):
    bad = numbers().map(outer_fn, num_parallel_calls=AUTOTUNE).batch(8).prefetch(AUTOTUNE)
    clean = numbers().map(plain, num_parallel_calls=AUTOTUNE).batch(8).prefetch(AUTOTUNE)
    return bad, clean


def _stateful(files, tmp):
    bad = images().map(random_augment, num_parallel_calls=AUTOTUNE).batch(4).prefetch(AUTOTUNE)
    clean = (images().enumerate().map(stateless_augment, num_parallel_calls=AUTOTUNE)
             .batch(4).prefetch(AUTOTUNE))
    return bad, clean


def _keras_seed(files, tmp):
    bad = images().map(keras_augment, num_parallel_calls=AUTOTUNE).batch(4).prefetch(AUTOTUNE)
    clean = (images().enumerate().map(stateless_augment, num_parallel_calls=AUTOTUNE)
             .batch(4).prefetch(AUTOTUNE))
    return bad, clean


def _to_device(files, tmp):
    bad = numbers().batch(8).apply(tf.data.experimental.prefetch_to_device("/cpu:0"))
    clean = numbers().batch(8).prefetch(2)
    return bad, clean


def _cache_random(files, tmp):
    bad = (images().enumerate().map(stateless_augment, num_parallel_calls=AUTOTUNE).cache()
           .batch(4).prefetch(AUTOTUNE))
    clean = (images().enumerate().cache().map(stateless_augment, num_parallel_calls=AUTOTUNE)
             .batch(4).prefetch(AUTOTUNE))
    return bad, clean


def _cache_shuffle(files, tmp):
    bad = numbers().shuffle(64).cache().batch(4).prefetch(AUTOTUNE)
    clean = numbers().cache().shuffle(64).batch(4).prefetch(AUTOTUNE)
    return bad, clean


def _shuffle_batch(files, tmp):
    bad = numbers().batch(4).shuffle(16).prefetch(AUTOTUNE)
    clean = numbers().shuffle(64).batch(4).prefetch(AUTOTUNE)
    return bad, clean


def _small_buffer(files, tmp):
    bad = numbers(1000).shuffle(16).batch(8).prefetch(AUTOTUNE)
    clean = numbers(1000).shuffle(200).batch(8).prefetch(AUTOTUNE)
    return bad, clean


def _buffer_one(files, tmp):
    bad = numbers(1000).shuffle(1).batch(8).prefetch(AUTOTUNE)
    clean = numbers(1000).shuffle(1000).batch(8).prefetch(AUTOTUNE)
    return bad, clean


def _prefetch_middle(files, tmp):
    bad = numbers().batch(8).prefetch(AUTOTUNE).map(plain, num_parallel_calls=AUTOTUNE)
    clean = numbers().batch(8).map(plain, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)
    return bad, clean


def _no_prefetch(files, tmp):
    bad = numbers().batch(8)
    # Free ops after the prefetch (options, take) do not count.
    clean = numbers().batch(8).prefetch(AUTOTUNE).with_options(tf.data.Options()).take(4)
    return bad, clean


def _sequential(files, tmp):
    bad = images().map(preprocess).batch(4).prefetch(AUTOTUNE)
    clean = images().map(preprocess, num_parallel_calls=AUTOTUNE).batch(4).prefetch(AUTOTUNE)
    return bad, clean


def _no_interleave(files, tmp):
    bad = tf.data.TFRecordDataset(files).map(parse_one, num_parallel_calls=AUTOTUNE).prefetch(2)
    clean = read(files).map(parse_one, num_parallel_calls=AUTOTUNE).prefetch(2)
    return bad, clean


def _repeat_shuffle(files, tmp):
    bad = numbers().repeat(2).shuffle(64).batch(4).prefetch(AUTOTUNE)
    clean = numbers().shuffle(64).repeat(2).batch(4).prefetch(AUTOTUNE)
    return bad, clean


def _cache_big(files, tmp):
    bad = images(64).cache().batch(4).prefetch(AUTOTUNE)  # 64 x 768 B = 48 KiB
    clean = images(64).cache(f"{tmp}/cache").batch(4).prefetch(AUTOTUNE)
    return bad, clean


def _cache_infinite(files, tmp):
    bad = numbers().repeat().cache().batch(4).prefetch(AUTOTUNE)
    clean = numbers().cache().repeat().batch(4).prefetch(AUTOTUNE)
    return bad, clean


def _oversubscribed(files, tmp):
    bad = numbers().map(plain, num_parallel_calls=64).batch(4).prefetch(AUTOTUNE)
    clean = numbers().map(plain, num_parallel_calls=8).batch(4).prefetch(AUTOTUNE)
    return bad, clean


def _quota(files, tmp):
    bad = numbers().map(plain, num_parallel_calls=AUTOTUNE).batch(4).prefetch(AUTOTUNE)
    opts = tf.data.Options()
    opts.threading.private_threadpool_size = 2
    clean = bad.with_options(opts)
    return bad, clean


def _determinism(files, tmp):
    bad = (numbers().map(plain, num_parallel_calls=AUTOTUNE, deterministic=True)
           .batch(4).prefetch(AUTOTUNE))
    clean = numbers().map(plain, num_parallel_calls=AUTOTUNE).batch(4).prefetch(AUTOTUNE)
    return bad, clean


def _unbatched_parse(files, tmp):
    bad = read(files).map(parse_one, num_parallel_calls=AUTOTUNE).batch(4).prefetch(2)
    clean = (read(files).batch(4)
             .map(lambda r: tf.io.parse_example(r, FEATURES)["x"], num_parallel_calls=AUTOTUNE)
             .prefetch(2))
    return bad, clean


def _ignore_errors(files, tmp):
    bad = read(files).ignore_errors().batch(4).prefetch(2)
    clean = read(files).batch(4).prefetch(2)
    return bad, clean


def read_tolerant(path):
    return tf.data.TFRecordDataset(path).ignore_errors()


def _ignore_errors_per_file(files, tmp):
    bad = (tf.data.Dataset.from_tensor_slices(files)
           .interleave(read_tolerant, cycle_length=3, num_parallel_calls=AUTOTUNE)
           .batch(4).prefetch(2))
    clean = read(files).batch(4).prefetch(2)
    return bad, clean


def _generator(files, tmp):
    bad = tf.data.Dataset.from_generator(
        gen, output_signature=tf.TensorSpec([], tf.float32)).batch(4).prefetch(2)
    clean = tf.data.Dataset.range(8).map(
        lambda i: tf.cast(i, tf.float32), num_parallel_calls=AUTOTUNE).batch(4).prefetch(2)
    return bad, clean


GALLERY: list[Case] = [
    Case("py_function", "python-in-map", _py, function="my_augment"),
    Case("py_function_nested", "python-in-map", _py_nested, function="outer_fn"),
    Case("stateful_random", "stateful-random", _stateful, function="random_augment"),
    Case("keras_random_layer", "stateful-random-seed", _keras_seed, function="keras_augment"),
    Case("cache_after_augment", "cache-after-random", _cache_random),
    Case("cache_after_shuffle", "cache-after-random", _cache_shuffle),
    Case("shuffle_after_batch", "shuffle-after-batch", _shuffle_batch),
    Case("small_shuffle_buffer", "small-shuffle-buffer", _small_buffer),
    Case("shuffle_buffer_one", "small-shuffle-buffer", _buffer_one),
    Case("prefetch_in_middle", "prefetch-not-last", _prefetch_middle),
    Case("no_prefetch", "prefetch-not-last", _no_prefetch),
    Case("sequential_map", "sequential-map", _sequential, function="preprocess"),
    Case("files_read_sequentially", "no-interleave", _no_interleave),
    Case("repeat_before_shuffle", "repeat-before-shuffle", _repeat_shuffle),
    Case("cache_over_budget", "unbounded-cache", _cache_big, {"ram_budget_bytes": 16 << 10}),
    Case("cache_after_repeat", "unbounded-cache", _cache_infinite),
    Case("too_many_threads", "oversubscribed-threads", _oversubscribed),
    Case("autotune_under_quota", "oversubscribed-threads", _quota,
         {"cpus": 2, "host_cpus": 16}),
    Case("deterministic_no_random", "serial-determinism", _determinism, function="plain"),
    Case("parse_per_record", "unbatched-parse", _unbatched_parse, function="parse_one"),
    Case("ignore_errors_on_files", "ignore-errors", _ignore_errors),
    Case("ignore_errors_per_file", "ignore-errors", _ignore_errors_per_file,
         function="read_tolerant"),
    Case("from_generator", "python-source", _generator),
    Case("prefetch_to_device", "unserializable", _to_device),
]
