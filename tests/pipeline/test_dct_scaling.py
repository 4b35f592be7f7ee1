"""DCT-scaled JPEG decode (`data.dct_scaling`, pipeline/_decode.py).

Oracles: the ratio rule written out in plain Python; TF's own full
`decode_jpeg(ratio=r)` sliced with window bounds computed here with `math`
(floor of the start, ceil of the end, scaled size ceil(dim / r)); the native
strict decode and the pure-TF switch must agree bit for bit; and the pipeline's
own outputs with native kernels on and off.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import native, sample_data
from tfpipe.errors import ConfigError
from tfpipe.pipeline._decode import decode_and_crop_scaled, dct_ratio, scaled_window

from .conftest import CLASSES, _example, write_shards


def expected_ratio(ch: int, cw: int, out: tuple[int, int]) -> int:
    for r in (8, 4, 2):
        if ch >= r * out[0] and cw >= r * out[1]:
            return r
    return 1


@pytest.mark.parametrize("ch,cw,out,want", [
    (448, 448, (224, 224), 2),    # exact multiple: the window is still >= the output
    (447, 448, (224, 224), 1),    # one row short
    (896, 1792, (224, 224), 4),   # the smaller side decides
    (1792, 1792, (224, 224), 8),
    (5000, 4000, (224, 224), 8),  # never beyond 1/8
    (1791, 4000, (224, 224), 4),
    (64, 120, (32, 60), 2),       # non-square output: each side against its own
    (64, 119, (32, 60), 1),
    (20, 30, (224, 224), 1),      # tiny image: no reduction (and no upscaling trick)
    (1, 1, (1, 1), 1),
    (8, 8, (1, 1), 8),
])
def test_ratio_choice(ch, cw, out, want):
    assert expected_ratio(ch, cw, out) == want  # the rule, written out
    assert int(dct_ratio(tf.constant(ch), tf.constant(cw), out)) == want


def test_ratio_choice_grid():
    chs, cws = np.meshgrid(np.arange(1, 300, 7), np.arange(1, 300, 5), indexing="ij")
    got = dct_ratio(tf.constant(chs.ravel(), tf.int32), tf.constant(cws.ravel(), tf.int32),
                    (17, 23)).numpy()
    want = [expected_ratio(int(a), int(b), (17, 23)) for a, b in zip(chs.ravel(), cws.ravel())]
    np.testing.assert_array_equal(got, want)


def scaled_bounds(oy: int, ox: int, ch: int, cw: int, r: int) -> tuple[int, int, int, int]:
    return oy // r, ox // r, math.ceil((oy + ch) / r), math.ceil((ox + cw) / r)


@pytest.fixture(scope="module")
def jpegs() -> dict[str, bytes]:
    """A real photo at an odd size (the scaled sizes round up), 4:4:4 and 4:2:0."""
    photo = next(iter(sample_data.source_photos().values()))[:421, :603]
    return {"444": tf.io.encode_jpeg(photo, quality=90, chroma_downsampling=False).numpy(),
            "420": tf.io.encode_jpeg(photo, quality=90).numpy()}


def windows(n: int, h: int, w: int, seed: int = 0) -> list[tuple[int, int, int, int]]:
    rng = np.random.default_rng(seed)
    out = [(0, 0, h, w), (h - 9, w - 17, 9, 17), (1, 3, h - 1, w - 3), (7, 5, 16, 16)]
    for _ in range(n):
        ch, cw = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
        out.append((int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1)), ch, cw))
    return out


def test_window_under_scaling_against_tf_decode_jpeg(jpegs):
    """The crop = TF's whole image decoded at 1/r, sliced at floor/ceil bounds;
    and the scaled window covers the full-size one."""
    enc = jpegs["444"]  # no chroma subsampling: crop and slice agree to the bit
    fulls = {r: tf.io.decode_jpeg(enc, ratio=r).numpy() for r in (1, 2, 4, 8)}
    for r, img in fulls.items():
        assert img.shape[:2] == (math.ceil(421 / r), math.ceil(603 / r))
    seen = set()
    for i, (oy, ox, ch, cw) in enumerate(windows(40, 421, 603)):
        target = (max(1, ch // (1 + i % 10)), max(1, cw // (1 + (i * 3) % 10)))
        r = expected_ratio(ch, cw, target)
        seen.add(r)
        y0, x0, y1, x1 = scaled_bounds(oy, ox, ch, cw, r)
        assert y0 * r <= oy and x0 * r <= ox and y1 * r >= oy + ch and x1 * r >= ox + cw
        assert y1 - y0 >= target[0] and x1 - x0 >= target[1]
        win = [int(v) for v in scaled_window((oy, ox, ch, cw), tf.constant(r))]
        assert win == [y0, x0, y1 - y0, x1 - x0]
        got = decode_and_crop_scaled(enc, (oy, ox, ch, cw), 3, target).numpy()
        np.testing.assert_array_equal(got, fulls[r][y0:y1, x0:x1], err_msg=f"{oy, ox, ch, cw} r={r}")
    assert seen == {1, 2, 4, 8}


@pytest.mark.skipif(not native.available(), reason="native kernels not built")
@pytest.mark.parametrize("kind", ["444", "420"])
def test_native_equals_pure_tf(jpegs, kind):
    from tfpipe.native.jpeg import decode_jpeg_strict

    enc = jpegs[kind]
    for i, (oy, ox, ch, cw) in enumerate(windows(30, 421, 603, seed=1)):
        target = (max(1, ch // (2 + i % 9)), max(1, cw // (2 + i % 7)))
        want = decode_and_crop_scaled(enc, (oy, ox, ch, cw), 3, target).numpy()
        got = decode_jpeg_strict(enc, 3, [oy, ox, ch, cw], target).numpy()
        np.testing.assert_array_equal(got, want, err_msg=f"{oy, ox, ch, cw} -> {target}")
    gray = tf.io.encode_jpeg(tf.io.decode_jpeg(enc, channels=1), quality=90).numpy()
    np.testing.assert_array_equal(decode_jpeg_strict(gray, 3, [3, 5, 300, 400], (70, 90)),
                                  decode_and_crop_scaled(gray, (3, 5, 300, 400), 3, (70, 90)))


# ---------------------------------------------------------------- the pipeline
@pytest.fixture(scope="module")
def big_dataset(tmp_path_factory) -> str:
    """Photo crops of 150-330 px, for a 32x32 output: every ratio occurs."""
    rng = np.random.default_rng(11)
    photos = list(sample_data.source_photos().values())
    recs = []
    for i in range(24):
        img = sample_data.random_crop(photos[i % len(photos)], rng, (150, 330))
        fmt = "png" if i % 8 == 3 else "jpeg"
        recs.append(_example(sample_data.encode(img, fmt), fmt, i % CLASSES))
    out = tmp_path_factory.mktemp("dct")
    write_shards(out, "train", recs, 2, eval_links=True)
    return str(out / "*.tfrecord")


def _overrides(path: str, **over) -> dict:
    """imagenet at 32x32, L1 + L2 only (uint8, no colour ops): the decode is what
    differs between the paths and the hosts here."""
    return {"data.path": path, "data.num_classes": CLASSES, "data.image_size": [32, 32],
            "pipeline.batch_size": 8, "pipeline.shuffle_buffer": 0,
            "data.output_dtype": "uint8", "augment.pixel": {}, **over}


def _config(path: str, **over):
    from tfpipe import load_config

    return load_config("imagenet", _overrides(path, **over))


def _digest(batches: list[np.ndarray]) -> str:
    import hashlib

    h = hashlib.sha256()
    for a in batches:
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _batches(cfg, split: str, n: int = 2) -> list[np.ndarray]:
    from tfpipe import build_pipeline

    return [b["image"].numpy() for b in build_pipeline(cfg, split=split).take(n)]


CHILD = """
import hashlib, json, sys
import tfpipe
out = {}
for split in ("train", "val"):
    h = hashlib.sha256()
    for b in tfpipe.build_pipeline(tfpipe.load_config("imagenet", json.loads(sys.argv[1])),
                                   split=split).take(2):
        h.update(b["image"].numpy().tobytes())
    out[split] = h.hexdigest()[:16]
