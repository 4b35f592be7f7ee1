"""L2 geometry: 3x3 matrices, one resampling kernel, seeded samplers.

Convention (shared with `boxes.py`, `elastic.py`, `detection.py`): a matrix ``M``
is a float32 ``[3, 3]`` (or per-sample ``[B, 3, 3]``) that maps SOURCE pixel
coordinates ``(x, y, 1)`` -- x right, y down, pixel centres at integers -- to
OUTPUT coordinates, exactly like the 2x3 matrix of ``cv2.warpAffine`` without
``WARP_INVERSE_MAP``. ``compose(a, b)`` means "a, then b" (``b @ a``).

Every sampler takes a sample seed (int ``[2]`` tensor), draws its parameters
with ``tf.random.stateless_*`` only, and returns ``(image, matrix)`` so that boxes
follow through `tfpipe.augment.boxes.transform_boxes`. Sizes are
``(height, width)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Union

import numpy as np
import tensorflow as tf

from tfpipe import native
from tfpipe import seeds as _seeds
from tfpipe.native import affine as native_affine
from tfpipe.seeds import ALG

Size = Union[Sequence[int], tf.Tensor]
Pair = Union[float, Sequence[float]]

_INTERPOLATIONS = ("nearest", "bilinear", "bicubic")
#: random_resized_crop's default area fraction and aspect range (Inception's); the
#: config's defaults are the same numbers (`tfpipe.config.ops`, tested to agree)
CROP_SCALE = (0.08, 1.0)
CROP_RATIO = (3.0 / 4.0, 4.0 / 3.0)
_FILL_MODES = ("constant", "reflect", "wrap", "nearest")


# ----------------------------------------------------------------------------- helpers

def _check_choice(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")
    return value


def _pair(name: str, value: Pair, symmetric: bool = False) -> tuple[float, float]:
    """A number becomes (-v, v) when symmetric else (v, v); a pair is checked lo <= hi."""
    if isinstance(value, (int, float)):
        v = float(value)
        return (-abs(v), abs(v)) if symmetric else (v, v)
    lo, hi = (float(x) for x in value)
    if lo > hi:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {tuple(value)}")
    return lo, hi


# The seed plumbing (split, uniform, the p-coin; rank dispatch) lives in tfpipe.seeds;
# `split_seeds` and `bernoulli` are its `split` and `bernoulli` under the names the
# geometric samplers' callers (the pipeline's per-block plan) know.
split_seeds = _seeds.split
bernoulli = _seeds.bernoulli


def image_size(image: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(height, width) as int32 scalars of an [H,W,C] or [B,H,W,C] image (static when known)."""
    shape = tf.shape(image)
    static = image.shape
    h = static[-3] if static[-3] is not None else shape[-3]
    w = static[-2] if static[-2] is not None else shape[-2]
    return tf.cast(h, tf.int32), tf.cast(w, tf.int32)


def _hw_float(size: Size) -> tuple[tf.Tensor, tf.Tensor]:
    size = tf.cast(tf.convert_to_tensor(size), tf.float32)
    return size[0], size[1]


def _matrix(rows: Sequence[Sequence[object]]) -> tf.Tensor:
    """Build a float32 [3,3] (or [...,3,3] when entries are batched) from scalar-like entries."""
    flat = [tf.cast(tf.convert_to_tensor(v), tf.float32) for row in rows for v in row]
    batch_shape = tf.broadcast_static_shape(tf.TensorShape([]), tf.TensorShape([]))
    for v in flat:
        batch_shape = tf.broadcast_static_shape(batch_shape, v.shape)
    if batch_shape.rank:
        dyn = tf.shape(flat[0])
        for v in flat[1:]:
            dyn = tf.broadcast_dynamic_shape(dyn, tf.shape(v))
        flat = [tf.broadcast_to(v, dyn) for v in flat]
    m = tf.stack(flat, axis=-1)
    return tf.reshape(m, tf.concat([tf.shape(m)[:-1], [3, 3]], 0))


# ----------------------------------------------------------------------------- matrix builders

def identity_matrix() -> tf.Tensor:
    return tf.eye(3, dtype=tf.float32)


def translate_matrix(tx: object, ty: object) -> tf.Tensor:
    """Shift by (tx, ty) pixels: x' = x + tx, y' = y + ty."""
    return _matrix([[1.0, 0.0, tx], [0.0, 1.0, ty], [0.0, 0.0, 1.0]])


def _about(m: tf.Tensor, center: Sequence[object] | None) -> tf.Tensor:
    if center is None:
        return m
    cx, cy = center
    return compose(translate_matrix(-tf.cast(cx, tf.float32), -tf.cast(cy, tf.float32)), m,
                   translate_matrix(cx, cy))


def scale_matrix(sx: object, sy: object | None = None,
                 center: Sequence[object] | None = None) -> tf.Tensor:
    """Scale by (sx, sy) about `center` (x, y) (origin when None)."""
    sy = sx if sy is None else sy
    return _about(_matrix([[sx, 0.0, 0.0], [0.0, sy, 0.0], [0.0, 0.0, 1.0]]), center)


def rotation_matrix(angle: object, center: Sequence[object] | None = None) -> tf.Tensor:
    """Rotate by `angle` degrees, positive = counter-clockwise as displayed (y down).

    Same as ``cv2.getRotationMatrix2D(center, angle, 1.0)``.
    """
    rad = tf.cast(angle, tf.float32) * (math.pi / 180.0)
    c, s = tf.cos(rad), tf.sin(rad)
    return _about(_matrix([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]]), center)


