"""tfpipe.native crop window: `TfpipeCropWindow` equals the pure-TF reference bit for bit.

Oracles: `tfpipe.augment.geometry._crop_window_tf` (the TF ops the native op
replaces, what `TFPIPE_NATIVE=0` runs) and an independent NumPy float32
re-implementation of torchvision's window rule (`_numpy_window`). Draws come
from the real sampler (`crop_window_draws`) over many seeds, plus hand-built
draws that land sqrt(...) exactly on .5 (round half to even), on the fit
boundaries and on the offset clamp. Tests that need the built library skip
(with the reason) only when it is unavailable.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A
from tfpipe import native
from tfpipe.augment import geometry as G
from tfpipe import switches

from .conftest import needs

needs_native = needs(native.has_crop_window(), "native crop window op")

RATIOS = [(3 / 4, 4 / 3), (1.0, 1.0), (0.5, 2.0)]
SIZES = [(1, 1), (1, 7), (7, 1), (2, 3), (5, 5), (10, 1000), (1000, 10), (33, 35),
         (224, 224), (375, 500), (480, 120), (64, 640), (4000, 3000), (16383, 17)]


def _numpy_window(d: np.ndarray, h: int, w: int, r_lo: float, r_hi: float
                  ) -> tuple[int, int, int, int]:
    """float32 NumPy oracle: first fitting attempt, else the clamped centre crop."""
    f32 = np.float32
    hf, wf = f32(h), f32(w)
    area = (hf * wf) * d[0]
    with np.errstate(invalid="ignore", over="ignore"):
        cw = np.rint(np.sqrt(area * d[1])).astype(np.int64)
        ch = np.rint(np.sqrt(area / d[1])).astype(np.int64)
    ok = (cw > 0) & (cw <= w) & (ch > 0) & (ch <= h)
    if ok.any():
        i = int(np.argmax(ok))
        oy = min(int(d[2, i] * f32(h - ch[i] + 1)), h - int(ch[i]))
        ox = min(int(d[3, i] * f32(w - cw[i] + 1)), w - int(cw[i]))
        return oy, ox, int(ch[i]), int(cw[i])
    in_ratio = wf / hf
    fb_w, fb_h = w, h
    if in_ratio < f32(r_lo):
        fb_h = int(np.rint(wf / f32(r_lo)))
    elif in_ratio > f32(r_hi):
        fb_w = int(np.rint(hf * f32(r_hi)))
    fb_w, fb_h = min(fb_w, w), min(fb_h, h)
    return (h - fb_h) // 2, (w - fb_w) // 2, fb_h, fb_w


def _pair_fn(ratio: tuple[float, float]):
    """One traced function giving (native, pure-TF reference) windows, [2, 4]."""
    r_lo, r_hi = ratio

    @tf.function(input_signature=[tf.TensorSpec([4, None], tf.float32),
                                  tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int32)])
    def both(d, h, w):
        return tf.stack([tf.stack(native.crop_window(d, h, w, ratio)),
                         tf.stack(G._crop_window_tf(d, h, w, r_lo, r_hi))])
    return both


def _check(cases, ratio, oracle: bool = True) -> int:
    both = _pair_fn(ratio)
    fallbacks = 0
    for d, h, w in cases:
        d = np.asarray(d, np.float32)
        got_native, got_tf = both(tf.constant(d), tf.constant(h, tf.int32),
                                  tf.constant(w, tf.int32)).numpy()
        where = f"h={h} w={w} ratio={ratio} draws={d.tolist()}"
        np.testing.assert_array_equal(got_native, got_tf, err_msg=where)
        if not oracle:
            continue
        want = _numpy_window(d, h, w, *ratio)
        np.testing.assert_array_equal(got_native, want, err_msg=where)
        oy, ox, ch, cw = (int(v) for v in got_native)
        if ch >= 1 and cw >= 1:
            assert 0 <= oy <= h - ch and 0 <= ox <= w - cw, where
        sq = np.sqrt
        fitted = any(0 < np.rint(sq(h * w * d[0, i] * d[1, i])) <= w
                     and 0 < np.rint(sq(h * w * d[0, i] / d[1, i])) <= h
                     for i in range(d.shape[1]))
        fallbacks += not fitted
    return fallbacks


@needs_native
@pytest.mark.parametrize("ratio", RATIOS)
def test_sampled_draws_match_reference_and_numpy(ratio) -> None:
    rng = np.random.default_rng(hash(ratio) % 2**32)
    cases = []
    for attempts, scale in ((10, (0.08, 1.0)), (1, (0.08, 1.0)), (10, (0.9, 1.0)),
                            (3, (0.01, 1.0))):
        seeds = tf.constant(rng.integers(0, 2**31, size=(200, 2)), tf.int64)
        draws = A.crop_window_draws(seeds, scale, ratio, attempts).numpy()
        for i, d in enumerate(draws):
            h, w = SIZES[i % len(SIZES)] if i < 2 * len(SIZES) else \
                (int(rng.integers(1, 700)), int(rng.integers(1, 700)))
            cases.append((d, h, w))
    fallbacks = _check(cases, ratio)
    assert len(cases) == 800
    assert fallbacks > 10  # the strips and 1-pixel images do reach the fallback


@needs_native
def test_rounding_ties_and_boundaries() -> None:
    # h * w a power of two and draws (k + 1/2)^2 / (h * w): area * aspect and
    # area / aspect are exact, so sqrt lands exactly on k + 1/2 and the rounding
    # mode decides (half to even: 2.5 -> 2, 3.5 -> 4).
    cases = []
    for h, w in ((64, 64), (16, 256), (256, 16), (8, 8), (1, 64)):
        for k in range(0, 9):
            for aspect in (1.0, 4.0, 0.25, 2.0):
                frac = (k + 0.5) ** 2 / (h * w)
                if frac <= 1:
                    cases.append(([[frac], [aspect], [0.5], [0.5]], h, w))
    # the window exactly the image / one pixel too big in one direction
    cases += [([[1.0], [1.0], [0.0], [0.999999940395]], 50, 50),
              ([[1.0], [1.0 + 2 ** -23], [0.3], [0.7]], 50, 50),
              ([[1.0, 0.5], [1.21, 1.0], [0.1, 0.9], [0.9, 0.1]], 100, 100)]
    # offsets: u just below 1 must clamp to h - ch (u * (h - ch + 1) rounds up)
    top = float(np.nextafter(np.float32(1), np.float32(0)))
    for h in (2 ** 25 + 3, 30001, 4097):
        cases.append(([[0.25], [1.0], [top], [top]], h, 8))
        cases.append(([[0.25], [1.0], [top], [top]], 8, h))
    _check(cases, (3 / 4, 4 / 3))
    # exact ties: 2.5 -> 2 (not 3), 6.5 -> 6
    both = _pair_fn((3 / 4, 4 / 3))
    win = both(tf.constant([[6.25 / 4096], [1.0], [0.0], [0.0]], tf.float32), 64, 64).numpy()
    assert win[0].tolist() == [0, 0, 2, 2]
    win = both(tf.constant([[42.25 / 4096], [1.0], [0.0], [0.0]], tf.float32), 64, 64).numpy()
    assert win[0].tolist() == [0, 0, 6, 6]


@needs_native
def test_fallback_ties_and_extreme_ratios() -> None:
    nofit = [[1.0], [1e6], [0.5], [0.5]]  # far too wide: never fits
    cases = []
    # round(hf * r_hi) and round(wf / r_lo) exactly on .5 (3 * 1.5, 5 / 2)
    cases.append((nofit, 3, 50))
    cases.append((nofit, 10, 5))
    for h, w in SIZES:
        cases.append((nofit, h, w))
        cases.append(([[1.0], [1e-6], [0.5], [0.5]], h, w))  # far too tall
    for ratio in ((2.0, 4.0), (0.5, 2.0), (1.0, 1.0), (3 / 4, 4 / 3), (0.1, 0.2)):
        assert _check(cases, ratio) == len(cases)
    both = _pair_fn((2.0, 4.0))
    # 3x50: in_ratio 16.7 > 4 -> width round(3 * 4) = 12; 10x5: round(5 / 2) = 2 (tie)
    assert both(tf.constant(nofit, tf.float32), 3, 50).numpy()[0].tolist() == [0, 19, 3, 12]
    assert both(tf.constant(nofit, tf.float32), 10, 5).numpy()[0].tolist() == [4, 0, 2, 5]
    both = _pair_fn((0.5, 1.5))
    # 3x50: round(3 * 1.5) = round(4.5) = 4 (tie to even)
    assert both(tf.constant(nofit, tf.float32), 3, 50).numpy()[0].tolist() == [0, 23, 3, 4]


@needs_native
def test_adversarial_draws_match_reference() -> None:
    # draws outside the sampler's ranges (NaN, negative, 0, huge): the window may
    # be nonsense, but both implementations must produce the same nonsense
    rng = np.random.default_rng(7)
    cases = []
    pool = np.array([0.0, -1.0, np.nan, np.inf, 1e-30, 1e30, 0.5, 1.0, 2.0], np.float32)
    for _ in range(150):
        n = int(rng.integers(1, 11))
        d = rng.choice(pool, size=(4, n)).astype(np.float32)
        d[:, rng.random(n) < 0.5] = rng.random((4, 1)).astype(np.float32) * 2
        cases.append((d, int(rng.integers(1, 300)), int(rng.integers(1, 300))))
    _check(cases, (3 / 4, 4 / 3), oracle=False)


@needs_native
def test_public_api_uses_native_and_env_switches_it_off(monkeypatch) -> None:
    seed = tf.constant([3, 4], tf.int64)

    def graph_ops(fn, *args) -> set[str]:
        return {op.type for op in tf.function(fn).get_concrete_function(*args).graph
                .get_operations()}

    fn = lambda s: tf.stack(A.sample_crop_window(s, 10, 1000, (0.5, 1.0)))  # noqa: E731
    monkeypatch.delitem(switches.OVERRIDES, native.ENV, raising=False)
    assert "TfpipeCropWindow" in graph_ops(fn, seed)
    on = [fn(tf.constant([i, 1], tf.int64)).numpy() for i in range(20)]
    monkeypatch.setitem(switches.OVERRIDES, native.ENV, False)
    assert not native.has_crop_window()
    ops = graph_ops(fn, seed)
    assert "TfpipeCropWindow" not in ops and "ArgMax" in ops
    off = [fn(tf.constant([i, 1], tf.int64)).numpy() for i in range(20)]
    np.testing.assert_array_equal(np.stack(on), np.stack(off))
    # the 10x1000 strip falls back: 10 high, width round(10 * 4/3) = 13, centred
    assert on[0].tolist() == [0, (1000 - 13) // 2, 10, 13]


def test_draws_row_one_is_the_aspect_in_float64() -> None:
    ratio = (0.5, 2.0)
    seeds = tf.constant([[1, 2], [3, 4], [5, 6]], tf.int64)
    rows = A.crop_window_draws(seeds, (0.08, 1.0), ratio).numpy()
    for s, row in zip(seeds, rows):
        single = A.crop_window_draws(s, (0.08, 1.0), ratio).numpy()
        np.testing.assert_array_equal(single, row)  # plan [B, 4, n] == per seed [4, n]
        # row 1 = float32(exp(float64(log-aspect draw)))
        log_aspect = tf.random.stateless_uniform(
            [10], tf.cast(tf.random.experimental.stateless_split(s, 4, alg="philox"), tf.int64)[1], np.log(0.5), np.log(2.0), tf.float32,
            alg=G.ALG).numpy()
        np.testing.assert_array_equal(row[1], np.exp(log_aspect.astype(np.float64))
                                      .astype(np.float32))
        assert (row[1] >= np.float32(0.5)).all() and (row[1] <= np.float32(2.0)).all()


@needs_native
def test_bad_inputs_are_named() -> None:
    op = native.load().tfpipe_crop_window
    good = tf.fill([4, 10], 0.5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="draws must be"):
        op(tf.fill([3, 10], 0.5), 10, 10, ratio=[0.75, 1.25])
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="draws|4"):
        native.crop_window(tf.fill([4, 0], 0.5), 10, 10, (0.75, 1.25))
    with pytest.raises(tf.errors.InvalidArgumentError, match="height and width must be > 0"):
        native.crop_window(good, 0, 10, (0.75, 1.25))
    with pytest.raises(tf.errors.InvalidArgumentError, match="height and width must be > 0"):
        native.crop_window(good, 10, -3, (0.75, 1.25))
    with pytest.raises(tf.errors.InvalidArgumentError, match="ratio"):
        op(good, 10, 10, ratio=[0.75])
    with pytest.raises(tf.errors.InvalidArgumentError, match="ratio"):
        op(good, 10, 10, ratio=[1.5, 0.75])
    with pytest.raises(ValueError, match="ratio"):
        A.crop_window_from_draws(good, 10, 10, (0.0, 1.0))
    # a dynamic first dimension reaches the op, which checks it at run time
    dyn = tf.function(lambda d: tf.stack(A.crop_window_from_draws(d, 10, 10)),
                      input_signature=[tf.TensorSpec([None, None], tf.float32)])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"draws must be .*\[4, attempts\]"):
        dyn(tf.fill([5, 10], 0.5))
    assert dyn(good).numpy().tolist() == list(_numpy_window(good.numpy(), 10, 10, 3 / 4, 4 / 3))
