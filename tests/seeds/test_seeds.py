"""tfpipe.seeds: determinism, distinctness, graph-mode use, stateless-only graphs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import seeds


def _np(t: tf.Tensor) -> np.ndarray:
    return np.asarray(t)


def test_shapes_and_dtypes() -> None:
    g = seeds.global_seed(7)
    for s in (g, seeds.epoch_seed(g, 1), seeds.batch_seed(seeds.epoch_seed(g, 1), 3),
              seeds.sample_seed(seeds.epoch_seed(g, 1), 3), seeds.op_seed(g, 2)):
        assert s.dtype == tf.int64
        assert s.shape == (2,)


def test_global_seed_formula_and_validation() -> None:
    np.testing.assert_array_equal(_np(seeds.global_seed(5)), [seeds.GLOBAL_TAG, 5])
    np.testing.assert_array_equal(_np(seeds.global_seed(tf.constant(5))), [seeds.GLOBAL_TAG, 5])
    for bad in (-1, 2**63, True):
        with pytest.raises((ValueError, TypeError), match="seed must be an integer"):
            seeds.global_seed(bad)


def test_formula_matches_plain_fold_in() -> None:
    # Independent oracle: the documented formula written with tf's fold_in directly.
    fold = lambda s, d: tf.random.experimental.stateless_fold_in(  # noqa: E731
        tf.constant(s, tf.int64), tf.constant(d, tf.int64), alg="philox")
    g = [seeds.GLOBAL_TAG, 11]
    e = fold(g, 3)
    np.testing.assert_array_equal(_np(seeds.epoch_seed(g, 3)), _np(e))
    np.testing.assert_array_equal(_np(seeds.batch_seed(e, 9)), _np(fold(fold(e, seeds.BATCH_TAG), 9)))
    np.testing.assert_array_equal(_np(seeds.sample_seed(e, 9)), _np(fold(fold(e, seeds.SAMPLE_TAG), 9)))
    np.testing.assert_array_equal(_np(seeds.op_seed(e, 2)), _np(fold(fold(e, seeds.OP_TAG), 2)))


def test_deterministic_across_calls_and_index_dtypes() -> None:
    e1 = seeds.epoch_seed(seeds.global_seed(0), 4)
    e2 = seeds.epoch_seed(seeds.global_seed(0), tf.constant(4, tf.int32))
    np.testing.assert_array_equal(_np(e1), _np(e2))
    np.testing.assert_array_equal(_np(seeds.sample_seed(e1, 17)), _np(seeds.sample_seed(e2, np.int64(17))))


def test_distinct_streams() -> None:
    g = seeds.global_seed(0)
    e1, e2 = seeds.epoch_seed(g, 1), seeds.epoch_seed(g, 2)
    assert not np.array_equal(_np(e1), _np(e2))
    assert not np.array_equal(_np(seeds.global_seed(0)), _np(seeds.global_seed(1)))
    for k in range(5):
        assert not np.array_equal(_np(seeds.batch_seed(e1, k)), _np(seeds.sample_seed(e1, k)))
        assert not np.array_equal(_np(seeds.sample_seed(e1, k)), _np(seeds.sample_seed(e2, k)))
        assert not np.array_equal(_np(seeds.op_seed(e1, k)), _np(seeds.sample_seed(e1, k)))
    # Different seeds must also give different random draws, not only different words.
    a = tf.random.stateless_uniform([8], seed=seeds.batch_seed(e1, 0))
    b = tf.random.stateless_uniform([8], seed=seeds.sample_seed(e1, 0))
    assert not np.allclose(_np(a), _np(b))


def test_ten_thousand_sample_seeds_unique_and_first_words_unique() -> None:
    e = seeds.epoch_seed(seeds.global_seed(123), 0)
    ds = tf.data.Dataset.range(10_000).map(lambda i: seeds.sample_seed(e, i))
    ds = ds.map(lambda s: (s, tf.random.stateless_uniform([], seed=s, dtype=tf.float64)))
    all_seeds, draws = next(iter(ds.batch(10_000)))
    all_seeds, draws = _np(all_seeds), _np(draws)
    assert len({tuple(s) for s in all_seeds}) == 10_000
    # The whole 128-bit key differs, and so do the draws made from it.
    assert len(np.unique(draws)) == 10_000


def test_global_index_interleaves_workers_disjointly() -> None:
    num_workers = 3
    per_worker = [set(_np(seeds.global_index(tf.range(50), w, num_workers)).tolist()) for w in range(3)]
    assert all(len(s) == 50 for s in per_worker)
    assert not (per_worker[0] & per_worker[1]) and not (per_worker[1] & per_worker[2])
    assert set().union(*per_worker) == set(range(150))
    assert int(seeds.global_index(4, 2, 3)) == 14


def test_inside_dataset_map_equals_eager() -> None:
    e = seeds.epoch_seed(seeds.global_seed(9), 2)
    ds = tf.data.Dataset.range(64).map(lambda i: seeds.sample_seed(e, i),
                                       num_parallel_calls=4, deterministic=False)
    got = {tuple(s) for s in ds.as_numpy_iterator()}
    want = {tuple(_np(seeds.sample_seed(e, i))) for i in range(64)}
    assert got == want


def test_inside_tf_function_equals_eager() -> None:
    @tf.function
    def derive(seed: tf.Tensor, epoch: tf.Tensor, k: tf.Tensor) -> tf.Tensor:
        ep = seeds.epoch_seed(seeds.global_seed(seed), epoch)
        return seeds.op_seed(seeds.batch_seed(ep, k), 1)

    got = derive(tf.constant(5, tf.int64), tf.constant(1, tf.int64), tf.constant(7, tf.int64))
    want = seeds.op_seed(seeds.batch_seed(seeds.epoch_seed(seeds.global_seed(5), 1), 7), 1)
    np.testing.assert_array_equal(_np(got), _np(want))


def test_graph_contains_only_stateless_random_ops() -> None:
    @tf.function(input_signature=[tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.int64)])
    def derive(epoch: tf.Tensor, k: tf.Tensor) -> tf.Tensor:
        ep = seeds.epoch_seed(seeds.global_seed(3), epoch)
        return tf.stack([seeds.batch_seed(ep, k), seeds.op_seed(seeds.sample_seed(ep, k), 0)])

    graph = derive.get_concrete_function().graph
    op_types = {op.type for op in graph.get_operations()}
    random_ops = {t for t in op_types if "Random" in t or "Stateless" in t}
    assert random_ops, op_types
    assert all(t.startswith("Stateless") for t in random_ops), random_ops
    # No stateful generators or Python callbacks anywhere.
    assert not op_types & {"RandomUniform", "RandomStandardNormal", "RandomUniformInt",
                           "PyFunc", "EagerPyFunc", "StatefulUniform", "RngReadAndSkip"}
