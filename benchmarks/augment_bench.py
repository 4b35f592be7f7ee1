"""Per-op augmentation throughput, four ways, side by side in ONE run.

    .venv/bin/python benchmarks/augment_bench.py [--sizes 224 512] [--seconds 1.0]

For each op and image size, images/s of:
  tfpipe   - tfpipe.augment op inside tf.data (map, num_parallel_calls=8, batch after)
  keras    - Keras 3 preprocessing layers inside tf.data (same map/batch set-up)
  albu     - albumentations through tf.numpy_function inside tf.data (how TF users call it)
  cv2 loop - OpenCV directly in a plain Python loop, one thread (C++ reference)
  tfpipe pure-TF - (rows that resample through `affine`) the same tfpipe op traced with
             TFPIPE_NATIVE=0, i.e. without the native TfpipeAffineWarp kernel
Input: uint8 photos (tfpipe.sample_data) resized to size x size, held in memory, so
decode/read costs are excluded. Ratios are the figures to trust (the machine is shared).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfpipe import augment as A  # noqa: E402
from tfpipe import native  # noqa: E402
from tfpipe.augment.geometry import image_size  # noqa: E402
from tfpipe.sample_data import source_photos  # noqa: E402

NPC = 8        # PERF-NOTES: a fixed 8 beat AUTOTUNE (capped at 2 threads here)
BATCH = 16     # small, so slow variants (Keras elastic: ~2 img/s at 512) finish a batch


def photos(size: int, n: int) -> np.ndarray:
    srcs = list(source_photos().values())
    return np.stack([cv2.resize(srcs[i % len(srcs)], (size, size), interpolation=cv2.INTER_AREA)
                     for i in range(n)])


def wait_idle(limit_s: float = 20.0) -> None:
    """Block until this process is (nearly) idle, so that work left over from one
    variant is not timed as the next one's."""
    deadline = time.perf_counter() + limit_s
    while time.perf_counter() < deadline:
        c0, w0 = time.process_time(), time.perf_counter()
        time.sleep(0.2)
        if (time.process_time() - c0) / (time.perf_counter() - w0) < 0.15:
            return


class DatasetRunner:
    """A warmed tf.data iterator; `run(seconds)` returns images/s over that slice."""

    def __init__(self, images: np.ndarray, fn: Callable) -> None:
        seeds = np.stack([np.zeros(len(images), np.int64), np.arange(len(images))], 1)
        ds = tf.data.Dataset.from_tensor_slices((images, seeds)).repeat()
        # map + batch, no read-ahead: the figures compare per-op cost, and work done
        # ahead (or left behind for the next variant) would blur what is counted.
        # tf.data would inject an autotuned prefetch after `batch`: switched off too.
        ds = ds.map(fn, num_parallel_calls=NPC).batch(BATCH)
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        options.autotune.enabled = False
        ds = ds.with_options(options)
        self.it = iter(ds)
        next(self.it)  # trace + warm the thread pool

    def run(self, seconds: float) -> float:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:  # may overshoot by one batch: n/elapsed
            n += int(tf.shape(next(self.it))[0])
        return n / (time.perf_counter() - t0)


class LoopRunner:
    """OpenCV in a plain Python loop, one thread."""

    def __init__(self, images: np.ndarray, fn: Callable) -> None:
        self.images, self.fn, self.i = images, fn, 0
        self.rng = np.random.default_rng(0)
        for img in images[:4]:
            fn(img, self.rng)

    def run(self, seconds: float) -> float:
        prev = cv2.getNumThreads()
        cv2.setNumThreads(1)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            self.fn(self.images[self.i % len(self.images)], self.rng)
            self.i += 1
            n += 1
        cv2.setNumThreads(prev)
        return n / (time.perf_counter() - t0)


def albu_fn(transform) -> Callable:
    def np_apply(x: np.ndarray) -> np.ndarray:
        return transform(image=x)["image"]

    def fn(x: tf.Tensor, s: tf.Tensor) -> tf.Tensor:
        out = tf.numpy_function(np_apply, [x], tf.uint8)
        return tf.ensure_shape(out, x.shape)
    return fn


def _native_off() -> contextlib.AbstractContextManager:
    return native.pure_tf()  # what TFPIPE_NATIVE=0 gives a whole process


def pure_tf(fn: Callable) -> Callable:
    """`fn` traced inside native.pure_tf() (= TFPIPE_NATIVE=0): tf.data traces the map function when the
    dataset is built, so the kernel choice is fixed into that graph."""
    def wrapped(x: tf.Tensor, s: tf.Tensor) -> tf.Tensor:
        with _native_off():
            return fn(x, s)
    return wrapped


def keras_fn(layers: list) -> Callable:
    def fn(x: tf.Tensor, s: tf.Tensor) -> tf.Tensor:
        y = tf.cast(x, tf.float32)
        for layer in layers:
            y = layer(y, training=True)
        return y
    return fn


