"""Elastic deformation (Simard et al. 2003; same alpha/sigma meaning as albumentations).

A displacement field ``d = alpha * G_sigma * U(-1, 1)`` (uniform noise blurred by a
Gaussian of `sigma` pixels) warps the image backwards: ``out(x, y) = in(x + dx, y + dy)``.

Speed: blurring full-resolution noise with a large sigma is the expensive part
(a 6*sigma-tap filter per pixel). Because the blurred field is smooth, we draw the
noise on a grid `f` times coarser (f ~ sigma / 3), blur it there with sigma / f and
upsample bilinearly with `tf.image.resize`; the amplitude is rescaled by 1 / f so the
field has the same per-pixel standard deviation as the full-resolution recipe
(checked against OpenCV's blur in tests/augment/test_elastic.py).

Native kernels (tfpipe.native.elastic, elastic.cc): when built, the field's noise +
blur and the warp without `matrix` each run as one op with the same bits as the plain
graph below (tests/native/test_elastic_native.py).

No matrix can describe the warp, so `elastic` returns ``(image, field)`` where
``field`` is ``[H, W, 2]`` float32 (dx, dy) in output pixels; boxes follow with
`elastic_boxes`, which maps points sampled along each box edge forwards through the
field (fixed-point inverse of the backward map) and takes their bounding box.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Sequence
from typing import Union

import numpy as np
import tensorflow as tf

from tfpipe.augment.boxes import area
from tfpipe.augment.geometry import image_size, remap, split_seeds
from tfpipe.native import elastic as native_elastic
from tfpipe.seeds import ALG

Size = Union[Sequence[int], tf.Tensor]


def _gaussian_kernel(sigma: float) -> tuple[list[float], int]:
    """Normalized Gaussian taps as float32-representable Python floats.

    Computed with `decimal` (correctly rounded, pure software): libm's exp and
    NumPy's SIMD exp have per-CPU variants (glibc picks an FMA version at run
    time) whose last bits may differ, and so would the warp."""
    radius = max(1, int(math.ceil(3.0 * sigma)))
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        s = decimal.Decimal(sigma)
        k = [(decimal.Decimal(-0.5) * (decimal.Decimal(i) / s) ** 2).exp()
             for i in range(-radius, radius + 1)]
        total = sum(k)
        taps = [float(np.float32(float(v / total))) for v in k]
    return taps, radius


def _blur_valid(x: tf.Tensor, taps: list[float], axis: int) -> tf.Tensor:
    """VALID 1-D convolution of x [N, H, W, C] along axis 1 or 2: sum_k taps[k] * shift_k,
    accumulated left to right with elementwise ops. A (depthwise) convolution would run
    in oneDNN, whose kernel and summation order depend on the host's ISA."""
    n = len(taps)
    size = tf.shape(x)[axis] - (n - 1)
    acc = None
    for k, t in enumerate(taps):
        part = x[:, k:k + size] if axis == 1 else x[:, :, k:k + size]
        term = part * t
        acc = term if acc is None else acc + term
    return acc


