"""tfpipe.native affine: `TfpipeAffineWarp` equals the pure-TF warp it replaces.

Oracle: `tfpipe.augment.geometry.affine` with `TFPIPE_NATIVE=0`, i.e.
``ImageProjectiveTransformV3`` on float32 (+ round half to even + saturate for
uint8), and `cv2.warpAffine` within the bounds tests/augment uses. Real photo
crops from `tfpipe.sample_data`. Tests that need the built library skip (with
the reason) only when it is unavailable.
"""

from __future__ import annotations

import platform

import cv2
import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A
from tfpipe import native
from tfpipe.augment import geometry as G
from tfpipe.native import affine as native_affine
from tfpipe import switches

from .conftest import needs

needs_native = needs(native_affine.available(), "native affine op")

# TF's kernel and ours run the same float32 ops in the same order; without FMA
# contraction (x86-64 baseline builds of both) the results are bit-identical.
EXACT = platform.machine().lower() in ("x86_64", "amd64")

H, W = 120, 160
C = ((W - 1) / 2.0, (H - 1) / 2.0)
MATRICES = {
    "rotate": lambda: G.rotation_matrix(23.0, C),
    "scale_down": lambda: G.scale_matrix(0.55, 0.7, C),
    "scale_up_shear": lambda: G.compose(G.scale_matrix(1.4, 1.2, C),
                                        G.shear_matrix(15.0, -8.0, C)),
    "translate": lambda: G.translate_matrix(31.3, -17.6),
    "combo": lambda: G.compose(G.scale_matrix(0.9, center=C), G.shear_matrix(10.0, center=C),
                               G.rotation_matrix(-137.0, C), G.translate_matrix(5.5, 3.25)),
}
FILLS = ("constant", "reflect", "wrap", "nearest")


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    from tfpipe.sample_data import source_photos

    rgb = [np.asarray(p) for p in source_photos().values() if np.asarray(p).ndim == 3]
    p = rgb[0][..., :3]
    h, w = p.shape[:2]
    return np.ascontiguousarray(p[h // 4: h // 4 + H, w // 5: w // 5 + W])


def _input(photo: np.ndarray, dtype: str) -> np.ndarray:
    return photo if dtype == "uint8" else photo.astype(np.float32) / 255.0


def _both(monkeypatch, fn):
    """fn() with the native kernel, then with TFPIPE_NATIVE off (pure TF)."""
    got = fn()
    monkeypatch.setitem(switches.OVERRIDES, native.ENV, False)
    try:
        ref = fn()
    finally:
        monkeypatch.delitem(switches.OVERRIDES, native.ENV)
    return np.asarray(got), np.asarray(ref)


def _check(got: np.ndarray, ref: np.ndarray, dtype: str, what: object) -> None:
    assert got.dtype == ref.dtype and got.shape == ref.shape, what
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64)).max()
    assert diff <= (1.0 if dtype == "uint8" else 1e-4), (what, diff)
    if EXACT:
        assert np.array_equal(got, ref), (what, diff, int((got != ref).sum()))


@needs_native
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
def test_single_image_matches_tf_kernel(monkeypatch, photo, dtype, interpolation) -> None:
    x = tf.constant(_input(photo, dtype))
    for name, make in MATRICES.items():
        m = make()
        for fill in FILLS:
            fill_value = 77.0 if dtype == "uint8" else 0.3
            got, ref = _both(monkeypatch, lambda: A.affine(
                x, m, (H + 7, W - 9), interpolation, fill, fill_value))
            _check(got, ref, dtype, (name, fill))


@needs_native
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_batch_per_sample_and_shared_matrices(monkeypatch, photo, dtype) -> None:
    x = _input(photo, dtype)
    batch = tf.constant(np.stack([x, x[::-1], x[:, ::-1], x[::-1, ::-1]]))
    per_sample = tf.stack([make() for make in list(MATRICES.values())[:4]])
    for m in (per_sample, MATRICES["combo"]()):
        for fill in FILLS:
            got, ref = _both(monkeypatch, lambda: A.affine(batch, m, (96, 128), "bilinear", fill))
            _check(got, ref, dtype, (m.shape, fill))
    # gray images take the generic channel loop
    gray = batch[..., :1]
    got, ref = _both(monkeypatch, lambda: A.affine(gray, per_sample, None, "bilinear", "reflect"))
    _check(got, ref, dtype, "gray")


@needs_native
def test_projective_and_direct_op_call(monkeypatch, photo) -> None:
    """Projective maps run natively too (same per-pixel division as TF); the op on
    a [8] transform vector equals the raw TF kernel."""
    m = tf.constant([[1.0, 0.1, 3.0], [0.05, 0.9, -2.0], [0.001, 0.0005, 1.0]])
    got, ref = _both(monkeypatch, lambda: A.affine(photo, m, None, "bilinear", "wrap"))
    _check(got, ref, "uint8", "projective")
    x = tf.constant(photo.astype(np.float32))
    t = G._inverse_transform_vector(MATRICES["combo"](), 1)
    ref = tf.raw_ops.ImageProjectiveTransformV3(
        images=x[None], transforms=t, output_shape=[H, W], fill_value=5.0,
        interpolation="NEAREST", fill_mode="REFLECT")[0]
    got = native_affine.affine_warp(x, t[0], (H, W), "nearest", "reflect", 5.0)
    _check(got.numpy(), ref.numpy(), "float32", "direct")


