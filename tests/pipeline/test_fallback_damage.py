"""The pure-TF fallback (`TFPIPE_NATIVE=0`) delivers the same samples as the native
strict decode on damaged JPEGs it can recognise (issue #22 item 7): before, a JPEG
with an end marker inside its scan was skipped by the native path and decoded
(gray from the marker on) by the fallback, so every later sample shifted.

Each pipeline runs in a fresh process (the native switch is read once per
process): the default, and TFPIPE_NATIVE=0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import _example, base_config, make_images, write_shards

SRC = str(Path(__file__).resolve().parents[2] / "src")


def scan_start(data: bytes) -> int:
    sos = data.index(b"\xff\xda")
    return sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")


def damage(data: bytes, kind: str, at: float) -> bytes:
    """The scan damaged at fraction `at` of its bytes."""
    start = scan_start(data)
    p = start + int((data.rindex(b"\xff\xd9") - start) * at)
    b = bytearray(data)
    if kind == "eoi":  # an end marker inside the scan (bit rot on a 0xFF byte)
        b[p:p + 2] = b"\xff\xd9"
    elif kind == "rst":  # a restart marker where no restart interval was declared
        b[p:p + 2] = b"\xff\xd0"
    elif kind == "truncated":  # cut mid-scan, no EOI
        return bytes(b[:p])
    else:
        raise ValueError(kind)
    return bytes(b)


# record index (in the split, = i) -> (kind, where in the scan)
DAMAGED = {3: ("eoi", 0.3), 8: ("eoi", 0.9), 13: ("rst", 0.5), 17: ("truncated", 0.7),
           22: ("eoi", 0.6), 26: ("rst", 0.95)}
N = 30


@pytest.fixture(scope="module")
def damaged_dir(tmp_path_factory) -> str:
    """2 shards x 15 JPEG records (real photo crops), 6 of them damaged."""
    import tensorflow as tf

    out = tmp_path_factory.mktemp("fallback-damage")
    jpegs = [enc for enc, fmt, img in make_images(40, seed=5) if fmt == "jpeg"]
    recs = []
    for i in range(N):
        enc = jpegs[i % len(jpegs)]
        if i in DAMAGED:
            enc = damage(enc, *DAMAGED[i])
            if DAMAGED[i][0] != "truncated":
                tf.io.decode_jpeg(enc)  # the premise: TF's own op does not fail
        recs.append(_example(enc, "jpeg", i % 4))
    write_shards(Path(out), "train", recs, 2, eval_links=True)
    return str(Path(out) / "*.tfrecord")


RUN = """
import hashlib, json, sys
from tfpipe import build_pipeline, native
from tfpipe.pipeline import reset_skipped_counts, skipped_counts
cfg = json.loads(sys.argv[1])
out = {"native": native.available()}
for split in ("train", "validation"):
    reset_skipped_counts()
    got = []
    for batch in build_pipeline(cfg, split=split, keep_index=True):
        for i, idx in enumerate(batch["index"].numpy()):
            got.append([int(idx), int(batch["label"][i].numpy()),
                        hashlib.sha256(batch["image"][i].numpy().tobytes()).hexdigest()])
    out[split] = got
    out["skipped_" + split] = sum(skipped_counts().values())