def sample_elastic_field(seed: tf.Tensor, image_size: Size, alpha: float, sigma: float,
                         coarse: bool = True) -> tf.Tensor:
    """Displacement field [H, W, 2] (dx, dy) in pixels for an image of `image_size`.

    coarse=True draws the noise on a grid ~sigma/3 times coarser and upsamples
    (fast, same statistics); coarse=False blurs full-resolution noise (reference).
    """
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    size = tf.cast(tf.convert_to_tensor(image_size), tf.int32)
    h, w = size[0], size[1]
    factor = max(1, int(sigma // 3)) if coarse else 1
    sigma_c = sigma / factor
    taps, radius = _gaussian_kernel(sigma_c)
    gh = (h + factor - 1) // factor + 1
    gw = (w + factor - 1) // factor + 1
    # iid noise with a `radius` margin: a VALID blur then needs no border handling
    noise_seed = split_seeds(seed, 1)[0]
    if native_elastic.available():  # the same draws and sums in one native pass
        field = native_elastic.noise_blur(noise_seed, gh + 2 * radius, gw + 2 * radius, taps)
    else:
        noise = tf.random.stateless_uniform(tf.stack([1, gh + 2 * radius, gw + 2 * radius, 2]),
                                            noise_seed, minval=-1.0, maxval=1.0, alg=ALG)
        field = _blur_valid(_blur_valid(noise, taps, 1), taps, 2)[0]  # [gh, gw, 2]
    if factor > 1:
        # grid node i sits at pixel i*factor: resize the (gh-1)*factor span, then cut to h, w
        span = tf.stack([(gh - 1) * factor + 1, (gw - 1) * factor + 1])
        field = tf.raw_ops.ResizeBilinear(images=field[None], size=span,
                                          align_corners=True)[0]
    field = field[:h, :w]
    return field * (alpha / factor)


# The gather sampler is a chain of small elementwise ops around 4 gathers; XLA fuses
# it into one loop: 3.2x the plain graph for a 224x224 elastic warp inside tf.data
# (262 -> 830 img/s, same run). Opt-in only (`xla=True`): XLA's CPU backend picks
# vector width and FMA contraction per host, so the warped pixels would differ
# between CPU generations; the pipeline never passes it.
_remap_xla = tf.function(remap, jit_compile=True, autograph=False)


def elastic(image: tf.Tensor, seed: tf.Tensor, alpha: float, sigma: float,
            interpolation: str = "bilinear", fill_mode: str = "reflect",
            fill_value: float = 0.0, matrix: tf.Tensor | None = None,
            coarse: bool = True, xla: bool = False) -> tuple[tf.Tensor, tf.Tensor]:
    """Elastic warp of an [H, W, C] image; returns (image, field [H, W, 2]).

    alpha: displacement scale in pixels; sigma: smoothness in pixels (albumentations
    semantics). With `matrix` (source -> output, same size), the affine and the elastic
    warp are fused into ONE resample: out(q) = in(M^-1 (q + d(q))).
    xla: run the resampling under XLA (opt-in, ~3x faster at 224x224): its float
    rounding differs from the plain graph by ~1 ulp (1 level on uint8, rarely) and
    from one CPU generation to another, so the default (False, what the pipeline
    runs) is the plain graph, whose bits do not depend on the host.
    """
    image = tf.convert_to_tensor(image)
    h, w = image_size(image)
    field = sample_elastic_field(seed, (h, w), alpha, sigma, coarse)
    if (matrix is None and not xla and image.shape.rank == 3
            and native_elastic.usable(image.dtype, interpolation, fill_mode)):
        # the twin below (meshgrid + adds + `remap`), bit for bit, in one pass
        out = native_elastic.remap(image, field, interpolation, fill_mode, float(fill_value))
        return tf.ensure_shape(out, image.shape), field
    ys, xs = tf.meshgrid(tf.range(h, dtype=tf.float32), tf.range(w, dtype=tf.float32),
                         indexing="ij")
    px, py = xs + field[..., 0], ys + field[..., 1]
    if matrix is not None:
        inv = tf.linalg.inv(tf.convert_to_tensor(matrix, tf.float32))
        den = inv[2, 0] * px + inv[2, 1] * py + inv[2, 2]
        px, py = ((inv[0, 0] * px + inv[0, 1] * py + inv[0, 2]) / den,
                  (inv[1, 0] * px + inv[1, 1] * py + inv[1, 2]) / den)
    sampler = _remap_xla if xla else remap
    out = sampler(image, px, py, interpolation, fill_mode, float(fill_value))
    return tf.ensure_shape(out, image.shape), field


def _sample_field(field: tf.Tensor, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """Bilinear lookup of field [H,W,2] at float points (clamped to the image)."""
    shape = tf.shape(field)
    h, w = shape[0], shape[1]
    x = tf.clip_by_value(x, 0.0, tf.cast(w - 1, tf.float32))
    y = tf.clip_by_value(y, 0.0, tf.cast(h - 1, tf.float32))
    x0f, y0f = tf.floor(x), tf.floor(y)
    tx, ty = (x - x0f)[..., None], (y - y0f)[..., None]
    x0, y0 = tf.cast(x0f, tf.int32), tf.cast(y0f, tf.int32)
    x1, y1 = tf.minimum(x0 + 1, w - 1), tf.minimum(y0 + 1, h - 1)
    flat = tf.reshape(field, [-1, 2])

    def g(yi: tf.Tensor, xi: tf.Tensor) -> tf.Tensor:
        return tf.gather(flat, yi * w + xi)

    top = g(y0, x0) * (1 - tx) + g(y0, x1) * tx
    bot = g(y1, x0) * (1 - tx) + g(y1, x1) * tx
    return top * (1 - ty) + bot * ty


def elastic_boxes(boxes: tf.Tensor, field: tf.Tensor, min_visibility: float = 0.0,
                  min_area: float = 0.0, samples_per_edge: int = 16,
                  iterations: int = 3) -> tuple[tf.Tensor, tf.Tensor]:
    """Boxes [N,4] (normalized yxyx) through an `elastic` field; returns (boxes, keep).

    Points along each box edge are moved to where the warp puts them (solve
    q + d(q) = p by fixed-point iteration from q = p) and the box becomes their
    bounding box, clipped to the image; keep as in `transform_boxes`.
    """
    boxes = tf.convert_to_tensor(boxes, tf.float32)
    field = tf.convert_to_tensor(field, tf.float32)
    hf = tf.cast(tf.shape(field)[0], tf.float32)
    wf = tf.cast(tf.shape(field)[1], tf.float32)
    y0, x0, y1, x1 = [v[:, None] for v in tf.unstack(boxes, axis=-1)]
    t = tf.linspace(0.0, 1.0, samples_per_edge)[None]
    xs = tf.concat([x0 + (x1 - x0) * t, x0 + (x1 - x0) * t, x0 + 0 * t, x1 + 0 * t], 1)
    ys = tf.concat([y0 + 0 * t, y1 + 0 * t, y0 + (y1 - y0) * t, y0 + (y1 - y0) * t], 1)
    px, py = xs * wf - 0.5, ys * hf - 0.5
    qx, qy = px, py
    for _ in range(iterations):
        d = _sample_field(field, qx, qy)
        qx, qy = px - d[..., 0], py - d[..., 1]
    full = tf.stack([(tf.reduce_min(qy, 1) + 0.5) / hf, (tf.reduce_min(qx, 1) + 0.5) / wf,
                     (tf.reduce_max(qy, 1) + 0.5) / hf, (tf.reduce_max(qx, 1) + 0.5) / wf], -1)
    clipped = tf.clip_by_value(full, 0.0, 1.0)
    clip_area = area(clipped)
    vis = tf.math.divide_no_nan(clip_area, area(full))
    nonempty = area(boxes) > 0.0
    keep = nonempty & (clip_area > 0) & (vis >= min_visibility) & (clip_area * hf * wf >= min_area)
    return tf.where(nonempty[:, None], clipped, 0.0), keep
