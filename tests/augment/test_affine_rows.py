"""`sample_affine_matrices` (rows of seeds -> rows of matrices, what the pipeline's
per-block plan draws) == the matrix `random_affine` warps by for each seed alone,
bit for bit, for every kind of affine parameter."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment

SIZE = (24, 40)  # (h, w): non-square, so the centre and the translate scale differ per axis

KINDS = {
    "identity": {},
    "translate (medical preset)": {"translate": (0.05, 0.05)},
    "rotation r": {"rotation": 30.0},
    "rotation (lo, hi)": {"rotation": (-45.0, 10.0)},
    "rotation fixed": {"rotation": (12.5, 12.5)},
    "scale": {"scale": (0.5, 1.5)},
    "per_axis_scale": {"scale": (0.7, 1.3), "per_axis_scale": True},
    "shear s": {"shear": 10.0},
    "shear (sx, sy)": {"shear": (8.0, 4.0)},
    "everything": {"rotation": 25.0, "scale": (0.8, 1.2), "per_axis_scale": True,
                   "shear": (6.0, 3.0), "translate": (0.1, 0.2)},
}


@pytest.fixture(scope="module")
def seeds() -> tf.Tensor:
    rng = np.random.default_rng(12)
    rows = rng.integers(-2**63, 2**63 - 1, size=(64, 2), dtype=np.int64)
    rows[:3] = [[0, 0], [1, 2], [-1, 2**62]]  # edge seeds
    return tf.constant(rows)


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, np.float32).view(np.uint32)


@pytest.fixture(scope="module")
def per_seed(seeds) -> dict[str, np.ndarray]:
    """The oracle: TF's own per-seed ops, the matrix `random_affine`
    draws for one sample (it warps by `sample_affine_matrix(seed, its size)`:
    checked for one kind in `test_random_affine_warps_by_that_matrix`)."""
    one = tf.function(lambda s: {k: augment.sample_affine_matrix(s, SIZE, **kw)
                                 for k, kw in KINDS.items()}, autograph=False)
    per = [one(seeds[i]) for i in range(seeds.shape[0])]
    return {k: np.stack([m[k].numpy() for m in per]) for k in KINDS}


@pytest.fixture(scope="module")
def rows(seeds) -> dict[str, np.ndarray]:
    return {k: augment.sample_affine_matrices(seeds, SIZE, **kw).numpy()
            for k, kw in KINDS.items()}


@pytest.mark.parametrize("kind", list(KINDS))
def test_rows_equal_random_affine_matrix_per_seed(seeds, per_seed, rows, kind):
    got = rows[kind]
    assert got.shape == (seeds.shape[0], 3, 3)
    bad = np.argwhere(_bits(got) != _bits(per_seed[kind]))
    assert bad.size == 0, f"{kind}: {len(bad)} entries differ, first at {bad[0].tolist()}"


def test_random_affine_warps_by_that_matrix(seeds, rows):
    image = tf.zeros([*SIZE, 1], tf.uint8)
    for i in (0, 5, 17):
        m = augment.random_affine(image, seeds[i], **KINDS["everything"])[1].numpy()
        assert np.array_equal(_bits(m), _bits(rows["everything"][i]))


def test_rows_inside_a_graph_with_unknown_batch(seeds, per_seed):
    kw = KINDS["everything"]
    fn = tf.function(lambda s: augment.sample_affine_matrices(s, SIZE, **kw), autograph=False,
                     input_signature=[tf.TensorSpec([None, 2], tf.int64)])
    assert np.array_equal(_bits(fn(seeds[:5]).numpy()), _bits(per_seed["everything"][:5]))


def test_rows_reject_a_single_seed():
    with pytest.raises(ValueError, match=r"rows \[B, 2\]"):
        augment.sample_affine_matrices(tf.constant([1, 2], tf.int64), SIZE)
