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

    .venv/bin/python benchmarks/pixel_bench.py --fused [--batch 64] [--rounds 5]

compares the pipeline's fused batched L3 (`tfpipe.pipeline.fast.FusedPixel`: one
`tf.function(jit_compile=True)` over a uint8 [B,224,224,3] batch with per-sample
parameters) with the previous formulation of the same chain (the public kernels
composed in one jit: contrast's `reduce_mean` and saturation's `reduce_max/min`,
which XLA:CPU runs as library reductions over a float32 copy of the batch), as
ms/img of warm calls and as a ratio to the XLA-compiled normalize alone, plus the
same chains inside `tf.data` (a map over repeated batches) with the pipeline's
private thread pool and with `max_intra_op_parallelism=1`.

    .venv/bin/python benchmarks/pixel_bench.py --native [--batch 64] [--rounds 3]

the host-independence change side by side, same batches, one run: the old XLA
chain (the XLA-friendly kernels -- contrast's mean as a dot, saturation from
channel slices -- and normalize, each in `tf.function(jit_compile=True)`, copied
here since the library no longer has them) vs the native `TfpipePixelChain` that
FusedPixel / `normalizer` now run, vs their pure-TF twin (no native library).
Ratios are to the old XLA normalize alone.
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


# --------------------------------------------------------------------------- --fused
def _previous_chain(ops, to_float: bool, normalize: bool):
    """The fused chain as it was before the XLA-friendly kernels (p = 1 ops only):
    cast, the public `adjust_*` kernels in order, normalize, in one jit."""
    from tfpipe.pipeline.fast import FUSABLE

    kernels = [getattr(A.color, FUSABLE[op.name][1]) for op in ops]

    def chain(x, p, a):
        x = tf.cast(x, tf.float32) * (1.0 / 255.0) if to_float else x
        for j, kernel in enumerate(kernels):
            x = kernel(x, p[:, j])
        return A.normalize(x, MEAN, STD) if normalize else x
    return tf.function(chain, jit_compile=True, reduce_retracing=True)


def _fused_variants(batch: int):
    from tfpipe.pipeline._settings import Op
    from tfpipe.pipeline.fast import FusedPixel

    ops = [Op("brightness", params={"max_delta": 0.4}), Op("contrast", params={"lower": 0.6, "upper": 1.4}),
           Op("saturation", params={"lower": 0.6, "upper": 1.4})]
    rng = np.random.default_rng(0)
    params = tf.constant(np.stack([rng.uniform(-0.4, 0.4, batch), rng.uniform(0.6, 1.4, batch),
                                   rng.uniform(0.6, 1.4, batch)], 1).astype(np.float32))
    apply = tf.ones([batch, 3], tf.bool)
    norm = tf.function(lambda x: A.normalize(x, MEAN, STD), jit_compile=True)  # XLA reference
    out: list[tuple[str, object]] = [("XLA normalize alone (reference)", lambda x, p, a: norm(x))]
    for n, label in ((2, "b+c+normalize"), (3, "b+c+s+normalize")):
        fused = FusedPixel(ops[:n], MEAN, STD)
        prev = _previous_chain(ops[:n], True, True)
        out.append((f"{label}, previous", lambda x, p, a, f=prev, n=n: f(x, p[:, :n], a[:, :n])))
        out.append((f"{label}, FusedPixel", lambda x, p, a, f=fused, n=n: f(
            x, p[:, :n], a[:, :n], to_float=True, normalize=True)))
    fused = FusedPixel(ops, MEAN, STD)
    prev = _previous_chain(ops, False, False)
    out.append(("uint8 b+c+s, previous", lambda x, p, a: prev(x, p, a)))
    out.append(("uint8 b+c+s, FusedPixel", lambda x, p, a: fused(x, p, a, to_float=False, normalize=False)))
    return out, params, apply


# --------------------------------------------------------------------------- --native
def _old_xla_chain(ops, to_float: bool, normalize: bool):
    """FusedPixel's chain before the host-independence change (p = 1 ops): XLA forms of
    contrast (channel mean as two einsums with ones) and saturation (max/min of slices)."""
    C = A.color

    def mean_dot(x):
        shape = tf.shape(x)
        s = tf.einsum("...hwc,h->...wc", x, tf.ones(shape[-3:-2], x.dtype))
        s = tf.einsum("...wc,w->...c", s, tf.ones(shape[-2:-1], x.dtype))
        return (s / tf.cast(shape[-3] * shape[-2], x.dtype))[..., None, None, :]

    def contrast(image, f):
        x, _ = C._as_float(image)
        m = mean_dot(x)
        return C._restore((x - m) * C._param(f, x) + m, image.dtype)

    def saturation(image, f):
        x, _ = C._as_float(image)
        f = C._param(f, x)
        r, g, b = x[..., 0:1], x[..., 1:2], x[..., 2:3]
        v = tf.maximum(tf.maximum(r, g), b)
        chroma = v - tf.minimum(tf.minimum(r, g), b)
        q = tf.minimum(f, tf.math.divide_no_nan(v, chroma))
        q = tf.where(chroma > 0, q, tf.zeros_like(q))
        return C._restore(v - q * (v - x), image.dtype)

    kernels = {"brightness": C.adjust_brightness, "contrast": contrast, "saturation": saturation}

    def chain(x, p, a):
        y = tf.cast(x, tf.float32)
        y = y * (1.0 / 255.0) if to_float else C._Levels(y)
        for j, op in enumerate(ops):
            y = kernels[op.name](y, p[:, j])
        if not to_float:
            y = tf.cast(y.x, tf.uint8)
        return C.normalize(y, MEAN, STD) if normalize else y
    return tf.function(chain, jit_compile=True, reduce_retracing=True)