def shear_matrix(shear_x: object, shear_y: object = 0.0,
                 center: Sequence[object] | None = None) -> tf.Tensor:
    """Shear by angles in degrees: x' = x + tan(shear_x) * y, y' = y + tan(shear_y) * x."""
    kx = tf.tan(tf.cast(shear_x, tf.float32) * (math.pi / 180.0))
    ky = tf.tan(tf.cast(shear_y, tf.float32) * (math.pi / 180.0))
    return _about(_matrix([[1.0, kx, 0.0], [ky, 1.0, 0.0], [0.0, 0.0, 1.0]]), center)


def flip_matrix(size: Size, horizontal: object = True, vertical: object = False) -> tf.Tensor:
    """Mirror an image of `size` (h, w); flags may be bool tensors (sampled flips)."""
    h, w = _hw_float(size)
    fx = tf.cast(horizontal, tf.bool)
    fy = tf.cast(vertical, tf.bool)
    sx = tf.where(fx, -1.0, 1.0)
    sy = tf.where(fy, -1.0, 1.0)
    tx = tf.where(fx, w - 1.0, 0.0)
    ty = tf.where(fy, h - 1.0, 0.0)
    return _matrix([[sx, 0.0, tx], [0.0, sy, ty], [0.0, 0.0, 1.0]])


def rot90_matrix(size: Size, k: object = 1) -> tf.Tensor:
    """Rotate an image of `size` (h, w) by k*90 degrees counter-clockwise (like `tf.image.rot90`).

    For odd k the output size is (w, h).
    """
    h, w = _hw_float(size)
    k = tf.math.floormod(tf.cast(k, tf.int32), 4)
    one, zero = tf.constant(1.0), tf.constant(0.0)
    # x_o = a*x + b*y + tx, y_o = c*x + d*y + ty for k = 0..3.
    a = tf.gather(tf.stack([one, zero, -one, zero]), k)
    b = tf.gather(tf.stack([zero, one, zero, -one]), k)
    c = tf.gather(tf.stack([zero, -one, zero, one]), k)
    d = tf.gather(tf.stack([one, zero, -one, zero]), k)
    tx = tf.gather(tf.stack([zero, zero, w - 1.0, h - 1.0]), k)
    ty = tf.gather(tf.stack([zero, w - 1.0, h - 1.0, zero]), k)
    return _matrix([[a, b, tx], [c, d, ty], [0.0, 0.0, 1.0]])


def crop_matrix(offset: Size, crop_size: Size, output_size: Size) -> tf.Tensor:
    """Crop the window at `offset` (y, x) of `crop_size` (h, w) and resize it to `output_size`.

    Edges map to edges (half-pixel centres, like `tf.image.resize`):
    x_o = (x - ox + 0.5) * ow / cw - 0.5.
    """
    oy, ox = _hw_float(offset)
    ch, cw = _hw_float(crop_size)
    oh, ow = _hw_float(output_size)
    sx, sy = ow / cw, oh / ch
    return _matrix([[sx, 0.0, (0.5 - ox) * sx - 0.5],
                    [0.0, sy, (0.5 - oy) * sy - 0.5],
                    [0.0, 0.0, 1.0]])


def resize_matrix(size: Size, output_size: Size) -> tf.Tensor:
    """Resize the whole image (same convention as `tf.image.resize`)."""
    return crop_matrix((0, 0), size, output_size)


def compose(*matrices: tf.Tensor) -> tf.Tensor:
    """The matrix applying `matrices` in order (first argument first): M_n @ ... @ M_1."""
    if not matrices:
        return identity_matrix()
    out = tf.convert_to_tensor(matrices[0], tf.float32)
    for m in matrices[1:]:
        out = _matmul3(tf.convert_to_tensor(m, tf.float32), out)
    return out