print("HASHES " + json.dumps(out))
"""

# Another host, emulated through the run-time dispatch knobs
# (test_host_independence.py has the full list): libjpeg-turbo without SIMD (its
# scaled IDCTs have SSE2 kernels of their own) and the pure-TF path (the native
# kernels off), against this process (SIMD, native kernels when built).
OTHER_HOST = {"JSIMD_FORCENONE": "1", "TFPIPE_NATIVE": "0"}


@pytest.mark.slow
def test_pipeline_same_bytes_native_or_pure_tf_on_another_host(big_dataset, tmp_path):
    """The imagenet train and eval pipelines (every DCT ratio occurs) give the same
    bytes in a fresh process with libjpeg's SIMD off and pure TF; the switch is live."""
    import json
    import os
    import subprocess
    import sys

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {k: v for k, v in os.environ.items()
           if k not in ("JSIMD_FORCESSE2",)}
    env.update(OTHER_HOST, TF_CPP_MIN_LOG_LEVEL="2")
    child = subprocess.Popen([sys.executable, str(script), json.dumps(_overrides(big_dataset))],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        on = {split: _batches(_config(big_dataset), split) for split in ("train", "val")}
        off = _batches(_config(big_dataset, **{"data.dct_scaling": False}), "val")
        assert any(not np.array_equal(a, b) for a, b in zip(on["val"], off))
        out, err = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, f"child failed\n{err[-3000:]}"
    line = [ln for ln in out.splitlines() if ln.startswith("HASHES ")]
    assert line, err[-3000:]
    assert json.loads(line[-1][len("HASHES "):]) == {k: _digest(v) for k, v in on.items()}


def test_switch_validated():
    from tfpipe import load_config

    with pytest.raises(ConfigError, match="dct_scaling"):
        load_config("imagenet", {"data.dct_scaling": "sometimes"})
    assert load_config("imagenet").data.dct_scaling is True


def test_serving_follows_the_switch(jpegs):
    """eval_preprocessing (stock ops and native) renders as the eval pipeline's L1
    does, and follows data.dct_scaling."""
    from tfpipe import load_config
    from tfpipe.pipeline.serving import eval_preprocessing

    enc = tf.constant(jpegs["420"])
    out = {}
    for flag in (True, False):
        cfg = load_config("imagenet", {"data.image_size": [48, 64], "data.dct_scaling": flag})
        stock = eval_preprocessing(cfg).image(enc).numpy()
        if native.available():
            np.testing.assert_array_equal(
                eval_preprocessing(cfg, stock_ops=False).image(enc), stock)
        out[flag] = stock
    assert out[True].shape == out[False].shape == (48, 64, 3)
    assert not np.array_equal(out[True], out[False])
