"""tfpipe.seeds batched draws: bit-identical to TF's own per-seed Philox ops.

Oracle: TF's `stateless_fold_in` / `stateless_split` / `stateless_uniform` called
once per row in a Python loop (what the batched functions replace).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import seeds as S
from tfpipe.seeds import fold_rows, full_int_rows, split_rows, uniform_rows

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def _make_seeds() -> np.ndarray:
    rng = np.random.default_rng(1234)
    special = [
        [0, 0], [0, 1], [1, 0], [-1, -1], [I64_MIN, I64_MAX], [I64_MAX, I64_MIN],
        [I64_MIN, I64_MIN], [I64_MAX, I64_MAX], [-5, 12345], [2**32, 0], [2**32 - 1, 0],
        [0, 2**32], [0, 2**31], [S.GLOBAL_TAG, 42],
        # Pairs differing in one word (or one bit).
        [77, 1000], [77, 1001], [78, 1000], [77 | 2**62, 1000],
    ]
    rand = rng.integers(I64_MIN, I64_MAX, size=(64 - len(special), 2), dtype=np.int64, endpoint=True)
    return np.concatenate([np.array(special, np.int64), rand])


SEEDS = _make_seeds()  # [64, 2]
DATA = np.concatenate([[0, 1, -1, I64_MIN, I64_MAX], np.arange(59) * 7919 - 100]).astype(np.int64)
SHAPES = [(), (1,), (4,), (10,), (3, 5), (0,)]


def _bits(x) -> np.ndarray:
    """Exact comparison key: floats by their bit pattern (so -0.0 != 0.0 and NaN == NaN)."""
    x = np.asarray(x)
    return x.view(np.uint32) if x.dtype == np.float32 else x


def _assert_same(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert np.array_equal(_bits(got), _bits(want))


# --- per-row oracles -------------------------------------------------------------

def _oracle_fold(seeds: np.ndarray, data) -> np.ndarray:
    data = np.broadcast_to(np.asarray(data, np.int64), seeds.shape[:1])
    return np.stack([tf.random.experimental.stateless_fold_in(
        tf.constant(s), tf.constant(d, tf.int64), alg="philox").numpy() for s, d in zip(seeds, data)])


def _oracle_split(seeds: np.ndarray, num: int) -> np.ndarray:
    return np.stack([tf.cast(tf.random.experimental.stateless_split(tf.constant(s), num, alg="philox"),
                             tf.int64).numpy() for s in seeds])


def _oracle_uniform(seeds: np.ndarray, shape, lo, hi) -> np.ndarray:
    lo = np.broadcast_to(np.asarray(lo, np.float32), seeds.shape[:1])
    hi = np.broadcast_to(np.asarray(hi, np.float32), seeds.shape[:1])
    return np.stack([tf.random.stateless_uniform(
        shape, tf.constant(s), minval=tf.constant(a), maxval=tf.constant(b),
        dtype=tf.float32, alg="philox").numpy() for s, a, b in zip(seeds, lo, hi)])


def _oracle_full_int(seeds: np.ndarray, shape) -> np.ndarray:
    return np.stack([tf.random.stateless_uniform(
        shape, tf.constant(s), minval=None, maxval=None, dtype=tf.int64, alg="philox").numpy()
        for s in seeds])


@pytest.fixture(scope="module")
def oracle() -> dict:
    """Per-row TF results, computed once for the module (the expensive part)."""
    return {
        "fold7": _oracle_fold(SEEDS, 7),
        "fold_rows": _oracle_fold(SEEDS, DATA),
        "split2": _oracle_split(SEEDS, 2),
        "split4": _oracle_split(SEEDS, 4),
        "u10": _oracle_uniform(SEEDS, (10,), -0.25, 0.75),
    }


# --- exact equality ----------------------------------------------------------------

@pytest.mark.parametrize("data", [7, -1, I64_MIN, I64_MAX, S.SAMPLE_TAG])
def test_fold_rows_scalar_data(data) -> None:
    _assert_same(fold_rows(SEEDS, data), _oracle_fold(SEEDS, data))


def test_fold_rows_per_row_data_and_dtypes(oracle) -> None:
    _assert_same(fold_rows(tf.constant(SEEDS), tf.constant(DATA)), oracle["fold_rows"])
    # int32 data and python ints are cast to int64 first, like tfpipe.seeds.fold.
    _assert_same(fold_rows(SEEDS, tf.constant(7, tf.int32)), oracle["fold7"])
    _assert_same(fold_rows(SEEDS, np.full([64], 7, np.int32)), oracle["fold7"])


def test_fold_rows_matches_seeds_fold_chain() -> None:
    e = S.epoch_seed(S.global_seed(3), 2)
    idx = np.arange(20, dtype=np.int64)
    parents = np.repeat(S.sample_stream(e).numpy()[None], 20, axis=0)
    want = np.stack([S.sample_seed(e, int(i)).numpy() for i in idx])
    _assert_same(fold_rows(parents, idx), want)
    ops = np.stack([S.op_seed(w, 3).numpy() for w in want])
    _assert_same(fold_rows(fold_rows(want, S.OP_TAG), 3), ops)


@pytest.mark.parametrize("num", [1, 2, 3, 4])
def test_split_rows(num, oracle) -> None:
    want = oracle.get(f"split{num}")
    if want is None:
        want = _oracle_split(SEEDS, num)
    _assert_same(split_rows(SEEDS, num), want)


@pytest.mark.parametrize("shape", SHAPES)
def test_uniform_rows_shapes(shape) -> None:
    _assert_same(uniform_rows(SEEDS, shape, -2.5, 3.0), _oracle_uniform(SEEDS, shape, -2.5, 3.0))


@pytest.mark.parametrize("lo,hi", [(0.0, 1.0), (0.08, 1.0), (-0.4, 0.4), (0.75, 1.3333), (3, 3), (1e-8, 1e30)])
def test_uniform_rows_ranges(lo, hi) -> None:
    _assert_same(uniform_rows(SEEDS, (4,), lo, hi), _oracle_uniform(SEEDS, (4,), lo, hi))


def test_uniform_rows_default_and_per_row_range() -> None:
    _assert_same(uniform_rows(SEEDS, (3,)), _oracle_uniform(SEEDS, (3,), 0.0, 1.0))
    lo = np.linspace(-3, 1, 64).astype(np.float32)
    hi = lo + np.linspace(0.1, 5, 64).astype(np.float32)
    _assert_same(uniform_rows(SEEDS, (3, 5), tf.constant(lo), tf.constant(hi)),
                 _oracle_uniform(SEEDS, (3, 5), lo, hi))
    _assert_same(uniform_rows(SEEDS, (), lo, 2.0), _oracle_uniform(SEEDS, (), lo, 2.0))
    # float64 bounds are cast to float32 first, as the spec's oracle does.
    _assert_same(uniform_rows(SEEDS, (2,), np.float64(0.1), np.float64(0.7)),
                 _oracle_uniform(SEEDS, (2,), np.float32(0.1), np.float32(0.7)))


@pytest.mark.parametrize("shape", [(), (1,), (2,), (3,), (3, 5)])
def test_full_int_rows(shape) -> None:
    _assert_same(full_int_rows(SEEDS, shape), _oracle_full_int(SEEDS, shape))


def test_single_row_and_int32_seeds(oracle) -> None:
    _assert_same(fold_rows(SEEDS[:1], 7), oracle["fold7"][:1])
    _assert_same(uniform_rows(SEEDS[5:6], (10,), -0.25, 0.75), oracle["u10"][5:6])
    small = SEEDS[:8] % 1000  # fits int32: TF's scramble sign-extends like an int64 cast
    _assert_same(split_rows(tf.constant(small, tf.int32), 2), _oracle_split(small, 2))


def test_leading_dims_are_batch_dims(oracle) -> None:
    # [B, K, 2] seeds: row (b, k) equals the per-seed op on seeds[b, k].
    grid = oracle["split4"]  # [64, 4, 2]
    got = uniform_rows(grid, (10,), -0.25, 0.75)
    assert got.shape == (64, 4, 10)
    _assert_same(np.asarray(got).reshape(256, 10), _oracle_uniform(grid.reshape(256, 2), (10,), -0.25, 0.75))
    _assert_same(np.asarray(fold_rows(grid, 9)).reshape(256, 2), _oracle_fold(grid.reshape(256, 2), 9))


def test_one_word_differences_change_every_output() -> None:
    # Seeds 14..17 differ from row 14 in one word / one bit: all draws must differ.
    u = np.asarray(uniform_rows(SEEDS[14:18], (10,)))
    for i in (1, 2, 3):
        assert np.all(u[0] != u[i])


# --- graph mode: unknown batch size, tf.function, tf.data ------------------------------

def test_unknown_batch_in_tf_function(oracle) -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.int64), tf.TensorSpec([None], tf.int64)])
    def draw(s, d):
        f = fold_rows(s, d)
        u = uniform_rows(s, (10,), -0.25, 0.75)
        assert f.shape.as_list() == [None, 2] and u.shape.as_list() == [None, 10]
        return f, split_rows(s, 4), u

    for rows in (slice(0, 64), slice(3, 4), slice(10, 33)):
        f, sp, u = draw(SEEDS[rows], DATA[rows])
        _assert_same(f, oracle["fold_rows"][rows])
        _assert_same(sp, oracle["split4"][rows])
        _assert_same(u, oracle["u10"][rows])

    # Vectorized graph: no loops, callbacks or per-seed RNG kernels.
    graph = draw.get_concrete_function().graph
    op_types = {op.type for op in graph.get_operations()}
    banned = {"While", "StatelessWhile", "PyFunc", "EagerPyFunc", "StatefulPartitionedCall"}
    assert not op_types & banned
    assert not [t for t in op_types if t.startswith("StatelessRandom")]


def test_fully_unknown_shape_in_tf_function(oracle) -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int64)])
    def draw(s):
        return split_rows(s, 4), uniform_rows(s, (10,), -0.25, 0.75)

    sp, u = draw(SEEDS[:9])
    _assert_same(sp, oracle["split4"][:9])
    _assert_same(u, oracle["u10"][:9])
    with pytest.raises(tf.errors.InvalidArgumentError):
        draw(np.zeros([3, 4], np.int64))


def test_inside_dataset_map(oracle) -> None:
    ds = tf.data.Dataset.from_tensor_slices((SEEDS, DATA)).batch(24)  # last batch has 16 rows
    ds = ds.map(lambda s, d: (fold_rows(s, d), split_rows(s, 2), uniform_rows(s, (10,), -0.25, 0.75)),
                num_parallel_calls=2, deterministic=True)
    parts = list(ds.as_numpy_iterator())
    _assert_same(np.concatenate([p[0] for p in parts]), oracle["fold_rows"])
    _assert_same(np.concatenate([p[1] for p in parts]), oracle["split2"])
    _assert_same(np.concatenate([p[2] for p in parts]), oracle["u10"])


def test_empty_batch() -> None:
    assert fold_rows(np.zeros([0, 2], np.int64), 3).shape == (0, 2)
    assert uniform_rows(np.zeros([0, 2], np.int64), (10,)).shape == (0, 10)


# --- bad arguments ---------------------------------------------------------------------

def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"shape \[\.\.\., 2\]"):
        fold_rows(np.zeros([4, 3], np.int64), 1)
    with pytest.raises(ValueError, match="static tuple"):
        uniform_rows(SEEDS, (2.5,))
    with pytest.raises(ValueError, match="static tuple"):
        full_int_rows(SEEDS, (-1,))
    with pytest.raises(ValueError, match="positive int"):
        split_rows(SEEDS, 0)
    with pytest.raises(TypeError, match="integer tensor"):
        fold_rows(np.zeros([4, 2], np.float32), 1)


def test_fold_takes_rows_or_an_index_vector():
    """`seeds.fold` on a block: the same bits as folding each sample alone."""
    parent = tf.constant([5, -9], tf.int64)
    idx = tf.constant([0, 3, 2**40], tf.int64)
    rows = S.fold(parent, idx)
    again = S.fold(rows, 7)
    for i in range(3):
        one = S.fold(parent, idx[i])
        assert np.array_equal(rows[i].numpy(), one.numpy())
        assert np.array_equal(again[i].numpy(), S.fold(one, 7).numpy())