@needs_native
@pytest.mark.parametrize("case", ["rotate", "scale_up_shear", "combo"])
def test_native_matches_cv2_within_oracle_bounds(photo, case) -> None:
    """Same bounds as tests/augment/test_geometry.py's cv2.warpAffine oracle."""
    m = MATRICES[case]().numpy()
    for interp, cv_interp, fill, border in [
            ("bilinear", cv2.INTER_LINEAR, "constant", cv2.BORDER_CONSTANT),
            ("bilinear", cv2.INTER_LINEAR, "nearest", cv2.BORDER_REPLICATE),
            ("nearest", cv2.INTER_NEAREST, "reflect", cv2.BORDER_REFLECT)]:
        ref = cv2.warpAffine(photo, m[:2], (W, H), flags=cv_interp, borderMode=border)
        out = native_affine.affine_warp(photo, G._inverse_transform_vector(m, 1), (H, W),
                                        interp, fill).numpy()
        err = np.abs(out.astype(np.float64) - ref)[4:-4, 4:-4]
        if interp == "bilinear":
            assert err.mean() < 0.02, (case, fill, err.mean())
        else:
            assert (err.max(axis=-1) < 1e-3).mean() > 0.93, (case, fill)


@needs_native
def test_graph_uses_native_op_and_stays_stateless(photo) -> None:
    def op_types(fn) -> set[str]:
        concrete = tf.function(fn).get_concrete_function(
            tf.TensorSpec([H, W, 3], tf.uint8), tf.TensorSpec([2], tf.int64))
        graph = concrete.graph.as_graph_def()
        types = {n.op for n in graph.node}
        for f in graph.library.function:
            types |= {n.op for n in f.node_def}
        return types

    def fn(x, seed):
        return A.random_affine(x, seed, rotation=30.0, scale=(0.8, 1.2), shear=10.0)[0]

    types = op_types(fn)
    assert "TfpipeAffineWarp" in types and "ImageProjectiveTransformV3" not in types
    assert not {t for t in types if t.startswith("Random") or "Stateful" in t
                or "PyFunc" in t}, types
    from tfpipe.doctor._graph import is_stateful_op

    assert not is_stateful_op("TfpipeAffineWarp")
    # inside tf.data: same images as eager, twice (seeded, deterministic)
    seeds = np.stack([np.zeros(4, np.int64), np.arange(4)], 1)
    ds = tf.data.Dataset.from_tensor_slices((np.stack([photo] * 4), seeds)).map(
        fn, num_parallel_calls=4)
    first = np.stack(list(ds.as_numpy_iterator()))
    again = np.stack(list(ds.as_numpy_iterator()))
    eager = np.stack([fn(tf.constant(photo), tf.constant(s)).numpy() for s in seeds])
    assert np.array_equal(first, again) and np.array_equal(first, eager)


def test_fallback_when_disabled(monkeypatch, photo) -> None:
    """TFPIPE_NATIVE=0 (or no library) -> the pure-TF kernel, same public result."""
    monkeypatch.setitem(switches.OVERRIDES, native.ENV, False)
    assert not native_affine.available()
    assert not native_affine.usable(tf.uint8, "bilinear")
    concrete = tf.function(lambda x: A.affine(x, MATRICES["rotate"]())).get_concrete_function(
        tf.TensorSpec([H, W, 3], tf.uint8))
    types = {n.op for n in concrete.graph.as_graph_def().node}
    assert "ImageProjectiveTransformV3" in types and "TfpipeAffineWarp" not in types
    with pytest.raises(RuntimeError, match="unavailable"):
        native_affine.affine_warp(photo, tf.zeros([8]), (H, W))


@needs_native
def test_bad_arguments_are_named(photo) -> None:
    assert not native_affine.usable(tf.int32, "bilinear")
    assert not native_affine.usable(tf.uint8, "bicubic")
    with pytest.raises(ValueError, match="fill_mode must be one of"):
        native_affine.affine_warp(photo, tf.zeros([8]), (H, W), fill_mode="mirror")
    with pytest.raises(TypeError, match="uint8 or float32"):
        native_affine.affine_warp(photo.astype(np.int32), tf.zeros([8]), (H, W))
    with pytest.raises(tf.errors.InvalidArgumentError, match="transforms must be"):
        native_affine.affine_warp(np.stack([photo] * 3), tf.zeros([2, 8]), (H, W))
    with pytest.raises(tf.errors.InvalidArgumentError, match="output_shape must be positive"):
        native_affine.affine_warp(photo, tf.zeros([8]), (0, W))
