"""The native resize's SIMD edges (ops.cc: 4-lane x lerp per pixel, 8/4-lane y lerp +
round + saturate, scalar tails) give TF's bytes, with the default loops (AVX2 where
the CPU has it) and forced onto the baseline x86-64 loops (the op's `isa` attr:
`tfpipe.native.baseline_isa()`).

Oracle: `tf.image.resize(bilinear)` + `tf.round` + `tf.saturate_cast`, then
`tf.reverse` for the flip -- the pure-TF path. Inputs are crops of the real photos
in `tfpipe.sample_data`, plus small-valued checkerboards whose 2x upscale lands on
exact .5 ties (round half to even) and 0/255 stripes (saturating packs).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import native

from .conftest import needs

pytestmark = needs(native.available(), "native op")

# Output widths: 1-7 (tails only), 224; and row lengths (out_w * channels) around the
# 16- and 32-element y-lerp blocks. Input widths: odd ones, 1, and wider/narrower
# than the output (down- and upscale along x, clamped taps at both edges).
_CASES: list[tuple[int, int, int, int, int, bool]] = []  # (in_h, in_w, c, out_h, out_w, flip)
for c in (1, 2, 3, 4):
    for out_w in (1, 2, 3, 5, 7, 224):
        for in_w in (1, 3, 99, 301):
            _CASES.append((5 + out_w % 4, in_w, c, 3 + in_w % 5, out_w, (out_w + in_w) % 2 == 1))
for c, widths in ((1, (15, 16, 17, 31, 32, 33)), (3, (5, 6, 10, 11, 16)), (4, (4, 8, 9))):
    for out_w in widths:
        for in_w in (out_w - 1 or 1, out_w, 2 * out_w + 1, 7):
            _CASES.append((9, in_w, c, 4, out_w, out_w % 2 == 0))
_CASES += [(97, 131, 3, 224, 224, False), (460, 389, 3, 224, 224, True),
           (301, 207, 3, 224, 224, False), (2, 2, 3, 2, 1, False), (1, 1, 4, 3, 5, True)]


def _image(photos: list[np.ndarray], i: int, h: int, w: int, c: int) -> np.ndarray:
    if i % 7 == 3:  # small values: 2x upscaling gives lerps of k + 0.5 exactly
        yy, xx = np.mgrid[:h, :w]
        return np.broadcast_to((((yy + xx) % 2) * (1 + (i % 3)))[..., None],
                               (h, w, c)).astype(np.uint8).copy()
    if i % 7 == 5:  # 0/255 stripes
        return np.broadcast_to((np.arange(w) % 2 * 255)[None, :, None],
                               (h, w, c)).astype(np.uint8).copy()
    p = photos[i % len(photos)]
    p = np.tile(p, (-(-h // p.shape[0]), -(-w // p.shape[1]), 1))  # 460 rows > some photos
    y0, x0 = (13 * i) % max(1, p.shape[0] - h), (29 * i) % max(1, p.shape[1] - w)
    crop = p[y0:y0 + h, x0:x0 + w]
    crop = np.concatenate([crop[..., :3]] * 2, -1)[..., (np.arange(c) * 2) % 6]
    return np.ascontiguousarray(crop)


def _oracle(image: np.ndarray, size: tuple[int, int], flip: bool) -> np.ndarray:
    out = tf.saturate_cast(tf.round(tf.image.resize(image, size, method="bilinear")), tf.uint8)
    return (tf.reverse(out, [1]) if flip else out).numpy()


def _inputs() -> list[tuple[np.ndarray, tuple[int, int], bool]]:
    """(image, output size, flip) of every case (deterministic: the child rebuilds them)."""
    from tfpipe.sample_data import source_photos

    photos = [np.asarray(p) for p in source_photos().values() if np.asarray(p).ndim == 3]
    out = []
    for i, (ih, iw, c, oh, ow, flip) in enumerate(_CASES):
        image = _image(photos, i, ih, iw, c)
        assert image.shape == (ih, iw, c)
        out.append((image, (oh, ow), flip))
    return out


@pytest.fixture(scope="module")
def cases() -> list[tuple[np.ndarray, tuple[int, int], bool, np.ndarray]]:
    return [(image, size, flip, _oracle(image, size, flip)) for image, size, flip in _inputs()]


def _diff(got: np.ndarray, want: np.ndarray, image: np.ndarray, size, flip) -> str:
    bad = np.argwhere(got != want)
    return (f"{image.shape} -> {size} flip {flip}: {len(bad)} bytes differ, first at "
            f"{bad[0].tolist()}: {got[tuple(bad[0])]} != {want[tuple(bad[0])]}")


def test_simd_edges_equal_tf_in_process(cases):
    for image, size, flip, want in cases:
        got = native.resize_bilinear_u8(image, size, flip=flip).numpy()
        assert got.shape == want.shape
        assert np.array_equal(got, want), _diff(got, want, image, size, flip)


def baseline_outputs() -> dict[str, np.ndarray]:
    """The native resize of every case: run by conftest's `baseline_isa` inside
    `tfpipe.native.baseline_isa()`."""
    return {f"resize{i}": native.resize_bilinear_u8(image, size, flip=flip).numpy()
            for i, (image, size, flip) in enumerate(_inputs())}


@pytest.mark.xdist_group("baseline-isa")  # one worker: one baseline_isa child
def test_simd_edges_equal_tf_on_the_baseline_isa(cases, baseline_isa):
    got = {k: v for k, v in baseline_isa.items() if k.startswith("resize")}
    assert len(got) == len(cases)
    for i, (image, size, flip, want) in enumerate(cases):
        assert np.array_equal(got[f"resize{i}"], want), _diff(got[f"resize{i}"], want, image,
                                                               size, flip)
