"""Table-driven contract for every geometry / boxes / elastic / detection op.

Each op in OPS runs in eager mode, inside `tf.function` and inside `tf.data.Dataset.map`
(graph mode), on uint8 and float32 input; it must keep the dtype (and float range
[0, 1] for these ops), produce the documented shape, give the same output for the same
seed and a different one for different seeds, and contain no stateful random op.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A

H, W = 48, 64
BOXES = tf.constant([[0.1, 0.1, 0.5, 0.6], [0.4, 0.3, 0.9, 0.8], [0.0, 0.0, 0.0, 0.0]])


@dataclass(frozen=True)
class Op:
    fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor]  # (image [H,W,C], seed) -> image
    shape: tuple[int, int, int]
    random: bool = True


def _img(out: tuple) -> tf.Tensor:
    return out[0]


def _boxes_of(op: Callable) -> Callable:
    """Run a geometric op and push BOXES through its matrix; return the image plus a
    box-derived marker so that box output is covered by the seed checks too."""
    def run(x: tf.Tensor, s: tf.Tensor) -> tf.Tensor:
        image, m = op(x, s)
        boxes, keep = A.transform_boxes(BOXES, m, (H, W), tf.shape(image)[:2])
        tf.debugging.assert_greater_equal(boxes, 0.0)
        tf.debugging.assert_less_equal(boxes, 1.0)
        return image, boxes, keep
    return run


def _batched(op: Callable) -> Callable:
    """Detection batch ops run on a batch of 4 copies (with shifted content)."""
    def run(x: tf.Tensor, s: tf.Tensor) -> tf.Tensor:
        images = tf.stack([x, tf.reverse(x, [0]), tf.reverse(x, [1]), x])
        boxes = tf.tile(tf.pad(BOXES, [[0, 1], [0, 0]])[None], [4, 1, 1])
        classes = tf.tile(tf.constant([[1, 2, -1, -1]], tf.int64), [4, 1])
        num = tf.constant([2, 2, 2, 1], tf.int32)
        return op(images, boxes, classes, num, s)
    return run


OPS: dict[str, Op] = {
    "random_affine": Op(_boxes_of(lambda x, s: A.random_affine(
        x, s, rotation=30.0, scale=(0.8, 1.2), per_axis_scale=True, shear=10.0,
        translate=(0.1, 0.1))), (H, W, 3)),
    "random_flip": Op(_boxes_of(lambda x, s: A.random_flip(x, s, True, True)), (H, W, 3)),
    "random_rot90": Op(lambda x, s: A.random_rot90(x[:, :H], s)[0], (H, H, 3)),
    "random_resized_crop": Op(_boxes_of(lambda x, s: A.random_resized_crop(x, s, (32, 40))),
                              (32, 40, 3)),
    "center_crop": Op(_boxes_of(lambda x, s: A.center_crop(x, (32, 32))), (32, 32, 3),
                      random=False),
    "pad_and_crop": Op(_boxes_of(lambda x, s: A.pad_and_crop(x, s, 6)), (H, W, 3)),
    "elastic": Op(lambda x, s: (lambda o: (o[0], A.elastic_boxes(BOXES, o[1])[0]))(
        A.elastic(x, s, 20.0, 5.0)), (H, W, 3)),
    "affine": Op(lambda x, s: A.affine(x, A.rotation_matrix(10.0, (31.5, 23.5))), (H, W, 3),
                 random=False),
    "apply_geometry": Op(lambda x, s: A.apply_geometry(
        x, [A.sample_affine_matrix(s, (H, W), rotation=20.0),
            A.flip_matrix((H, W), True)], (40, 40))[0], (40, 40, 3)),
    "mosaic": Op(_batched(lambda *a: A.mosaic(*a, p=1.0)), (4, H, W, 3)),
    "detection_mixup": Op(_batched(lambda *a: A.detection_mixup(*a, alpha=1.0)), (4, H, W, 3)),
}


@functools.lru_cache(maxsize=None)
def _image(dtype: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    base = (rng.random((H, W, 3)) * 255).astype(np.uint8)
    return base if dtype == "uint8" else base.astype(np.float32) / 255.0


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def _flat(out) -> list[np.ndarray]:
    return [np.asarray(t) for t in tf.nest.flatten(out)]


STATEFUL = ("RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal",
            "Multinomial", "RandomGamma", "RandomPoisson", "RandomPoissonV2", "RandomShuffle",
            "RandomCrop", "RngReadAndSkip", "RngSkip", "StatefulUniform",
            "StatefulUniformInt", "StatefulStandardNormalV2", "StatefulTruncatedNormal")


def _op_types(concrete) -> set[str]:
    graph_def = concrete.graph.as_graph_def()
    types = {n.op for n in graph_def.node}
    for fn in graph_def.library.function:
        types |= {n.op for n in fn.node_def}
    return types


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_contract(name: str, dtype: str) -> None:
    op = OPS[name]
    image = _image(dtype)
    s1, s2 = tf.constant([1, 2], tf.int64), tf.constant([1, 3], tf.int64)

    eager = op.fn(tf.constant(image), s1)
    out = _first(eager).numpy()
    assert out.dtype == image.dtype, name
    assert out.shape == op.shape, (name, out.shape)
    if dtype == "float32":
        assert out.min() >= 0.0 and out.max() <= 1.0 + 1e-6, name

    traced = tf.function(op.fn)
    concrete = traced.get_concrete_function(tf.TensorSpec([H, W, 3], image.dtype),
                                            tf.TensorSpec([2], tf.int64))
    bad = _op_types(concrete) & set(STATEFUL)
    assert not bad, f"{name} uses stateful random ops {bad}"
    assert not {t for t in _op_types(concrete) if "PyFunc" in t}, name

    graph_out = traced(tf.constant(image), s1)
    atol = 1e-5 if name == "elastic" else 1e-6
    for a, b in zip(_flat(eager), _flat(graph_out)):
        # same seed: eager == graph (graph rewrites may move float box math by 1 ulp)
        # elastic's blur is a chain of adds, which Grappler's arithmetic optimizer
        # regroups into AddN in a graph (same on every host; a few ulp from eager)
        np.testing.assert_allclose(a, b, atol=atol, err_msg=name)
    again = traced(tf.constant(image), s1)
    for a, b in zip(_flat(graph_out), _flat(again)):
        np.testing.assert_array_equal(a, b, err_msg=name)
    other = _first(traced(tf.constant(image), s2)).numpy()
    if op.random:
        assert not np.array_equal(other, out), f"{name}: different seeds gave the same output"
    else:
        np.testing.assert_array_equal(other, out, err_msg=name)

    ds = tf.data.Dataset.from_tensor_slices((image[None].repeat(3, 0),
                                             tf.constant([[1, 2], [1, 3], [1, 2]], tf.int64)))
    ds = ds.map(lambda x, s: _first(op.fn(x, s)), num_parallel_calls=2, deterministic=True)
    got = [e.numpy() for e in ds]
    np.testing.assert_array_equal(got[0], got[2], err_msg=name)   # same seed, exact
    np.testing.assert_allclose(got[0], out, atol=atol, err_msg=name)
    np.testing.assert_allclose(got[1], other, atol=atol, err_msg=name)
