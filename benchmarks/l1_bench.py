"""Micro-benchmark of the tfpipe imagenet train path: L1 decode variants, options, overheads.

Every variant in ONE process, measured in alternating rounds; each figure is
images/s and its ratio to full `decode_jpeg` measured in the same round (the
machine is shared and noisy: compare ratios, not absolute numbers).

    .venv/bin/python benchmarks/l1_bench.py --images 512 --rounds 3 --steps 6

Data: JPEG q90 crops (~460x390) of the photos bundled with scikit-image /
scikit-learn (`tfpipe.sample_data.make_jpeg_bytes`), 4 plain TFRecord shards.
Batch 64 of 224x224x3; the tfpipe variants run RRC + flip + brightness +
contrast + normalize (float32 out) unless the name says otherwise. With
`tfpipe.native` built, the defaults run the native resize and a
`TFPIPE_NATIVE=0` twin runs the pure-TF fallback in the same rounds. The
"planned" variants get each record's crop-window draws with the record
(as the pipeline's block plan delivers them) and compare the per-image window
arithmetic: pure TF vs the native `TfpipeCropWindow` vs the same windows
precomputed (no per-image window work; the ceiling).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

BATCH = 64
SIZE = (224, 224)


def make_data(root: Path, n: int) -> str:
    from tfpipe.sample_data import make_jpeg_bytes

    jpegs = make_jpeg_bytes(n, seed=0)
    for s in range(4):
        with tf.io.TFRecordWriter(str(root / f"train-{s:05d}-of-00004.tfrecord")) as w:
            for i in range(s, n, 4):
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpegs[i]])),
                    "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"jpeg"])),
                    "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10])),
                }))
                w.write(ex.SerializeToString())
    return str(root / "train-*.tfrecord")


def _records(glob: str) -> tf.data.Dataset:
    files = sorted(tf.io.gfile.glob(glob))
    return tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=4, deterministic=True)


def _encoded(x: tf.Tensor) -> tf.Tensor:
    return tf.io.parse_single_example(
        x, {"image/encoded": tf.io.FixedLenFeature([], tf.string)})["image/encoded"]


def _window(enc: tf.Tensor) -> tf.Tensor:
    from tfpipe.augment import sample_crop_window

    shape = tf.io.extract_jpeg_shape(enc)
    return tf.stack(sample_crop_window(tf.constant([1, 2], tf.int64), shape[0], shape[1],
                                       (0.08, 1.0), (0.75, 4 / 3)))


def raw_variants(glob: str) -> dict[str, Callable[[], tf.data.Dataset]]:
    npc = 8  # PERF-NOTES: fixed 8 beat AUTOTUNE on this box

    def decode_only() -> tf.data.Dataset:
        return _records(glob).map(
            lambda x: tf.io.decode_jpeg(_encoded(x), channels=3)[0, 0, 0],
            num_parallel_calls=npc).batch(BATCH)

    def decode_and_crop() -> tf.data.Dataset:
        def f(x):
            enc = _encoded(x)
            return tf.io.decode_and_crop_jpeg(enc, _window(enc), channels=3)[0, 0, 0]
        return _records(glob).map(f, num_parallel_calls=npc).batch(BATCH)

    def decode_and_crop_resize() -> tf.data.Dataset:
        def f(x):
            enc = _encoded(x)
            return tf.image.resize(tf.io.decode_and_crop_jpeg(enc, _window(enc), channels=3), SIZE)
        return _records(glob).map(f, num_parallel_calls=npc).batch(BATCH)

    def decode_and_crop_resize_u8(use_native: bool) -> Callable[[], tf.data.Dataset]:
        # what resize_uint8 runs: pure TF (resize + round + saturate) or the native op
        from tfpipe import native

        def f(x):
            enc = _encoded(x)
            crop = tf.io.decode_and_crop_jpeg(enc, _window(enc), channels=3)
            if use_native:
                return native.resize_bilinear_u8(crop, SIZE)
            return tf.saturate_cast(tf.round(tf.image.resize(crop, SIZE)), tf.uint8)
        return lambda: _records(glob).map(f, num_parallel_calls=npc).batch(BATCH)

    def planned_window(window: str) -> Callable[[], tf.data.Dataset]:
        # what the pipeline's per-sample map does since the block plan: the draws
        # arrive with the record (Classify.plan), only the size-dependent window
        # arithmetic runs per image -- pure TF or the native op; "precomputed"
        # receives the very same windows ready-made (no window arithmetic at all:
        # the ceiling; same crops, so the same decode and resize work)
        from tfpipe import native
        from tfpipe.augment import crop_window_draws
        from tfpipe.augment.geometry import _crop_window_tf

        ratio = (0.75, 4 / 3)
        shapes = [tf.io.extract_jpeg_shape(_encoded(x))[:2] for x in _records(glob)]
        n = len(shapes)
        draws = crop_window_draws(tf.stack([tf.range(n, dtype=tf.int64),
                                            tf.fill([n], tf.constant(7, tf.int64))], 1),
                                  (0.08, 1.0), ratio)
        if window == "precomputed":
            planned = tf.stack([tf.stack(_crop_window_tf(d, hw[0], hw[1], *ratio))
                                for d, hw in zip(draws, shapes)])
        else:
            planned = draws

        def f(x, d):
            enc = _encoded(x)
            if window == "precomputed":
                win = d
            else:
                shape = tf.io.extract_jpeg_shape(enc)
                if window == "native":
                    win = tf.stack(native.crop_window(d, shape[0], shape[1], ratio))
                else:
                    win = tf.stack(_crop_window_tf(d, shape[0], shape[1], *ratio))
            crop = tf.io.decode_and_crop_jpeg(enc, win, channels=3)
            return native.resize_bilinear_u8(crop, SIZE)
        return lambda: tf.data.Dataset.zip(
            (_records(glob), tf.data.Dataset.from_tensor_slices(planned))).map(
            f, num_parallel_calls=npc).batch(BATCH)

    out = {"full decode_jpeg only": decode_only,
           "decode_and_crop_jpeg only": decode_and_crop,
           "decode_and_crop + resize": decode_and_crop_resize,
           "decode_and_crop + resize_uint8, pure TF": decode_and_crop_resize_u8(False)}
    if _native_available():
        from tfpipe import native

        out["decode_and_crop + resize_uint8, native"] = decode_and_crop_resize_u8(True)
        out["planned: TF window + native resize"] = planned_window("tf")
        if native.has_crop_window():
            out["planned: native window + native resize"] = planned_window("native")
        out["planned: precomputed windows + native resize"] = planned_window("precomputed")
    return out


def _native_available() -> bool:
    from tfpipe import native

    return native.available()


def _native_off(build: Callable[[], tf.data.Dataset]) -> Callable[[], tf.data.Dataset]:
    """Build inside `tfpipe.native.pure_tf()`: the pure-TF fallback (decided when
    traced; what TFPIPE_NATIVE=0 gives a whole process)."""
    def run() -> tf.data.Dataset:
        from tfpipe.native import pure_tf

        with pure_tf():
            return build()
    return run


def tfpipe_variants(glob: str, only_default: bool) -> dict[str, Callable[[], tf.data.Dataset]]:
    from tfpipe.pipeline import build_pipeline

    def cfg(**over: object) -> dict:
        base: dict = {
            "seed": 0,
            "data": {"path": glob, "image_size": list(SIZE), "num_classes": 10},
            "pipeline": {"batch_size": BATCH, "shuffle_buffer": 1024},
            "augment": {"geometry": {"random_resized_crop": {"scale": [0.08, 1.0],
                                                             "ratio": [0.75, 4 / 3]},
                                     "flip": {"horizontal": True, "p": 0.5}},
                        "pixel": {"brightness": {"max_delta": 0.4},
                                  "contrast": {"lower": 0.6, "upper": 1.4}}},
        }
        for key, value in over.items():
            section, leaf = key.split("__")
            base[section][leaf] = value
        return base

    out = {"tfpipe imagenet (defaults)": lambda: build_pipeline(cfg())}
    if _native_available():  # defaults use the native resize; the fallback side by side
        out["tfpipe imagenet, TFPIPE_NATIVE=0 (pure TF)"] = _native_off(
            lambda: build_pipeline(cfg()))
    if only_default:
        return out
    out.update({
        "tfpipe npc=2 (= AUTOTUNE cap here)": lambda: build_pipeline(cfg(pipeline__num_parallel_calls=2)),
        "tfpipe npc=8": lambda: build_pipeline(cfg(pipeline__num_parallel_calls=8)),
        "tfpipe uint8 output (normalize on device)": lambda: build_pipeline(cfg(data__output_dtype="uint8")),
        "tfpipe geometry only (no L3)": lambda: build_pipeline(
            cfg(augment__pixel={})),
        "tfpipe without error isolation": _without_isolation(lambda: build_pipeline(cfg())),
    })
    return out


def _without_isolation(build: Callable[[], tf.data.Dataset]) -> Callable[[], tf.data.Dataset]:
    """Same pipeline with a plain parallel map in place of the per-record isolation."""
    def plain(ds, process, sentinel, files, policy, parallel, deterministic=True, plan=None):
        from tfpipe.pipeline._errors import _keep_full, planned

        mapped = planned(ds, plan, parallel=parallel).map(
            lambda sh, r, i, x, *row: {**process(sh, r, i, x, *row), "_local": i},
            num_parallel_calls=parallel, deterministic=deterministic)
        return mapped, _keep_full

    def run() -> tf.data.Dataset:
        import tfpipe.pipeline._build as B

        saved, B.isolate = B.isolate, plain
        try:
            return build()
        finally:
            B.isolate = saved
    return run


def measure(build: Callable[[], tf.data.Dataset], steps: int, warmup: int = 2) -> float:
    it = iter(build().repeat())
    for _ in range(warmup):
        next(it)
    t = time.perf_counter()
    for _ in range(steps):
        next(it)
    return steps * BATCH / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--quick", action="store_true", help="only decode-only vs tfpipe defaults")
    ap.add_argument("--raw", action="store_true", help="only the bare decode variants")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="l1bench-") as tmp:
        glob = make_data(Path(tmp), args.images)
        variants = {**raw_variants(glob),
                    **({} if args.raw else tfpipe_variants(glob, args.quick))}
        if args.quick:
            variants = {k: v for k, v in variants.items() if k.startswith(("full", "tfpipe"))}
        ratios: dict[str, list[float]] = {k: [] for k in variants}
        speeds: dict[str, list[float]] = {k: [] for k in variants}
        for r in range(args.rounds):
            base = None
            for name, build in variants.items():
                ips = measure(build, args.steps)
                base = ips if base is None else base
                speeds[name].append(ips)
                ratios[name].append(ips / base)
                print(f"round {r}: {name:45s} {ips:8.1f} img/s  {ips / base:5.2f}x", flush=True)
        print("\n| variant | img/s (median) | x decode-only (range) |\n|---|---|---|")
        for name in variants:
            lo, hi = min(ratios[name]), max(ratios[name])
            print(f"| {name} | {statistics.median(speeds[name]):.0f} | {lo:.2f}-{hi:.2f} |")


if __name__ == "__main__":
    main()