# ----------------------------------------------------------------------------- cv2 references

def cv_affine(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    m = cv2.getRotationMatrix2D(((w - 1) / 2, (h - 1) / 2), rng.uniform(-30, 30),
                                rng.uniform(0.8, 1.2))
    sh = np.tan(np.radians(rng.uniform(-10, 10)))
    m = m @ np.array([[1, sh, -sh * (h - 1) / 2], [0, 1, 0], [0, 0, 1]])
    return cv2.warpAffine(img, m, (w, h), flags=cv2.INTER_LINEAR)


def cv_flip(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return cv2.flip(img, 1) if rng.random() < 0.5 else img


def cv_rrc(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    area = h * w * rng.uniform(0.08, 1.0)
    ar = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
    cw, ch = min(w, int(round(np.sqrt(area * ar)))), min(h, int(round(np.sqrt(area / ar))))
    y, x = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
    return cv2.resize(img[y:y + ch, x:x + cw], (w, h), interpolation=cv2.INTER_LINEAR)


def cv_elastic(img: np.ndarray, rng: np.random.Generator, alpha: float = 40.0,
               sigma: float = 6.0) -> np.ndarray:
    h, w = img.shape[:2]
    d = rng.uniform(-1, 1, (2, h, w)).astype(np.float32)
    dx = cv2.GaussianBlur(d[0], (0, 0), sigma) * alpha
    dy = cv2.GaussianBlur(d[1], (0, 0), sigma) * alpha
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    return cv2.remap(img, xs + dx, ys + dy, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)


def cv_brightness_contrast(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    a = rng.uniform(0.6, 1.4)
    b = rng.uniform(-0.2, 0.2) * 255
    mean = img.mean()
    return cv2.convertScaleAbs(img, alpha=a, beta=b + (1 - a) * mean)


# ----------------------------------------------------------------------------- op table

def chain(x: tf.Tensor, s: tf.Tensor, size: int) -> tf.Tensor:
    s1, s2, s3 = tf.unstack(tf.random.experimental.stateless_split(s, 3))
    h, w = image_size(x)
    window = A.sample_crop_window(s1, h, w, (0.25, 1.0))
    flip = tf.random.stateless_uniform([], s2) < 0.5
    mats = [A.crop_matrix(window[:2], window[2:], (size, size)),
            A.flip_matrix((size, size), flip),
            A.sample_affine_matrix(s3, (size, size), rotation=15.0, scale=(0.9, 1.1))]
    return A.apply_geometry(x, mats, (size, size))[0]


def ops(size: int) -> dict[str, dict[str, Callable | None]]:
    import albumentations as alb
    import keras

    try:
        from tfpipe.augment import color
    except ImportError:  # pixel module not there yet
        color = None
    bc = None
    if color is not None:
        def bc(x, s):
            s1, s2 = tf.unstack(tf.random.experimental.stateless_split(s, 2))
            return color.random_contrast(color.random_brightness(x, s1, 0.2), s2, 0.6, 1.4)
    table = {
        "affine (rot+scale+shear)": {
            "tfpipe": lambda x, s: A.random_affine(x, s, rotation=30.0, scale=(0.8, 1.2),
                                                   shear=10.0)[0],
            "keras": keras_fn([keras.layers.RandomRotation(30 / 360),
                               keras.layers.RandomZoom(0.2),
                               keras.layers.RandomShear(x_factor=0.18)]),
            "albu": albu_fn(alb.Affine(rotate=(-30, 30), scale=(0.8, 1.2), shear=(-10, 10),
                                       p=1.0)),
            "cv2": cv_affine,
            "tfpipe pure-TF": pure_tf(lambda x, s: A.random_affine(
                x, s, rotation=30.0, scale=(0.8, 1.2), shear=10.0)[0]),
        },
        "flip": {
            "tfpipe": lambda x, s: A.random_flip(x, s)[0],
            "keras": keras_fn([keras.layers.RandomFlip("horizontal")]),
            "albu": albu_fn(alb.HorizontalFlip(p=0.5)),
            "cv2": cv_flip,
        },
        "random resized crop": {
            "tfpipe": lambda x, s: A.random_resized_crop(x, s, (size, size))[0],
            # Keras 3 has no RandomResizedCrop: the usual stand-in is crop + resize
            "keras": keras_fn([keras.layers.RandomCrop(int(size * 0.7), int(size * 0.7)),
                               keras.layers.Resizing(size, size)]),
            "albu": albu_fn(alb.RandomResizedCrop(size=(size, size), scale=(0.08, 1.0))),
            "cv2": cv_rrc,
        },
        "elastic (alpha 40, sigma 6)": {
            "tfpipe": lambda x, s: A.elastic(x, s, 40.0, 6.0)[0],
            "keras": keras_fn([keras.layers.RandomElasticTransform(value_range=(0, 255))]),
            "albu": albu_fn(alb.ElasticTransform(alpha=40.0, sigma=6.0, p=1.0)),
            "cv2": cv_elastic,
        },
        "chain: crop+flip+affine": {
            # tfpipe composes the three matrices and resamples ONCE
            "tfpipe": lambda x, s: chain(x, s, size),
            "keras": keras_fn([keras.layers.RandomCrop(int(size * 0.7), int(size * 0.7)),
                               keras.layers.Resizing(size, size),
                               keras.layers.RandomFlip("horizontal"),
                               keras.layers.RandomRotation(15 / 360),
                               keras.layers.RandomZoom(0.1)]),
            "albu": albu_fn(alb.Compose([
                alb.RandomResizedCrop(size=(size, size), scale=(0.25, 1.0)),
                alb.HorizontalFlip(p=0.5),
                alb.Affine(rotate=(-15, 15), scale=(0.9, 1.1), p=1.0)])),
            "cv2": lambda img, rng: cv_affine(cv_flip(cv_rrc(img, rng), rng), rng),
            "tfpipe pure-TF": pure_tf(lambda x, s: chain(x, s, size)),
        },
        "elastic, xla=False": {
            "tfpipe": lambda x, s: A.elastic(x, s, 40.0, 6.0, xla=False)[0],
            "keras": None, "albu": None, "cv2": None,
        },
        "elastic, full-res blur, xla=False": {
            "tfpipe": lambda x, s: A.elastic(x, s, 40.0, 6.0, coarse=False, xla=False)[0],
            "keras": None, "albu": None, "cv2": None,
        },
        "brightness+contrast": {
            "tfpipe": bc,
            "keras": keras_fn([keras.layers.RandomBrightness(0.2, value_range=(0, 255)),
                               keras.layers.RandomContrast(0.4, value_range=(0, 255))]),
            "albu": albu_fn(alb.RandomBrightnessContrast(0.2, 0.4, p=1.0)),
            "cv2": cv_brightness_contrast,
        },
    }
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[224, 512])
    parser.add_argument("--seconds", type=float, default=1.0,
                        help="timed seconds per cell (split over the rounds)")
    parser.add_argument("--images", type=int, default=64, help="distinct images in memory")
    parser.add_argument("--rounds", type=int, default=3, help="timed slices per cell (median)")
    parser.add_argument("--only", default=None, help="substring: run only matching ops")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = []
    for size in args.sizes:
        images = photos(size, args.images)
        for name, impls in ops(size).items():
            if args.only and args.only not in name:
                continue
            # one variant at a time, its pipeline torn down before the next starts: a
            # live tf.data iterator keeps computing in the background (Keras' elastic
            # layer kept both cores busy for >30 s), which would be timed as the next
            # variant's cost
            speeds: dict[str, list[float]] = {}
            for v, fn in impls.items():
                if fn is None:
                    continue
                try:
                    runner = (LoopRunner if v == "cv2" else DatasetRunner)(images, fn)
                except Exception as exc:  # another engineer's module mid-change: say so
                    print(f"  {name} / {v}: skipped ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[-1][:120]})", flush=True)
                    continue
                speeds[v] = [runner.run(args.seconds / args.rounds) for _ in range(args.rounds)]
                del runner
                gc.collect()
                wait_idle()
            row = {"op": name, "size": size}
            for v in ("tfpipe", "keras", "albu", "cv2", "tfpipe pure-TF"):
                row[v] = float(np.median(speeds[v])) if v in speeds else None
            rows.append(row)
            print(_fmt_row(row), flush=True)
    print()
    print(f"tfpipe.native: {native.status()['detail']}")
    print("| op | size | tfpipe | keras | albu (numpy_function) | cv2 loop (1 thread) "
          "| tfpipe / albu | tfpipe / keras | tfpipe pure-TF | pure-TF / albu |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(_fmt_row(row))
    print(f"\ntotal {time.perf_counter() - start:.0f} s; images/s, batch {BATCH}, "
          f"num_parallel_calls {NPC}, {os.cpu_count()} CPUs")


def _fmt_row(row: dict) -> str:
    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:,.0f}"

    def r(a: float | None, b: float | None) -> str:
        return "-" if not a or not b else f"{a / b:.2f}"
    return (f"| {row['op']} | {row['size']} | {f(row['tfpipe'])} | {f(row['keras'])} | "
            f"{f(row['albu'])} | {f(row['cv2'])} | {r(row['tfpipe'], row['albu'])} | "
            f"{r(row['tfpipe'], row['keras'])} | {f(row['tfpipe pure-TF'])} | "
            f"{r(row['tfpipe pure-TF'], row['albu'])} |")


if __name__ == "__main__":
    main()
