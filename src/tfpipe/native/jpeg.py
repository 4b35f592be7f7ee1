"""Strict JPEG decode (`TfpipeDecodeJpegStrict`, jpeg_strict.cc).

TF's `decode_jpeg` / `decode_and_crop_jpeg` accept a JPEG whose entropy-coded
data is damaged: libjpeg only *warns* ("Corrupt JPEG data: premature end of
data segment") and fills the rest with gray. `decode_jpeg_strict` returns the
same pixels as those ops (it calls the same `tensorflow::jpeg::Uncompress`
with the same flags; tests/native) but fails with `InvalidArgumentError` when
libjpeg warns, or when the file's marker structure is damaged (no EOI marker,
a restart marker that cannot be there).

Limits (docs/pipeline.md "Bad records"): with a crop window libjpeg stops after
the window's last row, so damage below the window is only found by the
structural scan; warnings libjpeg emits only after the last row ("N extraneous
bytes before marker") are not counted by `Uncompress`. `tfpipe convert` and
`tfpipe verify --deep` decode every image fully and strictly and do see both.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import tensorflow as tf

from tfpipe import native


_PROBE: dict[str, bool] = {}
_UNALIGNED: list[bool] = []  # `unaligned_crop()` depth (benchmarks, the equality test)


@contextlib.contextmanager
def unaligned_crop() -> Iterator[None]:
    """Fused decode kernels built (traced) inside ask libjpeg for the crop window
    itself, not its iMCU-aligned widening (their `aligned_crop: false` attr): the
    same bytes, slower. For the benchmark and test that compare the two."""
    _UNALIGNED.append(True)
    try:
        yield
    finally:
        _UNALIGNED.pop()


def _fused_attrs() -> dict[str, Any]:
    """The fused kernels' benchmark attrs; {} (the ops' defaults) normally."""
    attrs: dict[str, Any] = dict(native.isa_attrs())
    if _UNALIGNED:
        attrs["aligned_crop"] = False
    return attrs


def available() -> bool:
    """Native ops enabled, the built library has the strict JPEG kernel, and the
    kernel found TF's `jpeg::Uncompress` (a TF build that does not export it
    makes the kernel fail; then the pipeline keeps TF's own ops)."""
    if not (native.available() and hasattr(native.load(), "tfpipe_decode_jpeg_strict")):
        return False
    if "ok" not in _PROBE:
        try:
            with tf.init_scope():  # eager, also when asked while a graph is traced
                tiny = tf.io.encode_jpeg(tf.zeros([8, 8, 3], tf.uint8))
                native.load().tfpipe_decode_jpeg_strict(tiny, tf.zeros([4], tf.int32),
                                                        tf.zeros([2], tf.int32),
                                                        channels=3, crop=False)
            _PROBE["ok"] = True
        except Exception as exc:  # noqa: BLE001 - any failure -> TF's own ops
            native.log.info("tfpipe.native: strict JPEG decode unusable (%s); using TF's "
                            "decode ops", exc)
            _PROBE["ok"] = False
    return _PROBE["ok"]


def fallback_checks() -> bool:
    """Whether the pure-TF decode of a pipeline should check JPEGs itself
    (`tfpipe.native.jpeg_structure`): the strict decode is unavailable for the
    process (TFPIPE_NATIVE=0, not built, unusable), not merely switched off inside
    `native.pure_tf()` -- a graph for stock TF / TFLite (the serving signatures,
    which check their input themselves, tfpipe.export)."""
    return not available() and not getattr(native._local, "pure", 0)  # noqa: SLF001


def decode_jpeg_strict(contents: tf.Tensor, channels: int = 0,
                       window: Any | None = None, target: Any | None = None) -> tf.Tensor:
    """uint8 [h, w, c]: `tf.io.decode_jpeg(contents, channels)` or, with `window`
    = (y, x, h, w), `tf.io.decode_and_crop_jpeg(contents, window, channels)`,
    bit for bit, but an error on a damaged scan. Requires `available()`.

    `target` = (out_h, out_w) with a window: decode at the largest DCT reduction
    that keeps the window >= target on both sides, the window mapped to the
    scaled image (`tfpipe.pipeline._decode.dct_ratio` / `scaled_window`, whose
    `decode_and_crop_jpeg(ratio=r)` this equals bit for bit)."""
    if channels not in (0, 1, 3):
        raise ValueError(f"channels must be 0, 1 or 3, got {channels!r}")
    if not available():
        raise native.unavailable("strict JPEG decode", "jpeg_strict.cc")
    module = native.load()
    if window is None:
        return module.tfpipe_decode_jpeg_strict(contents, tf.zeros([4], tf.int32),
                                                tf.zeros([2], tf.int32),
                                                channels=channels, crop=False)
    window = tf.cast(tf.convert_to_tensor(window), tf.int32)
    target = tf.zeros([2], tf.int32) if target is None else \
        tf.cast(tf.convert_to_tensor(target), tf.int32)
    return module.tfpipe_decode_jpeg_strict(contents, window, target, channels=channels,
                                            crop=True)


def has_decode_crop_resize() -> bool:
    """Whether `decode_crop_resize` can run (strict decode usable and the library
    has window_decode.cc)."""
    return available() and hasattr(native.load(), "tfpipe_decode_crop_resize")


