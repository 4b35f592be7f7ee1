"""The seed rows' shared Philox function: one small call per draw site, same bits as TF.

Oracle: TF's own per-seed `stateless_uniform` / `stateless_random_uniform_full_int`
/ `stateless_split` / `stateless_fold_in` (alg="philox"), one row at a time.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.seeds import fold_rows, full_int_rows, split_rows, uniform_rows

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
SEEDS = np.concatenate([
    np.array([[0, 0], [-1, -1], [I64_MIN, I64_MAX], [2**32, 2**32 - 1]], np.int64),
    np.random.default_rng(7).integers(I64_MIN, I64_MAX, size=(12, 2), dtype=np.int64, endpoint=True)])

# Shapes sharing one traced function ((), (3,), (4,) use one generator call; (2, 3) two;
# (9,) three) and int64 shapes of 1, 2 and 3 calls.
U_SHAPES = [(), (3,), (4,), (2, 3), (9,)]
I_SHAPES = [(), (4,), (5,)]


def _oracle_uniform(shape, lo, hi) -> np.ndarray:
    return np.stack([tf.random.stateless_uniform(shape, tf.constant(s), lo, hi, tf.float32, "philox").numpy()
                     for s in SEEDS])


def _oracle_int(shape) -> np.ndarray:
    return np.stack([tf.random.stateless_uniform(shape, tf.constant(s), None, None, tf.int64, "philox").numpy()
                     for s in SEEDS])


@pytest.fixture(scope="module")
def drawn() -> tuple:
    """Every draw of the module from ONE dataset map (the pipeline's setting), unknown batch size."""
    def draws(s):
        return (tuple(uniform_rows(s, shape, -1.5, 2.0) for shape in U_SHAPES),
                tuple(full_int_rows(s, shape) for shape in I_SHAPES),
                split_rows(s, 3), fold_rows(s, 11))

    ds = tf.data.Dataset.from_tensor_slices(SEEDS).batch(5).map(draws)  # batches of 5, 5, 5, 1
    parts = list(ds.as_numpy_iterator())

    def cat(get):
        return np.concatenate([get(p) for p in parts])

    return ([cat(lambda p, j=j: p[0][j]) for j in range(len(U_SHAPES))],
            [cat(lambda p, j=j: p[1][j]) for j in range(len(I_SHAPES))],
            cat(lambda p: p[2]), cat(lambda p: p[3]))


def test_shared_function_matches_tf_per_row(drawn) -> None:
    uniforms, ints, split, fold = drawn
    for shape, got in zip(U_SHAPES, uniforms):
        assert np.array_equal(got.view(np.uint32), _oracle_uniform(shape, -1.5, 2.0).view(np.uint32)), shape
    for shape, got in zip(I_SHAPES, ints):
        assert np.array_equal(got, _oracle_int(shape)), shape
    want_split = np.stack([tf.cast(tf.random.experimental.stateless_split(tf.constant(s), 3, "philox"),
                                   tf.int64).numpy() for s in SEEDS])
    want_fold = np.stack([tf.random.experimental.stateless_fold_in(tf.constant(s), tf.constant(11, tf.int64),
                                                                   "philox").numpy() for s in SEEDS])
    assert np.array_equal(split, want_split) and np.array_equal(fold, want_fold)


def _library(fn) -> dict:
    graph = fn.get_concrete_function().graph.as_graph_def()
    return {f.signature.name: f for f in graph.library.function}, graph


def test_each_site_is_one_call_and_the_body_is_shared() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.int64)])
    def sites(s):
        # four sites of the same (kind, calls): one body in the library
        return [uniform_rows(s, shape, 0.0, 1.0) for shape in [(), (2,), (3,), (4,)]]

    library, graph = _library(sites)
    calls = [n for n in graph.node if n.op == "PartitionedCall"]
    assert len(calls) == 4 and len({n.attr["f"].func.name for n in calls}) == 1
    assert len(library) == 1
    # A site costs a handful of shape ops around its call, not the ~250-op Philox body
    # (the inline version put 326 ops per site in this graph; now 22).
    assert len(graph.node) < 4 * 25, len(graph.node)
    body = next(iter(library.values()))
    assert len(body.node_def) > 150  # the whole Philox body is in there


def test_shared_body_is_integer_math() -> None:
    """Host independence: the body is integer ops; the only float op is the exact `- 1.0`
    of Uint32ToFloat (bits of [1, 2) minus 1 is exact on any host)."""
    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.int64)])
    def both(s):
        return full_int_rows(s, (3,)), uniform_rows(s, (3,))

    library, _ = _library(both)
    floats = set()
    for f in library.values():
        for nd in f.node_def:
            dtypes = [v.type for k, v in nd.attr.items() if k in ("T", "dtype", "type", "DstT", "out_type")]
            if any(d in (tf.float16.as_datatype_enum, tf.float32.as_datatype_enum,
                         tf.float64.as_datatype_enum, tf.bfloat16.as_datatype_enum) for d in dtypes):
                floats.add(nd.op)
    moves = {"Bitcast", "Const", "Identity", "Reshape", "StridedSlice", "Pack", "ConcatV2"}
    assert floats - moves == {"Sub"}, floats