def _native_variants(batch: int):
    from tfpipe.native import pixel
    from tfpipe.pipeline._settings import Op
    from tfpipe.pipeline.fast import FusedPixel, normalizer

    if not pixel.available():
        raise SystemExit("--native needs the built library: python -m tfpipe.native build")
    ops = [Op("brightness", params={"max_delta": 0.4}), Op("contrast", params={"lower": 0.6, "upper": 1.4}),
           Op("saturation", params={"lower": 0.6, "upper": 1.4})]
    rng = np.random.default_rng(0)
    params = tf.constant(np.stack([rng.uniform(-0.4, 0.4, batch), rng.uniform(0.6, 1.4, batch),
                                   rng.uniform(0.6, 1.4, batch)], 1).astype(np.float32))
    apply = tf.ones([batch, 3], tf.bool)
    old_norm = tf.function(lambda x: A.normalize(x, MEAN, STD), jit_compile=True)
    new_norm = normalizer(MEAN, STD)
    out: list[tuple[str, object]] = [
        ("normalize, old XLA (reference)", lambda x, p, a: old_norm(x)),
        ("normalize, native", lambda x, p, a: new_norm(x)),
        ("normalize, plain TF (fallback)", lambda x, p, a: A.normalize(x, MEAN, STD))]
    for n, label in ((2, "b+c+normalize"), (3, "b+c+s+normalize")):
        fused = FusedPixel(ops[:n], MEAN, STD)
        old = _old_xla_chain(ops[:n], True, True)
        out.append((f"{label}, old XLA", lambda x, p, a, f=old, n=n: f(x, p[:, :n], a[:, :n])))
        out.append((f"{label}, native", lambda x, p, a, f=fused, n=n: f(
            x, p[:, :n], a[:, :n], to_float=True, normalize=True)))
        out.append((f"{label}, plain-TF twin", lambda x, p, a, f=fused, n=n: f._chain(
            x, p[:, :n], a[:, :n], True, True)))
    fused = FusedPixel(ops, MEAN, STD)
    old = _old_xla_chain(ops, False, False)
    out.append(("uint8 b+c+s, old XLA", lambda x, p, a: old(x, p, a)))
    out.append(("uint8 b+c+s, native", lambda x, p, a: fused(x, p, a, to_float=False, normalize=False)))
    return out, params, apply


def _call_times(fn, args, reps: int) -> list[float]:
    fn(*args)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        # eager CPU ops are synchronous; .numpy() of the whole batch would time a 38 MB copy
        fn(*args)[:1, :1, :1, :1].numpy()
        ts.append(time.perf_counter() - t0)
    return ts


def _in_tfdata(fn, args, batch: int, seconds: float, intra_op: int | None) -> float:
    ds = tf.data.Dataset.from_tensors(args).repeat().map(lambda x, p, a: fn(x, p, a), num_parallel_calls=2)
    opts = tf.data.Options()
    opts.threading.private_threadpool_size = 2  # what the pipeline sets on this 2-CPU box
    if intra_op is not None:
        opts.threading.max_intra_op_parallelism = intra_op
    return rate(ds.with_options(opts), batch, seconds)


def fused_main(args, native: bool = False) -> None:
    images = _photos(args.size, args.batch)
    variants, params, apply = (_native_variants if native else _fused_variants)(args.batch)
    call_args = (tf.constant(images), params, apply)
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    for _ in range(args.rounds):  # interleaved: load drifts hit every variant
        for name, fn in variants:
            times[name] += _call_times(fn, call_args, 4)
    print(f"direct calls, {args.batch}x{args.size}x{args.size}x3 uint8 in, ms/img (min / median), "
          f"x = ratio to the reference row")
    ref_min, ref_med = min(times[variants[0][0]]), np.median(times[variants[0][0]])
    for name, _ in variants:
        t = times[name]
        print(f"{name:34s} {min(t) / args.batch * 1e3:7.4f} / {np.median(t) / args.batch * 1e3:7.4f}"
              f"   x{min(t) / ref_min:5.2f} / x{np.median(t) / ref_med:5.2f}")
    picked = [v for v in variants if "twin" not in v[0] and "fallback" not in v[0]][:7] \
        if native else variants[:5]
    rates: dict[str, list[float]] = {}
    for _ in range(2):
        for name, fn in picked:
            for intra in (None, 1):
                key = f"{name}{'' if intra is None else ', intra_op 1'}"
                rates.setdefault(key, []).append(
                    _in_tfdata(fn, call_args, args.batch, args.seconds, intra))
    print("inside tf.data (map over repeated batches, npc 2, private pool 2), img/s")
    ref = np.median(rates[variants[0][0]])
    for key, r in rates.items():
        print(f"{key:46s} {np.median(r):8.0f}   x{np.median(r) / ref:5.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--fused", action="store_true", help="the fused L3 chain: previous vs FusedPixel")
    ap.add_argument("--native", action="store_true",
                    help="old XLA chain vs the native chain vs its pure-TF twin")
    args = ap.parse_args()
    if args.fused or args.native:
        fused_main(args, native=args.native)
        return
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