print("RESULT " + json.dumps(out))
"""


def _run(cfg: dict, native: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": SRC, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("TFPIPE_NATIVE", None)
    if not native:
        env["TFPIPE_NATIVE"] = "0"
    proc = subprocess.run([sys.executable, "-c", RUN, json.dumps(cfg)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return {**json.loads(line[len("RESULT "):]), "stderr": proc.stderr}


@pytest.mark.slow
def test_native_and_fallback_deliver_the_same_samples_on_damaged_jpegs(damaged_dir):
    from tfpipe.native import jpeg as native_jpeg

    if not native_jpeg.available():
        pytest.skip("compares with the native strict decode (python -m tfpipe.native build)")
    cfg = base_config(damaged_dir, **{"pipeline.drop_remainder": False,
                                      "pipeline.batch_size": 4})
    on, off = _run(cfg, native=True), _run(cfg, native=False)
    assert on["native"] is True and off["native"] is False
    for split in ("train", "validation"):
        assert off[split] == on[split], split
    # the eval split by the damage: the centre crop (0.875 of the shorter side) of
    # record 8 ends above its end marker at 90% of the scan, so its pixels are intact
    # and it is delivered (by both); every other damaged record is skipped
    assert sorted(i for i, _, _ in on["validation"]) == sorted(set(range(N)) - set(DAMAGED)
                                                               | {8})
    for split in ("train", "validation"):  # every record delivered or counted, once
        assert on["skipped_" + split] == off["skipped_" + split] == N - len(on[split])
    # the fallback says once, when the pipeline is built, what it cannot see
    assert off["stderr"].count("the sample set can differ") == 1
    assert "the sample set can differ" not in on["stderr"]


def _sources() -> list[bytes]:
    """Small photos as baseline 4:2:0, progressive, 4:4:4, grayscale (PIL) and with a
    restart interval (OpenCV)."""
    import io

    import cv2
    import numpy as np
    from PIL import Image

    from tfpipe.sample_data import source_photos

    out = []
    for k, (name, photo) in enumerate(sorted(source_photos().items())[:4]):
        rgb = np.asarray(Image.fromarray(photo).resize((61 + 23 * k, 47 + 17 * k)))
        for kw in ({"quality": 90}, {"quality": 85, "progressive": True},
                   {"quality": 90, "subsampling": 0}):
            buf = io.BytesIO()
            Image.fromarray(rgb).save(buf, format="JPEG", **kw)
            out.append(buf.getvalue())
        buf = io.BytesIO()
        Image.fromarray(rgb).convert("L").save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
        out.append(cv2.imencode(".jpg", rgb, [cv2.IMWRITE_JPEG_RST_INTERVAL, 1 + k])[1].tobytes())
    return out


def _native_verdict(data: bytes, window=None, target=None) -> str:
    """'ok', 'structure' (the op's marker walk), 'decode' (a libjpeg warning) or
    'error' (libjpeg itself failed: TF's op fails too)."""
    import tensorflow as tf

    from tfpipe.native.jpeg import decode_jpeg_strict

    try:
        decode_jpeg_strict(tf.constant(data), 3, window, target).numpy()
        return "ok"
    except tf.errors.InvalidArgumentError as exc:
        text = str(exc)
        if "damaged JPEG" not in text:
            return "error"
        return "decode" if "warning" in text else "structure"


def test_marker_walk_in_tf_ops_finds_what_the_native_walk_finds():
    """`jpeg_structure.structure` (graph ops) vs the native op's ScanJpegStructure,
    on intact files and damaged ones (every kind at two places, and random bytes)."""
    import numpy as np
    import tensorflow as tf

    from tfpipe.native import jpeg as native_jpeg
    from tfpipe.native import jpeg_structure as js

    if not native_jpeg.available():
        pytest.skip("compares with the native strict decode")
    walk = tf.function(js.structure)
    rng = np.random.default_rng(0)
    seen = {}
    for data in _sources():
        cases = [data, data + b"\x00\x00\x00\x18ftypmp42" + bytes(64)]  # appended data
        for kind in ("eoi", "rst", "truncated"):
            cases += [damage(data, kind, at) for at in (0.2, 0.8)]
        cases.append(damage(data, "rst", 0.5).replace(b"\xff\xd0", b"\xff\xd5", 1))
        for _ in range(4):
            b = bytearray(data)
            b[int(rng.integers(2, len(b)))] = int(rng.integers(0, 256))
            cases.append(bytes(b))
        for case in cases:
            native = _native_verdict(case)
            if native == "error":
                continue
            code = int(walk(tf.constant(case))[0])
            assert (code != js.OK) == (native == "structure"), (native, js.PROBLEMS.get(code))
            seen[native] = seen.get(native, 0) + 1
    assert seen.get("structure", 0) > 20 and seen.get("ok", 0) > 20, seen


def test_end_marker_in_the_scan_is_caught_where_the_native_decode_catches_it():
    """`_decode.checked_jpeg` (the fallback) rejects a window decode exactly when the
    native strict decode does: windows above, beside and below an end marker inside
    the scan, at DCT scales 1, 1/2, 1/4 (the rows libjpeg decodes: whole MCU rows,
    the next one as upsampling context at full scale)."""
    import numpy as np
    import tensorflow as tf

    from tfpipe.native import jpeg as native_jpeg
    from tfpipe.pipeline._decode import _rows_probe, checked_jpeg, decode_and_crop_scaled

    if not native_jpeg.available():
        pytest.skip("compares with the native strict decode")
    rng = np.random.default_rng(1)
    verdicts = {}
    for data in _sources():
        bad = tf.constant(damage(data, "eoi", float(rng.uniform(0.1, 0.95))))
        h, w = (int(v) for v in tf.io.extract_jpeg_shape(bad)[:2])
        for _ in range(12):
            ch, cw = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
            window = (int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1)), ch, cw)
            target = (int(rng.integers(4, 30)), int(rng.integers(4, 30)))
            native = _native_verdict(bad.numpy(), tf.constant(window), tf.constant(target))
            if native == "error":
                continue
            win = tuple(tf.constant(v) for v in window)
            try:
                checked_jpeg(bad, lambda e: decode_and_crop_scaled(e, win, 3, target),
                             _rows_probe(win, tf.constant([h, w]), 3, target)).numpy()
                mine = "ok"
            except tf.errors.InvalidArgumentError:
                mine = "decode"
            assert mine == native, (window, target, h, w)
            verdicts[native] = verdicts.get(native, 0) + 1
    assert verdicts.get("ok", 0) > 10 and verdicts.get("decode", 0) > 10, verdicts


def test_serving_graphs_leave_the_checks_out():
    """The fallback's checks run where the process has no strict decode
    (TFPIPE_NATIVE=0), not under `native.pure_tf()` (the serving export, whose
    signatures check their input themselves, tfpipe.export._inputs)."""
    from tfpipe import native
    from tfpipe.native import jpeg as native_jpeg

    from tfpipe import switches

    # (the switches are read once per process: override, not setenv)
    with switches.override(TFPIPE_NATIVE="0"):
        assert native_jpeg.fallback_checks() is True
        with native.pure_tf():
            assert native_jpeg.fallback_checks() is False
