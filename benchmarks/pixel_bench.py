"""Colour jitter + normalize: per-sample float32 tf.image vs tfpipe batch mode, ONE run.

    .venv/bin/python benchmarks/pixel_bench.py [--size 224] [--batch 64] [--seconds 3]

All variants do brightness (max_delta 0.4) + contrast (0.6..1.4) + normalize
(ImageNet mean/std) on in-memory uint8 photos and emit float32 [B,H,W,3] batches;
decode/read are excluded so only the pixel work is compared:

  tf.image per sample   convert_image_dtype, stateless_random_brightness/contrast,
                        (x - mean)/std with [3] vectors, in the per-sample map, then batch
  tfpipe unfused batch  per-sample params drawn in the map, uint8 batched, then
                        adjust_brightness -> adjust_contrast -> normalize on the batch
  tfpipe color_affine   same draws, then ONE fused color_affine on the uint8 batch
  color_affine/sample   the fused kernel inside the per-sample map (uint8 in, cache-sized)
  XLA                   the batch-mode function wrapped in tfpipe.augment.xla
                        (tf.function(jit_compile=True)): XLA fuses the elementwise passes
  uint8 out             color_affine without mean/std under XLA: uint8 batches, normalize
                        on the accelerator (augment.Normalize), 4x fewer bytes to move
  + saturation          the same with saturation (0.6..1.4): tf.image per sample; tfpipe
                        adjust_saturation on the uint8 batch, or per sample (uint8) before batching

Ratios to the first variant are the figures to trust (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfpipe import augment as A  # noqa: E402
from tfpipe.sample_data import source_photos  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
NPC = 8  # PERF-NOTES: fixed 8 beat AUTOTUNE here


def _photos(size: int, n: int = 64) -> np.ndarray:
    src = list(source_photos().values())
    return np.stack([cv2.resize(src[i % len(src)], (size, size), interpolation=cv2.INTER_AREA)
                     for i in range(n)])


def _base(images: np.ndarray) -> tf.data.Dataset:
    ds = tf.data.Dataset.from_tensor_slices(images).repeat()
    return ds.enumerate().map(lambda i, x: (tf.stack([tf.constant(0, tf.int64), i]), x))


def per_sample_tfimage(images, batch, saturation=False):
    mean, std = tf.constant(MEAN), tf.constant(STD)

    def f(seed, x):
        s = tf.random.experimental.stateless_split(seed, 3)
        x = tf.image.convert_image_dtype(x, tf.float32)
        x = tf.image.stateless_random_brightness(x, 0.4, s[0])
        x = tf.image.stateless_random_contrast(x, 0.6, 1.4, s[1])
        if saturation:
            x = tf.image.stateless_random_saturation(x, 0.6, 1.4, s[2])
        return (x - mean) / std
    return _base(images).map(f, num_parallel_calls=NPC).batch(batch)


def per_sample_tfimage_saturation(images, batch):
    return per_sample_tfimage(images, batch, saturation=True)


def tfpipe_saturation_per_sample(images, batch):
    def g(seed, x):
        x, d, c, s = _draw(seed, x)
        return A.adjust_saturation(x, s), d, c

    def f(x, d, c):
        return A.color_affine(x, d, c, MEAN, STD)
    return _base(images).map(g, num_parallel_calls=NPC).batch(batch).map(f, num_parallel_calls=2)


def _draw(seed, x):
    d, c = A.sample_color_affine(seed, 0.4, 0.6, 1.4)
    return x, d, c, A.sample_saturation(tf.random.experimental.stateless_fold_in(seed, 7), 0.6, 1.4)


def tfpipe_unfused(images, batch):
    def f(x, d, c, s):
        return A.normalize(A.adjust_contrast(A.adjust_brightness(x, d), c), MEAN, STD)
    return _base(images).map(_draw, num_parallel_calls=NPC).batch(batch).map(f, num_parallel_calls=2)


def tfpipe_fused(images, batch, jit=False):
    def f(x, d, c, s):
        return A.color_affine(x, d, c, MEAN, STD)
    f = A.xla(f) if jit else f
    return _base(images).map(_draw, num_parallel_calls=NPC).batch(batch).map(f, num_parallel_calls=2)


def tfpipe_fused_xla(images, batch):
    return tfpipe_fused(images, batch, jit=True)


def tfpipe_uint8_out_xla(images, batch):
    @A.xla
    def f(x, d, c, s):
        return A.color_affine(x, d, c)  # uint8 out: Normalize runs on the accelerator
    return _base(images).map(_draw, num_parallel_calls=NPC).batch(batch).map(f, num_parallel_calls=2)


def tfpipe_unfused_xla(images, batch):
    @A.xla
    def f(x, d, c, s):
        return A.normalize(A.adjust_contrast(A.adjust_brightness(x, d), c), MEAN, STD)
    return _base(images).map(_draw, num_parallel_calls=NPC).batch(batch).map(f, num_parallel_calls=2)


def tfpipe_saturation_xla(images, batch):
    @A.xla
    def f(x, d, c, s):
        return A.color_affine(A.adjust_saturation(x, s), d, c, MEAN, STD)
    return _base(images).map(_draw, num_parallel_calls=NPC).batch(batch).map(f, num_parallel_calls=2)


def tfpipe_fused_per_sample(images, batch):
    def f(seed, x):
        d, c = A.sample_color_affine(seed, 0.4, 0.6, 1.4)
        return A.color_affine(x, d, c, MEAN, STD)
    return _base(images).map(f, num_parallel_calls=NPC).batch(batch)


def tfpipe_fused_saturation(images, batch):
    def f(x, d, c, s):
        return A.color_affine(A.adjust_saturation(x, s), d, c, MEAN, STD)
    return _base(images).map(_draw, num_parallel_calls=NPC).batch(batch).map(f, num_parallel_calls=2)


def rate(ds: tf.data.Dataset, batch: int, seconds: float) -> float:
    it = iter(ds.prefetch(2))
    for _ in range(3):
        next(it)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        next(it)
        n += batch
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    images = _photos(args.size)
    variants = [("tf.image per sample (float32)", per_sample_tfimage),
                ("tfpipe unfused, batch mode", tfpipe_unfused),
                ("tfpipe color_affine, batch mode", tfpipe_fused),
                ("tfpipe color_affine, per sample", tfpipe_fused_per_sample),
                ("tfpipe unfused, batch, XLA", tfpipe_unfused_xla),
                ("tfpipe color_affine, batch, XLA", tfpipe_fused_xla),
                ("tfpipe color_affine uint8 out, XLA", tfpipe_uint8_out_xla),
                ("tf.image per sample + saturation", per_sample_tfimage_saturation),
                ("tfpipe saturation + color_affine, batch", tfpipe_fused_saturation),
                ("tfpipe saturation/sample + c_a batch", tfpipe_saturation_per_sample),
                ("tfpipe saturation + color_affine, XLA", tfpipe_saturation_xla)]
    results: dict[str, list[float]] = {name: [] for name, _ in variants}
    for _ in range(args.rounds):  # interleaved rounds: load drifts hit every variant
        for name, build in variants:
            results[name].append(rate(build(images, args.batch), args.batch, args.seconds))
    ref = np.median(results[variants[0][0]])
    print(f"size {args.size}x{args.size}, batch {args.batch}, float32 normalized output")
    for name, _ in variants:
        r = float(np.median(results[name]))
        print(f"{name:40s} {r:9.0f} img/s   x{r / ref:5.2f}")


if __name__ == "__main__":
    main()