def _matmul3(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """`a @ b` for [..., 3, 3] matrices (batch dims broadcast), as elementwise
    products summed in a fixed order: (a_i0 b_0j + a_i1 b_1j) + a_i2 b_2j.

    Not `tf.linalg.matmul`: on CPU that is a oneDNN kernel chosen per host ISA
    (AVX-512 vs AVX2 blocking and FMA), so a rotated or scaled matrix, and every
    pixel warped through it, differed in the last bits between hosts
    (tests/pipeline/test_host_independence.py, segmentation)."""
    p = a[..., :, :, None] * b[..., None, :, :]  # [..., i, k, j]
    return (p[..., :, 0, :] + p[..., :, 1, :]) + p[..., :, 2, :]


# ----------------------------------------------------------------------------- kernel

def _inverse_transform_vector(matrix: tf.Tensor, batch: tf.Tensor) -> tf.Tensor:
    """[B, 8] output->input parameters for ImageProjectiveTransformV3."""
    m = tf.convert_to_tensor(matrix, tf.float32)
    if m.shape.rank == 2:
        m = tf.broadcast_to(m[None], tf.stack([batch, 3, 3]))
    inv = tf.linalg.inv(m)
    inv = inv / inv[:, 2:3, 2:3]
    return tf.reshape(inv, [-1, 9])[:, :8]


def affine(image: tf.Tensor, matrix: tf.Tensor, output_size: Size | None = None,
           interpolation: str = "bilinear", fill_mode: str = "constant",
           fill_value: float = 0.0) -> tf.Tensor:
    """Warp `image` ([H,W,C] or [B,H,W,C]) by `matrix` ([3,3] or per-sample [B,3,3]).

    One resampling pass. nearest/bilinear run in ``ImageProjectiveTransformV3``
    (computed in float32, rounded back for integer images) -- for uint8/float32 in
    the native `TfpipeAffineWarp` when built (bit-identical, faster; `TFPIPE_NATIVE=0`
    forces the TF kernel); bicubic uses the gather sampler `remap` (Keys a=-0.5,
    clamped to the input's value range).
    fill_mode: constant (fill_value), reflect (cv2 BORDER_REFLECT: ``dcba|abcd``),
    wrap, nearest (edge replicate). Output dtype = input dtype.
    """
    _check_choice("interpolation", interpolation, _INTERPOLATIONS)
    _check_choice("fill_mode", fill_mode, _FILL_MODES)
    image = tf.convert_to_tensor(image)
    single = image.shape.rank == 3
    if single:
        image = image[None]
    if output_size is None:
        output_size = image_size(image)
    out_hw = tf.cast(tf.stack(list(output_size) if not isinstance(output_size, tf.Tensor)
                              else tf.unstack(output_size)), tf.int32)
    if interpolation == "bicubic":
        out = _remap_affine(image, matrix, out_hw, interpolation, fill_mode, fill_value)
    elif native_affine.usable(image.dtype, interpolation):
        out = native_affine.affine_warp(
            image, _inverse_transform_vector(matrix, tf.shape(image)[0]), out_hw,
            interpolation, fill_mode, fill_value)
    else:
        batch = tf.shape(image)[0]
        # integer images go through float32: the kernel's uint8 path truncates (mean
        # bias -0.5 vs cv2.warpAffine) and was no faster (docs/performance-history.md)
        x = image if image.dtype == tf.float32 else tf.cast(image, tf.float32)
        out = tf.raw_ops.ImageProjectiveTransformV3(
            images=x, transforms=_inverse_transform_vector(matrix, batch),
            output_shape=out_hw, fill_value=tf.cast(fill_value, tf.float32),
            interpolation=interpolation.upper(), fill_mode=fill_mode.upper())
        if image.dtype.is_integer:
            out = tf.saturate_cast(tf.round(out), image.dtype)
        elif image.dtype != tf.float32:
            out = tf.cast(out, image.dtype)
    static_hw = [None, None]
    if not isinstance(output_size, tf.Tensor):
        static_hw = [int(s) if isinstance(s, int) else tf.get_static_value(s)
                     for s in output_size]
        static_hw = [None if s is None else int(s) for s in static_hw]
    out = tf.ensure_shape(out, [image.shape[0], *static_hw, image.shape[-1]])
    return out[0] if single else out


def _remap_affine(image: tf.Tensor, matrix: tf.Tensor, out_hw: tf.Tensor, interpolation: str,
                  fill_mode: str, fill_value: float) -> tf.Tensor:
    inv = tf.linalg.inv(tf.convert_to_tensor(matrix, tf.float32))
    if inv.shape.rank == 2:
        inv = inv[None]
    ys, xs = tf.meshgrid(tf.range(out_hw[0], dtype=tf.float32),
                         tf.range(out_hw[1], dtype=tf.float32), indexing="ij")
    # inv @ (x, y, 1) per pixel as elementwise ops, not an einsum (a oneDNN
    # contraction whose rounding depends on the host ISA: see _matmul3)
    src = [(inv[:, i, 0, None, None] * xs + inv[:, i, 1, None, None] * ys)
           + inv[:, i, 2, None, None] for i in range(3)]               # 3 x [B, h, w]
    map_x = src[0] / src[2]
    map_y = src[1] / src[2]
    batch = tf.shape(image)[0]
    map_x = tf.broadcast_to(map_x, tf.stack([batch, out_hw[0], out_hw[1]]))
    map_y = tf.broadcast_to(map_y, tf.stack([batch, out_hw[0], out_hw[1]]))
    return remap(image, map_x, map_y, interpolation, fill_mode, fill_value)


def _fold_index(i: tf.Tensor, n: tf.Tensor, fill_mode: str) -> tuple[tf.Tensor, tf.Tensor]:
    """Map integer sample positions into [0, n) per fill mode; also return 'inside' mask."""
    inside = (i >= 0) & (i < n)
    if fill_mode == "nearest" or fill_mode == "constant":
        j = tf.clip_by_value(i, 0, n - 1)
    elif fill_mode == "wrap":
        j = tf.math.floormod(i, n)
    else:  # reflect: dcba|abcd|dcba, period 2n
        j = tf.math.floormod(i, 2 * n)
        j = tf.where(j >= n, 2 * n - 1 - j, j)
    return j, inside


def _cubic_weights(t: tf.Tensor, a: float = -0.5) -> list[tf.Tensor]:
    """Keys cubic weights for taps at offsets -1, 0, 1, 2 from floor."""
    def w(d: tf.Tensor) -> tf.Tensor:
        d = tf.abs(d)
        near = ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0
        far = ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a
        return tf.where(d <= 1.0, near, tf.where(d < 2.0, far, 0.0))
    return [w(t + 1.0), w(t), w(1.0 - t), w(2.0 - t)]


def remap(image: tf.Tensor, map_x: tf.Tensor, map_y: tf.Tensor,
          interpolation: str = "bilinear", fill_mode: str = "constant",
          fill_value: float = 0.0) -> tf.Tensor:
    """Sample `image` at (map_x, map_y) source coordinates, like ``cv2.remap``.

    image [H,W,C] with maps [h,w], or [B,H,W,C] with maps [B,h,w]. Gathers from the
    flattened image (a handful of `tf.gather` calls), so it serves dense per-pixel
    warps (elastic) that no projective kernel can express.
    """
    _check_choice("interpolation", interpolation, _INTERPOLATIONS)
    _check_choice("fill_mode", fill_mode, _FILL_MODES)
    image = tf.convert_to_tensor(image)
    single = image.shape.rank == 3
    if single:
        image, map_x, map_y = image[None], map_x[None], map_y[None]
    dtype = image.dtype
    shape = tf.shape(image)
    b, h, w, c = shape[0], shape[1], shape[2], shape[3]
    flat = tf.reshape(image, tf.stack([b * h * w, c]))
    if dtype != tf.float32:
        flat = tf.cast(flat, tf.float32)
    base = (tf.range(b) * h * w)[:, None, None]
    fill = tf.cast(fill_value, tf.float32)

    def tap(yi: tf.Tensor, xi: tf.Tensor) -> tf.Tensor:
        yj, yin = _fold_index(yi, h, fill_mode)
        xj, xin = _fold_index(xi, w, fill_mode)
        vals = tf.gather(flat, base + yj * w + xj)
        if fill_mode == "constant":
            vals = tf.where((yin & xin)[..., None], vals, fill)
        return vals

    map_x = tf.cast(map_x, tf.float32)
    map_y = tf.cast(map_y, tf.float32)
    if interpolation == "nearest":
        out = tap(tf.cast(tf.round(map_y), tf.int32), tf.cast(tf.round(map_x), tf.int32))
    else:
        x0f, y0f = tf.floor(map_x), tf.floor(map_y)
        tx, ty = (map_x - x0f)[..., None], (map_y - y0f)[..., None]
        x0, y0 = tf.cast(x0f, tf.int32), tf.cast(y0f, tf.int32)
        if interpolation == "bilinear":
            top = tap(y0, x0) * (1.0 - tx) + tap(y0, x0 + 1) * tx
            bot = tap(y0 + 1, x0) * (1.0 - tx) + tap(y0 + 1, x0 + 1) * tx
            out = top * (1.0 - ty) + bot * ty
        else:
            wx = _cubic_weights(tx)
            wy = _cubic_weights(ty)
            out = 0.0
            for j in range(4):
                row = 0.0
                for i in range(4):
                    row += tap(y0 + j - 1, x0 + i - 1) * wx[i]
                out += row * wy[j]
            if dtype.is_floating:
                lo = tf.minimum(tf.reduce_min(flat), fill)
                hi = tf.maximum(tf.reduce_max(flat), fill)
                out = tf.clip_by_value(out, lo, hi)
    if dtype.is_integer:
        out = tf.saturate_cast(tf.round(out), dtype)
    elif dtype != tf.float32:
        out = tf.cast(out, dtype)
    return out[0] if single else out


def apply_geometry(image: tf.Tensor, matrices: Sequence[tf.Tensor],
                   output_size: Size | None = None, interpolation: str = "bilinear",
                   fill_mode: str = "constant", fill_value: float = 0.0
                   ) -> tuple[tf.Tensor, tf.Tensor]:
    """Compose a chain of matrices (application order) and resample ONCE."""
    m = compose(*matrices)
    return affine(image, m, output_size, interpolation, fill_mode, fill_value), m


# ----------------------------------------------------------------------------- samplers

def sample_affine_matrix(seed: tf.Tensor, image_size: Size, *, rotation: Pair = 0.0,
                         scale: Pair = (1.0, 1.0), per_axis_scale: bool = False,
                         shear: Pair = 0.0, translate: Sequence[float] = (0.0, 0.0)
                         ) -> tf.Tensor:
    """Random affine about the image centre: M = T(c + t) R S_h S T(-c).

    rotation: degrees, a number r samples in [-r, r], a pair samples in [lo, hi].
    scale: (lo, hi) factor; per_axis_scale draws x and y independently.
    shear: degrees; a number s shears x only in [-s, s]; a pair (sx, sy) shears
    x in [-sx, sx] and y in [-sy, sy]. translate: (fx, fy) maxima as fractions of
    width and height, sampled in [-f, f].

    `seed` [2] gives [3, 3]; ROWS of seeds [B, 2] give [B, 3, 3], row i
    bit-identical to the matrix of seed i alone (`sample_affine_matrices`).
    """
    rot_lo, rot_hi = _pair("rotation", rotation, symmetric=True)
    sc_lo, sc_hi = _pair("scale", scale)
    if sc_lo <= 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    if isinstance(shear, (int, float)):
        shx, shy = abs(float(shear)), 0.0
    else:
        shx, shy = (abs(float(s)) for s in shear)
    fx, fy = (abs(float(t)) for t in translate)
    seeds = split_seeds(seed, 6)  # [6, 2], or [B, 6, 2] for rows
    h, w = _hw_float(image_size)
    cx, cy = (w - 1.0) / 2.0, (h - 1.0) / 2.0
    angle = _seeds.uniform(seeds[..., 0, :], (), rot_lo, rot_hi)
    sx = _seeds.uniform(seeds[..., 1, :], (), sc_lo, sc_hi)
    sy = _seeds.uniform(seeds[..., 2, :], (), sc_lo, sc_hi) if per_axis_scale else sx
    kx = _seeds.uniform(seeds[..., 3, :], (), -shx, shx)
    ky = _seeds.uniform(seeds[..., 4, :], (), -shy, shy)
    t = _seeds.uniform(seeds[..., 5, :], [2], -1.0, 1.0) * tf.stack([fx * w, fy * h])
    rot = (rotation_matrix(angle) if angle.shape.rank == 0
           else _rotation_rows(angle, rot_lo, rot_hi))
    return compose(translate_matrix(-cx, -cy), scale_matrix(sx, sy), shear_matrix(kx, ky),
                   rot, translate_matrix(cx + t[..., 0], cy + t[..., 1]))


def sample_affine_matrices(seeds: tf.Tensor, image_size: Size, *, rotation: Pair = 0.0,
                           scale: Pair = (1.0, 1.0), per_axis_scale: bool = False,
                           shear: Pair = 0.0, translate: Sequence[float] = (0.0, 0.0)
                           ) -> tf.Tensor:
    """`sample_affine_matrix` for a block of samples: seeds [B, 2] -> [B, 3, 3].

    Row i is bit-identical to `sample_affine_matrix(seeds[i], ...)` (the matrix
    `random_affine` warps by), with a handful of kernels for the whole block
    instead of ~40 per sample: the draws are the vectorized Philox of
    `tfpipe.seeds` (the same bits), the matrices are built and multiplied batched
    (a [B, 3, 3] matmul gives each row the bits of its own [3, 3] matmul:
    tests/augment/test_affine_rows.py), and cos/sin are taken one element at a
    time (`_rotation_rows`). The pipeline's per-block plan draws its affine
    matrices here.
    """
    seeds = _seeds.as_seed(seeds)
    if seeds.shape.rank != 2:
        raise ValueError(f"seeds must be rows [B, 2], got shape {seeds.shape}")
    return sample_affine_matrix(seeds, image_size, rotation=rotation, scale=scale,
                                per_axis_scale=per_axis_scale, shear=shear,
                                translate=translate)


def _rotation_rows(angle: tf.Tensor, lo: float, hi: float) -> tf.Tensor:
    """`rotation_matrix` of each angle of [B], with the bits of the scalar call.

    WHY not `rotation_matrix(angle)`: TF's Sin/Cos run Eigen's packet psin/pcos on
    a vector but libm's sinf/cosf on a scalar, which differ in the last bit for
    a few percent of angles. A fixed range (lo == hi: every angle is `0 + lo`,
    e.g. no rotation) takes them once on a scalar; otherwise one scalar
    evaluation per row (`tf.map_fn`, per block of samples, not per sample).
    """
    if lo == hi:
        # uniform(seed, (), lo, lo) = rnd * (+0) + lo = +0 + lo for every row
        one = rotation_matrix(tf.constant(np.float32(0.0) + np.float32(lo)))
        return tf.broadcast_to(one, tf.concat([tf.shape(angle), [3, 3]], 0))
    rad = tf.cast(angle, tf.float32) * (math.pi / 180.0)
    cs = tf.map_fn(lambda a: tf.stack([tf.cos(a), tf.sin(a)]), rad,
                   fn_output_signature=tf.TensorSpec([2], tf.float32))
    c, s = cs[:, 0], cs[:, 1]
    return _matrix([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])


def random_affine(image: tf.Tensor, seed: tf.Tensor, *, rotation: Pair = 0.0,
                  scale: Pair = (1.0, 1.0), per_axis_scale: bool = False, shear: Pair = 0.0,
                  translate: Sequence[float] = (0.0, 0.0), interpolation: str = "bilinear",
                  fill_mode: str = "constant", fill_value: float = 0.0
                  ) -> tuple[tf.Tensor, tf.Tensor]:
    """Rotate/scale/shear/translate about the centre in one resampling pass."""
    m = sample_affine_matrix(seed, image_size(image), rotation=rotation, scale=scale,
                             per_axis_scale=per_axis_scale, shear=shear, translate=translate)
    return affine(image, m, None, interpolation, fill_mode, fill_value), m


def sample_flip(seed: tf.Tensor, horizontal: bool = True, vertical: bool = False,
                p: float = 0.5) -> tuple[tf.Tensor, tf.Tensor]:
    """`random_flip`'s draws: (flip x, flip y) bool scalars, each axis with probability p.

    The samplers below draw through these `sample_*` functions, and so does any
    caller that needs only the parameters (detection composes matrices and
    resamples once), so both get the same draws from the same seed.
    """
    seeds = split_seeds(seed, 2)
    fx = bernoulli(seeds[0], p) if horizontal else tf.constant(False)
    fy = bernoulli(seeds[1], p) if vertical else tf.constant(False)
    return fx, fy


def sample_rot90(seed: tf.Tensor, p: float = 1.0) -> tf.Tensor:
    """`random_rot90`'s draw: k int32, uniform in {1, 2, 3} with probability p, else 0."""
    seeds = split_seeds(seed, 2)
    k = tf.random.stateless_uniform((), seeds[0], minval=1, maxval=4, dtype=tf.int32,
                                    alg=ALG)
    return tf.where(bernoulli(seeds[1], p), k, 0)


def sample_pad_shift(seed: tf.Tensor, padding: int) -> tuple[tf.Tensor, tf.Tensor]:
    """`pad_and_crop`'s draws: the integer shift (dx, dy), each uniform in [-padding, padding]."""
    if int(padding) < 0:
        raise ValueError(f"padding must be >= 0, got {padding}")
    p = int(padding)
    seeds = split_seeds(seed, 2)
    dy = tf.random.stateless_uniform((), seeds[0], minval=-p, maxval=p + 1, dtype=tf.int32,
                                     alg=ALG)
    dx = tf.random.stateless_uniform((), seeds[1], minval=-p, maxval=p + 1, dtype=tf.int32,
                                     alg=ALG)
    return dx, dy


def random_flip(image: tf.Tensor, seed: tf.Tensor, horizontal: bool = True,
                vertical: bool = False, p: float = 0.5) -> tuple[tf.Tensor, tf.Tensor]:
    """Flip each enabled axis independently with probability p (exact: `tf.reverse`)."""
    fx, fy = sample_flip(seed, horizontal, vertical, p)
    out = tf.convert_to_tensor(image)
    out = tf.cond(fx, lambda: tf.reverse(out, [-2]), lambda: out)
    out = tf.cond(fy, lambda: tf.reverse(out, [-3]), lambda: out)
    return out, flip_matrix(image_size(image), fx, fy)


def rot90_flip(image: tf.Tensor, k: tf.Tensor, flip_x: tf.Tensor, flip_y: tf.Tensor
               ) -> tf.Tensor:
    """`tf.image.rot90(image, k)`, then mirror x (axis -2) if `flip_x` and y (axis
    -3) if `flip_y`, for a square [N, N, C] image: the same pixels (a
    permutation) in at most two passes -- one reverse (both mirrors) and a
    transpose for odd k -- instead of up to four (rot90's reverse + transpose,
    then one reverse per flip): what `random_rot90` followed by `random_flip`
    computes, from their draws (`sample_rot90`, `sample_flip`).

    Why it holds: rot90 k=1 is transpose(reverse_x), k=2 reverse_xy, k=3
    transpose(reverse_y); a mirror after a transpose is the other axis's mirror
    before it.
    """
    image = tf.convert_to_tensor(image)
    if image.shape.rank != 3 or image.shape[0] is None or image.shape[0] != image.shape[1]:
        raise ValueError(f"rot90_flip needs a square [N, N, C] image of static size, "
                         f"got shape {image.shape}")
    k = tf.math.floormod(tf.cast(k, tf.int32), 4)
    odd = tf.equal(k % 2, 1)
    fx, fy = tf.cast(flip_x, tf.bool), tf.cast(flip_y, tf.bool)
    # the mirrors before the (optional) transpose: rot90's, then the flips'
    rx = tf.math.logical_xor(tf.logical_or(tf.equal(k, 1), tf.equal(k, 2)), tf.where(odd, fy, fx))
    ry = tf.math.logical_xor(tf.logical_or(tf.equal(k, 2), tf.equal(k, 3)), tf.where(odd, fx, fy))
    # one reverse over the axes that need it (a strided slice with negative
    # strides was slower than the passes it replaced)
    which = tf.cast(rx, tf.int32) + 2 * tf.cast(ry, tf.int32)
    mirrored = tf.switch_case(which, [lambda: image, lambda: tf.reverse(image, [1]),
                                      lambda: tf.reverse(image, [0]),
                                      lambda: tf.reverse(image, [0, 1])])
    out = tf.cond(odd, lambda: tf.transpose(mirrored, [1, 0, 2]), lambda: mirrored)
    return tf.ensure_shape(out, image.shape)


def random_rot90(image: tf.Tensor, seed: tf.Tensor, p: float = 1.0
                 ) -> tuple[tf.Tensor, tf.Tensor]:
    """With probability p rotate by k*90 degrees, k uniform in {1, 2, 3} (exact).

    Non-square images get a dynamic output shape (odd k swaps height and width).
    """
    k = sample_rot90(seed, p)
    image = tf.convert_to_tensor(image)
    out = tf.image.rot90(image, k)
    if image.shape[-3] is not None and image.shape[-3] == image.shape[-2]:
        out = tf.ensure_shape(out, image.shape)
    return out, rot90_matrix(image_size(image), k)


def _check_crop_ranges(scale: Sequence[float], ratio: Sequence[float], attempts: int
                       ) -> tuple[float, float, float, float]:
    s_lo, s_hi = (float(v) for v in scale)
    r_lo, r_hi = (float(v) for v in ratio)
    if not 0 < s_lo <= s_hi <= 1:
        raise ValueError(f"scale must satisfy 0 < low <= high <= 1, got {tuple(scale)}")
    if not 0 < r_lo <= r_hi:
        raise ValueError(f"ratio must satisfy 0 < low <= high, got {tuple(ratio)}")
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    return s_lo, s_hi, r_lo, r_hi


def crop_window_draws(seed: tf.Tensor, scale: Sequence[float] = CROP_SCALE,
                      ratio: Sequence[float] = CROP_RATIO, attempts: int = 10
                      ) -> tf.Tensor:
    """The random numbers behind `sample_crop_window`: float32 [4, attempts].

    Rows: 0: area fraction ~ U(scale); 1: aspect = exp(U(log ratio)) computed in
    float64 (then rounded to float32); 2, 3: U[0, 1) for the y / x offsets. A
    batch of seeds [B, 2] gives [B, 4, attempts], row i bit-identical to
    `crop_window_draws(seed[i])` (vectorized Philox, `tfpipe.seeds.uniform_rows`):
    the pipeline draws a whole block of samples at once and only the
    size-dependent arithmetic runs per image.
    """
    s_lo, s_hi, r_lo, r_hi = _check_crop_ranges(scale, ratio, attempts)
    lr_lo, lr_hi = math.log(r_lo), math.log(r_hi)
    parts = split_seeds(seed, 4)
    return tf.stack([_seeds.uniform(parts[..., 0, :], [attempts], s_lo, s_hi),
                     _aspect(_seeds.uniform(parts[..., 1, :], [attempts], lr_lo, lr_hi)),
                     _seeds.uniform(parts[..., 2, :], [attempts], 0.0, 1.0),
                     _seeds.uniform(parts[..., 3, :], [attempts], 0.0, 1.0)], axis=-2)


def _aspect(log_aspect: tf.Tensor) -> tf.Tensor:
    # float64 exp rounded to float32: Eigen's float32 exp differs in the last bit
    # between its packet and scalar paths, so the plan's [B, 4, n] and a single
    # seed's [4, n] would not agree; the float64 result rounds the same either way.
    return tf.cast(tf.exp(tf.cast(log_aspect, tf.float64)), tf.float32)


def crop_window_from_draws(draws: tf.Tensor, image_height: object, image_width: object,
                           ratio: Sequence[float] = CROP_RATIO
                           ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """`sample_crop_window`'s window from its draws [4, attempts] and the image size.

    One native op (`tfpipe.native.crop_window`, bit-identical) when the library is
    built and `draws` is float32 [4, n]; else the pure-TF reference below
    (`TFPIPE_NATIVE=0` forces it).
    """
    r_lo, r_hi = (float(v) for v in ratio)
    if not 0 < r_lo <= r_hi:
        raise ValueError(f"ratio must satisfy 0 < low <= high, got {tuple(ratio)}")
    draws = tf.convert_to_tensor(draws)
    # a dynamic first dimension goes native too: the op checks it at run time
    if (draws.dtype == tf.float32 and draws.shape.rank == 2 and draws.shape[0] in (4, None)
            and native.has_crop_window()):
        return native.crop_window(draws, image_height, image_width, (r_lo, r_hi))
    return _crop_window_tf(draws, image_height, image_width, r_lo, r_hi)


def _crop_window_tf(draws: tf.Tensor, image_height: object, image_width: object, r_lo: float,
                    r_hi: float) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """The pure-TF reference of `crop_window_from_draws` (window.cc mirrors it)."""
    h = tf.cast(image_height, tf.int32)
    w = tf.cast(image_width, tf.int32)
    hf, wf = tf.cast(h, tf.float32), tf.cast(w, tf.float32)
    area = hf * wf * draws[0]
    aspect = draws[1]
    cw = tf.cast(tf.round(tf.sqrt(area * aspect)), tf.int32)
    ch = tf.cast(tf.round(tf.sqrt(area / aspect)), tf.int32)
    ok = (cw > 0) & (cw <= w) & (ch > 0) & (ch <= h)
    # offsets uniform over the integers [0, h - ch] like torch.randint(0, h - ch + 1)
    oy = tf.minimum(tf.cast(draws[2] * tf.cast(h - ch + 1, tf.float32), tf.int32), h - ch)
    ox = tf.minimum(tf.cast(draws[3] * tf.cast(w - cw + 1, tf.float32), tf.int32), w - cw)
    first = tf.argmax(tf.cast(ok, tf.int32), output_type=tf.int32)
    # fallback: whole image, clamped to the allowed aspect range, centred
    in_ratio = wf / hf
    fb_w = tf.where(in_ratio < r_lo, w,
                    tf.where(in_ratio > r_hi, tf.cast(tf.round(hf * r_hi), tf.int32), w))
    fb_h = tf.where(in_ratio < r_lo, tf.cast(tf.round(wf / r_lo), tf.int32), h)
    fb_w, fb_h = tf.minimum(fb_w, w), tf.minimum(fb_h, h)
    found = tf.reduce_any(ok)
    out_h = tf.where(found, tf.gather(ch, first), fb_h)
    out_w = tf.where(found, tf.gather(cw, first), fb_w)
    out_y = tf.where(found, tf.gather(oy, first), (h - fb_h) // 2)
    out_x = tf.where(found, tf.gather(ox, first), (w - fb_w) // 2)
    return out_y, out_x, out_h, out_w


def sample_crop_window(seed: tf.Tensor, image_height: object, image_width: object,
                       scale: Sequence[float] = CROP_SCALE,
                       ratio: Sequence[float] = CROP_RATIO, attempts: int = 10
                       ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """torchvision RandomResizedCrop window: (offset_y, offset_x, crop_h, crop_w) int32.

    All `attempts` draws are made at once (area fraction uniform in `scale`, log
    aspect uniform in log(`ratio`)); the first that fits is used, else the centre
    crop clamped to `ratio`. Pure graph ops on scalars, so the pipeline can call it
    on the JPEG header size and hand the window to `tf.io.decode_and_crop_jpeg`.
    Equals `crop_window_from_draws(crop_window_draws(seed, ...), h, w, ratio)`.
    """
    draws = crop_window_draws(seed, scale, ratio, attempts)
    return crop_window_from_draws(draws, image_height, image_width, ratio)


def center_crop_window(image_height: object, image_width: object, size: Size,
                       crop_fraction: float = 0.875
                       ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """Centred window with the aspect of `size`, `crop_fraction` of the largest that fits.

    (offset_y, offset_x, crop_h, crop_w) int32, usable with `decode_and_crop_jpeg`.
    """
    if not 0 < crop_fraction <= 1:
        raise ValueError(f"crop_fraction must be in (0, 1], got {crop_fraction}")
    h = tf.cast(image_height, tf.int32)
    w = tf.cast(image_width, tf.int32)
    hf, wf = tf.cast(h, tf.float32), tf.cast(w, tf.float32)
    oh, ow = _hw_float(size)
    # float32, in this order (the native kernels' CenterWindow too). DivNoNan /
    # MulNoNan compute exactly x / y and x * y here (y > 0), but grappler has no
    # rewrite for them: in a tf.function (a SavedModel's serving graph) constant
    # folding turns `x / 224` into `x * (1 / 224)` and folds `224 * (x * 0.875)`,
    # which moves the .5 ties (284 * 0.875 = 248.5 -> 249), a window one pixel
    # larger than tf.data's (which runs the ops as written) -- issue #22.
    div, mul = tf.math.divide_no_nan, tf.math.multiply_no_nan
    fit = mul(tf.minimum(div(hf, oh), div(wf, ow)), tf.constant(crop_fraction, tf.float32))
    ch = tf.clip_by_value(tf.cast(tf.round(mul(oh, fit)), tf.int32), 1, h)
    cw = tf.clip_by_value(tf.cast(tf.round(mul(ow, fit)), tf.int32), 1, w)
    return (h - ch) // 2, (w - cw) // 2, ch, cw


def crop_and_resize(image: tf.Tensor, window: Sequence[tf.Tensor], size: Size,
                    interpolation: str = "bilinear") -> tuple[tf.Tensor, tf.Tensor]:
    """Slice `window` (oy, ox, ch, cw) then `tf.image.resize` to `size`; matrix = crop_matrix.

    A slice plus resize beats the projective kernel for axis-aligned crops (PERF-NOTES:
    ~4x). Output dtype = input dtype (uint8 rounded and saturated).
    """
    _check_choice("interpolation", interpolation, _INTERPOLATIONS)
    oy, ox, ch, cw = window
    image = tf.convert_to_tensor(image)
    crop = image[oy:oy + ch, ox:ox + cw, :]
    out = tf.image.resize(crop, size, method=interpolation)
    if image.dtype.is_integer:
        out = tf.saturate_cast(tf.round(out), image.dtype)
    else:
        out = tf.cast(out, image.dtype)
        if interpolation == "bicubic":
            out = tf.clip_by_value(out, tf.reduce_min(crop), tf.reduce_max(crop))
    out = tf.ensure_shape(out, [int(size[0]), int(size[1]), image.shape[-1]])
    return out, crop_matrix((oy, ox), (ch, cw), size)


def random_resized_crop(image: tf.Tensor, seed: tf.Tensor, size: Size,
                        scale: Sequence[float] = CROP_SCALE,
                        ratio: Sequence[float] = CROP_RATIO,
                        interpolation: str = "bilinear", attempts: int = 10
                        ) -> tuple[tf.Tensor, tf.Tensor]:
    """Crop a `sample_crop_window` window and resize to `size` (h, w).

    Uses the same sampler as the fused decode path, so decode_and_crop_jpeg with
    the window gives the same pixels as decoding then calling this.
    """
    h, w = image_size(image)
    window = sample_crop_window(seed, h, w, scale, ratio, attempts)
    return crop_and_resize(image, window, size, interpolation)


def center_crop(image: tf.Tensor, size: Size, crop_fraction: float = 0.875,
                interpolation: str = "bilinear") -> tuple[tf.Tensor, tf.Tensor]:
    """Deterministic eval crop (`center_crop_window`) resized to `size`."""
    h, w = image_size(image)
    return crop_and_resize(image, center_crop_window(h, w, size, crop_fraction), size,
                           interpolation)


def pad_and_crop(image: tf.Tensor, seed: tf.Tensor, padding: int, fill_mode: str = "constant",
                 fill_value: float = 0.0) -> tuple[tf.Tensor, tf.Tensor]:
    """Pad by `padding` pixels on each side, then crop back to the original size at a
    uniform integer offset (CIFAR-style): an integer shift in [-padding, padding]."""
    _check_choice("fill_mode", fill_mode, _FILL_MODES)
    if int(padding) < 0:
        raise ValueError(f"padding must be >= 0, got {padding}")
    p = int(padding)
    dx, dy = sample_pad_shift(seed, p)
    m = translate_matrix(dx, dy)
    image = tf.convert_to_tensor(image)
    if fill_mode in ("constant", "reflect"):
        h, w = image_size(image)
        mode = "CONSTANT" if fill_mode == "constant" else "SYMMETRIC"
        kw = {"constant_values": tf.cast(fill_value, image.dtype)} if mode == "CONSTANT" else {}
        padded = tf.pad(image, [[p, p], [p, p], [0, 0]], mode=mode, **kw)
        out = padded[p - dy:p - dy + h, p - dx:p - dx + w, :]
        out = tf.ensure_shape(out, image.shape)
    else:
        # integer shift: nearest sampling is exact
        out = affine(image, m, None, "nearest", fill_mode, fill_value)
    return out, m