def decode_crop_resize(contents: tf.Tensor, draws: tf.Tensor, crop_on: Any, flip: Any,
                       size: tuple[int, int], ratio: tuple[float, float], channels: int = 3,
                       dct_scaling: bool = True) -> tf.Tensor:
    """One JPEG -> uint8 [size[0], size[1], channels] in one kernel: the header's
    size, `augment.crop_window_from_draws(draws, h, w, ratio)` (the whole image
    where `crop_on` is false), `decode_jpeg_strict` of that window (DCT-scaled
    towards `size` with `dct_scaling`), bilinear resize, mirrored where `flip`.
    The bytes of that composition (window_decode.cc). Requires
    `has_decode_crop_resize()`."""
    import numpy as np

    if not has_decode_crop_resize():
        raise native.unavailable("decode-crop-resize", "window_decode.cc")
    lo, hi = (float(np.float32(r)) for r in ratio)  # as native.crop_window passes them
    return native.load().tfpipe_decode_crop_resize(
        contents, tf.convert_to_tensor(draws, tf.float32), tf.convert_to_tensor(crop_on, tf.bool),
        tf.convert_to_tensor(flip, tf.bool), tf.constant([int(size[0]), int(size[1])], tf.int32),
        ratio=[lo, hi], channels=int(channels), dct_scaling=bool(dct_scaling),
        **_fused_attrs())


def has_decode_crop_resize_block() -> bool:
    """Whether `decode_crop_resize_block` can run (strict decode usable and the
    library has window_decode_block.cc)."""
    return available() and hasattr(native.load(), "tfpipe_decode_crop_resize_block")


def decode_crop_resize_block(contents: Any, draws: Any, mode: Any, flip: Any,
                             size: tuple[int, int], ratio: tuple[float, float],
                             channels: int = 3, dct_scaling: bool = True,
                             crop_fraction: float = 0.875,
                             write_out: WriteOut | None = None
                             ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """A block of n encoded images in one kernel call (window_decode_block.cc) ->
    (images uint8 [n, size[0], size[1], channels], status int32 [n], message
    string [n]). Requires `has_decode_crop_resize_block()`.

    Row i by `mode[i]`: 0 = `decode_crop_resize` with the window of `draws[i]`
    ([n, 4, attempts], `augment.crop_window_draws` rows), 1 = the same of the
    whole image, 2 = the eval centre crop (`augment.center_crop_window(h, w, size,
    crop_fraction)`, i.e. `pipeline._classify.eval_image`); mirrored where
    `flip[i]`. Each ok row is those ops' bytes, whatever the thread count.
    status 0 = ok; 1 = not a JPEG (`tf.io.is_jpeg` false: decode it another way);
    2 = a JPEG the per-sample op rejects (message = its error text). Rows with
    status 1 or 2 are zeros; only malformed arguments raise.

    Rows run on TF's intra-op threads, within the caller's per-thread limit:
    inside tf.data that is `threading.max_intra_op_parallelism` (1 by default:
    rows inline, parallel only across the map's calls; 0 or the CPU count lets
    one call spread its rows).

    `write_out` (`WriteOut`): each decoded row then goes through the batch
    stage's colour chain + normalize in the same call, while it is in cache
    (`native.pixel.pixel_chain` of that row: the same bytes): images are float32
    (`float_out`) or uint8, rows with status 1 / 2 zeros."""
    import numpy as np

    if not 0 < crop_fraction <= 1:
        raise ValueError(f"crop_fraction must be in (0, 1], got {crop_fraction}")
    if not has_decode_crop_resize_block():
        raise native.unavailable("block decode-crop-resize", "window_decode_block.cc")
    lo, hi = (float(np.float32(r)) for r in ratio)  # as native.crop_window passes them
    contents = tf.convert_to_tensor(contents, tf.string)
    wo = write_out or WriteOut()
    k = len(wo.ops)
    n = tf.shape(contents)[0]
    if write_out is None:
        params, apply, enabled = tf.zeros([n, 0]), tf.zeros([n, 0], tf.bool), tf.zeros([n], tf.bool)
    else:
        if wo.params is None or wo.apply is None or wo.enabled is None:
            raise ValueError("WriteOut needs params, apply and enabled tensors")
        params, apply, enabled = wo.params, wo.apply, wo.enabled
        if wo.float_out and not (wo.mean and len(wo.mean) == len(wo.std)):
            raise ValueError("WriteOut: float32 output needs mean and std of one length")
    return native.load().tfpipe_decode_crop_resize_block(
        contents, tf.convert_to_tensor(draws, tf.float32),
        tf.convert_to_tensor(mode, tf.int32), tf.convert_to_tensor(flip, tf.bool),
        tf.constant([int(size[0]), int(size[1])], tf.int32),
        tf.reshape(tf.convert_to_tensor(params, tf.float32), [n, k]),
        tf.reshape(tf.convert_to_tensor(apply, tf.bool), [n, k]),
        tf.convert_to_tensor(enabled, tf.bool), ratio=[lo, hi],
        channels=int(channels), dct_scaling=bool(dct_scaling),
        crop_fraction=float(crop_fraction),
        out_dtype=tf.float32 if wo.float_out else tf.uint8, ops=list(wo.ops),
        gated=[bool(g) for g in wo.gated], mean=[float(v) for v in wo.mean],
        std=[float(v) for v in wo.std], **_fused_attrs())


@dataclasses.dataclass(frozen=True)
class WriteOut:
    """The per-row write-out of `decode_crop_resize_block`: where `enabled[i]`,
    row i becomes `native.pixel.pixel_chain([row], params[i:i+1], apply[i:i+1],
    ops, gated, to_float=float_out, normalize=float_out, mean, std)`; elsewhere
    the plain rendering: `pixel_chain` normalize alone of the uint8 row
    (float_out) or the row itself. What the batch stage computes per row with no
    L4 op (`augment.on_device.augment_batch`): the same bytes.
    params / apply [n, len(ops)] float32 / bool, enabled [n] bool."""

    ops: tuple[str, ...] = ()
    gated: tuple[bool, ...] = ()
    float_out: bool = False
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    params: Any = None
    apply: Any = None
    enabled: Any = None
