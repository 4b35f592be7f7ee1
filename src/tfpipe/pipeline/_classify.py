"""Classification: per-sample L1 + L2 in uint8, batched L3, L4 on the batch.

Seeds (docs/seeds.md): sample seed = `sample_seed(epoch_seed, global_index)`;
geometry op i draws from `op_seed(sample_seed, i)`, pixel op j from
`op_seed(sample_seed, PIXEL_BASE + j)`; L4 op k from `op_seed(batch_seed, k)`.
Whether a sample is augmented at all (`augment.enable_rate`) is one draw per
planned batch, `op_seed(batch_seed, ENABLE_OP)` of the batch the sample is
planned in, `global_index(local // batch_size, worker, workers)`. The sample
carries that decision (`_enabled`) and every stage follows it per sample: L2 in
`process`, L3/L4 per row in `augment_batch` (`gated`), so a batch formed after a
skipped record or under `deterministic: false` never mixes the decisions up.

Where the draws are made (the values are the same either way, tested):
- `plan` runs once per block of samples (`_errors.planned`) and makes the
  per-sample draws that do not depend on the image -- the op-seed base, the
  random-resized-crop numbers, the flip coin, the enable coin -- with the
  vectorized Philox of `tfpipe.seeds.*_rows`. Per sample this used to be ~20
  small RNG kernels; it was the largest overhead of the train path.
- `process` (per sample) parses, reads the JPEG header, turns the crop draws
  into a window for that size, decodes only the window and resizes (+ flips).
- L3 runs after batching: `pixel_inputs` draws every row's parameters from
  its own seed, vectorized over the batch, and the kernels apply them to the
  whole batch at once (equal to running the op per sample; tested), avoiding
  per-sample broadcasting, the hotspot PERF-NOTES found.
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from tfpipe import augment, native, seeds
from tfpipe.errors import ConfigError
from tfpipe.pipeline._decode import decode_full, decode_window, resize_uint8
from tfpipe.pipeline._settings import Op, Settings
from tfpipe.pipeline._source import IMAGE_KEY, LABEL_KEY
from tfpipe.augment import color
from tfpipe.augment import on_device
from tfpipe.augment.geometry import bernoulli, sample_flip, sample_rot90, split_seeds
from tfpipe.augment.on_device import gated, select_rows  # noqa: F401 - _detect uses them from here
from tfpipe.pipeline.fast import FUSABLE, FusedPixel, fusable, normalizer

PIXEL_BASE = 1000
ENABLE_OP = 0x656E61626C65  # "enable"
COIN_TAG = 0x636F696E  # "coin": the p-draw of ops whose function has no p argument


def coin(seed: tf.Tensor, p: float) -> tf.Tensor:
    """True with probability p, from its own stream of the op seed (or of each row
    of op seeds [n, 2])."""
    if p >= 1.0:
        return tf.constant(True)
    return bernoulli(seeds.fold(seed, COIN_TAG), p)


def batch_enabled(epoch_seed: tf.Tensor, global_batch: tf.Tensor, rate: float) -> tf.Tensor:
    """Is this global batch augmented? A scalar index, or a vector [n] (vectorized)."""
    if rate >= 1.0:
        return tf.constant(True)
    if rate <= 0.0:
        return tf.constant(False)
    return bernoulli(seeds.op_seed(seeds.batch_seed(epoch_seed, global_batch), ENABLE_OP), rate)


def _pair(op: Op, key: str, default: tuple[float, float]) -> tuple[float, float]:
    v = op.params.get(key, default)
    return (float(v[0]), float(v[1]))


def apply_geometry_op(op: Op, image: tf.Tensor, seed: tf.Tensor,
                      size: tuple[int, int]) -> tf.Tensor:
    """One L2 op on one uint8 image via `tfpipe.augment` (unfused reference path)."""
    name, prm = op.name, op.params
    interp = str(prm.get("interpolation", "bilinear"))
    if name == "flip":
        return augment.random_flip(image, seed, bool(prm.get("horizontal", True)),
                                   bool(prm.get("vertical", False)), op.p)[0]
    if name == "rot90":
        return augment.random_rot90(image, seed, op.p)[0]
    if name == "random_resized_crop":
        fn = lambda: augment.random_resized_crop(  # noqa: E731
            image, seed, size, _pair(op, "scale", (0.08, 1.0)),
            _pair(op, "ratio", (3 / 4, 4 / 3)), interp)[0]
    elif name == "center_crop":
        fn = lambda: augment.center_crop(  # noqa: E731
            image, size, float(prm.get("crop_fraction", 0.875)), interp)[0]
    elif name == "affine":
        fn = lambda: augment.random_affine(image, seed, **affine_kwargs(op))[0]  # noqa: E731
    elif name == "pad_and_crop":
        kw = {k: prm[k] for k in ("padding", "fill_mode", "fill_value") if k in prm}
        fn = lambda: augment.pad_and_crop(image, seed, **kw)[0]  # noqa: E731
    elif name == "elastic":
        from tfpipe.augment.elastic import elastic

        fn = lambda: elastic(image, seed, float(prm.get("alpha", 34.0)),  # noqa: E731
                             float(prm.get("sigma", 4.0)))[0]
    else:
        raise ConfigError(f"augment.geometry.{name}: unknown op; allowed: random_resized_crop, "
                          "center_crop, flip, rot90, affine, pad_and_crop, elastic")
    if op.p >= 1.0:
        return fn()
    out = tf.cond(coin(seed, op.p), fn, lambda: image)
    return tf.ensure_shape(out, [None, None, image.shape[-1]])


def affine_kwargs(op: Op, draws_only: bool = False) -> dict[str, Any]:
    """`random_affine`'s keyword arguments from an affine op's params (draws_only:
    those of `sample_affine_matrices`, without interpolation / fill)."""
    keys = ("rotation", "scale", "per_axis_scale", "shear", "translate") + (
        () if draws_only else ("interpolation", "fill_mode", "fill_value"))
    kw = {k: op.params[k] for k in keys if k in op.params}
    for k in ("scale", "translate"):
        if k in kw and kw[k] is not None:
            kw[k] = tuple(kw[k])
    return kw


def aug(name: str) -> Any:
    """The public `tfpipe.augment` function `name`, or None."""
    return getattr(augment, name, None)


def pixel_fn(op: Op) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """`(images [B,H,W,C], seeds [B,2]) -> images` for an L3 op (per-row parameters);
    the same resolution the device stage makes (`augment.on_device.pixel_function`)."""
    return on_device.pixel_function(op.name, op.params, op.p)


def _has_fused_l1() -> bool:
    from tfpipe.native import jpeg as native_jpeg

    return native_jpeg.has_decode_crop_resize()


class Classify:
    """Per-block, per-sample and per-batch functions for one classification pipeline."""

    def __init__(self, s: Settings, epoch_seed: tf.Tensor, worker: int, workers: int,
                 parse: Callable[..., dict[str, tf.Tensor]], train: bool) -> None:
        self.s, self.es, self.wi, self.wc, self.parse, self.train = (
            s, epoch_seed, worker, workers, parse, train)
        # Hoisted: fold(epoch_seed, SAMPLE_TAG) is the same for every sample.
        self.stream = seeds.sample_stream(epoch_seed)
        self.geometry = s.active("geometry") if train else []
        self.pixel = s.active("pixel") if train else []
        self.batch_ops = s.active("batch") if train else []
        self.augmenting = bool(self.geometry or self.pixel or self.batch_ops)
        ops = self.geometry
        # random_resized_crop first: its window is drawn before decoding (decode_and_crop)
        self.fast_crop = bool(ops) and ops[0].name == "random_resized_crop" and \
            ops[0].params.get("interpolation", "bilinear") == "bilinear"
        # ... and a horizontal-only flip right after it: its coin is drawn in the plan too
        self.fast_flip = self.fast_crop and len(ops) > 1 and ops[1].name == "flip" and \
            bool(ops[1].params.get("horizontal", True)) and \
            not bool(ops[1].params.get("vertical", False))
        # decode + crop + resize + flip of a JPEG as one native kernel (window_decode.cc)
        self.fused_l1 = self.fast_crop and _has_fused_l1()
        # the output size a JPEG window is DCT-scaled towards (None: full-size decode)
        self.dct_target = s.image_size if s.dct_scaling else None
        # affine ops whose matrix the plan draws (vectorized, the same bits): the
        # input size must be image_size, so none after a rot90 of a non-square size
        square = s.image_size[0] == s.image_size[1]
        self.planned_affine = [i for i, op in enumerate(ops) if op.name == "affine" and (
            square or "rot90" not in [o.name for o in ops[:i]])]
        self.fused = FusedPixel(self.pixel, s.mean, s.std) if fusable(self.pixel) else None
        self.pixel_fns = [] if self.fused else [pixel_fn(op) for op in self.pixel]
        # resolved here, not inside the traced functions (autograph would trace importlib)
        self.to_one_hot = aug("to_one_hot")
        # one native pass over the batch (plain-TF normalize costs ~10x more:
        # docs/performance.md); the same bits either way, on every host
        self.normalize = normalizer(s.mean, s.std)
        self.mixers = [aug(op.name) for op in self.batch_ops]
        if s.pixel_stage not in ("host", "device"):
            raise ConfigError(f"augment.pixel_stage: must be 'host' or 'device', got "
                              f"{s.pixel_stage!r}")
        if s.pixel_stage == "device" and s.task != "classification":
            raise ConfigError(f"augment.pixel_stage: 'device' needs data.task 'classification', "
                              f"got {s.task!r} (detection runs L3 on the host: use 'host')")
        # device mode: the train batches leave uint8 + the draws (`device_inputs`);
        # `augment.OnDevice` applies L3, L4 and normalize in the train step
        self.device = train and s.pixel_stage == "device"
        self.samplers = [aug(f"sample_{op.name}") for op in self.batch_ops]
        for op in self.batch_ops if s.task == "classification" else []:
            if op.name not in ("mixup", "cutmix"):
                raise ConfigError(f"augment.batch.{op.name}: not a classification op; "
                                  "allowed: mixup, cutmix (mosaic is detection-only)")

    # ------------------------------------------------------------------ seeds
    def op_base(self, gidx: tf.Tensor) -> tf.Tensor:
        """`op_seed(sample_seed(epoch_seed, gidx), k)` is `fold(op_base(gidx), k)`:
        the common folds once. gidx scalar -> [2]; gidx [n] -> rows [n, 2]."""
        return seeds.fold(seeds.fold(self.stream, gidx), seeds.OP_TAG)

    def op_seeds(self, gidx: tf.Tensor) -> Callable[[int], tf.Tensor]:
        """k -> `op_seed(sample_seed(epoch_seed, gidx), k)`."""
        base = self.op_base(gidx)
        return lambda k: seeds.fold(base, k)

    def _indices(self, local: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        gidx = seeds.global_index(local, self.wi, self.wc)
        gbatch = seeds.global_index(local // self.s.batch_size, self.wi, self.wc)
        return gidx, gbatch

    # ------------------------------------------------------------------ plan (per block)
    def plan(self, local: tf.Tensor) -> dict[str, tf.Tensor]:
        """The image-independent draws of a block of samples (local indices [n]).

        `_base`: op-seed bases; `_enabled`: the batch's enable coin (enable_rate < 1);
        `_crop`: `crop_window_draws(op_seed(0))` [n, 4, attempts]; `_crop_on`: its
        p-coin (p < 1); `_flip`: the flip coin of op 1; `_affine{i}` / `_affine{i}_on`:
        affine op i's matrix [n, 3, 3] (`sample_affine_matrices`) and p-coin. The
        same calls as for one sample, on rows of seeds (vectorized Philox): the
        same bits (tested).
        """
        gidx, gbatch = self._indices(local)
        base = self.op_base(gidx)
        out = {"_base": base}
        if self.s.enable_rate < 1.0:
            enabled = batch_enabled(self.es, gbatch, self.s.enable_rate)
            out["_enabled"] = tf.broadcast_to(enabled, tf.shape(local))
        if self.fast_crop:
            op = self.geometry[0]
            s0 = seeds.fold(base, 0)
            out["_crop"] = augment.crop_window_draws(
                s0, _pair(op, "scale", (0.08, 1.0)), _pair(op, "ratio", (3 / 4, 4 / 3)))
            if op.p < 1.0:
                out["_crop_on"] = coin(s0, op.p)
        if self.fast_flip:  # = random_flip's horizontal draw
            flip_seed = split_seeds(seeds.fold(base, 1), 2)[:, 0]
            out["_flip"] = bernoulli(flip_seed, self.geometry[1].p)
        for i in self.planned_affine:  # = random_affine's matrix and p-coin, per row
            op, si = self.geometry[i], seeds.fold(base, i)
            out[f"_affine{i}"] = augment.sample_affine_matrices(
                si, self.s.image_size, **affine_kwargs(op, draws_only=True))
            if op.p < 1.0:
                out[f"_affine{i}_on"] = coin(si, op.p)
        return out

    # ------------------------------------------------------------------ L1 + L2
    def eval_image(self, encoded: tf.Tensor) -> tf.Tensor:
        return eval_image(self.s, encoded)

    def _crop_window(self, row: dict[str, tf.Tensor]) -> Callable[..., tuple[tf.Tensor, ...]]:
        ratio = _pair(self.geometry[0], "ratio", (3 / 4, 4 / 3))

        def window(h: tf.Tensor, w: tf.Tensor) -> tuple[tf.Tensor, ...]:
            win = augment.crop_window_from_draws(row["_crop"], h, w, ratio)
            if "_crop_on" in row:  # not applied: the whole image, resized
                full = (tf.constant(0), tf.constant(0), tf.cast(h, tf.int32),
                        tf.cast(w, tf.int32))
                win = tuple(tf.where(row["_crop_on"], a, b) for a, b in zip(win, full))
            return win
        return window

    def train_image(self, encoded: tf.Tensor, row: dict[str, tf.Tensor]) -> tf.Tensor:
        size, ops = self.s.image_size, self.geometry
        start = 0
        if self.fast_crop and self.fused_l1:
            # one native kernel for a JPEG (header, window, decode, resize, flip),
            # the same bytes as the composed ops below (tests/native)
            from tfpipe.native.jpeg import decode_crop_resize

            flip = row["_flip"] if self.fast_flip else False
            crop_on = row.get("_crop_on", True)
            ratio = _pair(ops[0], "ratio", (3 / 4, 4 / 3))
            image = tf.cond(
                tf.io.is_jpeg(encoded),
                lambda: decode_crop_resize(encoded, row["_crop"], crop_on, flip, size, ratio,
                                           self.s.channels, self.s.dct_scaling),
                lambda: self._composed_crop(encoded, row)[0])
            start = 2 if self.fast_flip else 1
        elif self.fast_crop:
            image, start = self._composed_crop(encoded, row)
        else:
            # Resized to image_size FIRST, so the L2 ops run on image_size pixels and
            # their pixel parameters (padding, elastic alpha/sigma) are output pixels:
            # the same work whatever the stored size (an affine/elastic at a 12 MP
            # source then a resize cost ~3x more on the demo images). Sources already
            # at image_size are unchanged (same-size bilinear is the identity).
            image = resize_uint8(decode_full(encoded, self.s.channels), size)
        fused = -1  # a flip done together with the rot90 before it
        for i in range(start, len(ops)):
            if f"_affine{i}" in row:  # the planned matrix: random_affine's warp
                image = self._planned_affine(ops[i], image, row, i)
                continue
            if i == fused:
                continue
            if (ops[i].name == "rot90" and i + 1 < len(ops) and ops[i + 1].name == "flip"
                    and image.shape[0] == image.shape[1] and image.shape[0] is not None):
                # rot90 then flip, from their own draws: the same pixels in <= 2 passes
                flip = ops[i + 1]
                k = sample_rot90(seeds.fold(row["_base"], i), ops[i].p)
                fx, fy = sample_flip(seeds.fold(row["_base"], i + 1),
                                     bool(flip.params.get("horizontal", True)),
                                     bool(flip.params.get("vertical", False)), flip.p)
                image, fused = augment.rot90_flip(image, k, fx, fy), i + 1
                continue
            image = apply_geometry_op(ops[i], image, seeds.fold(row["_base"], i), size)
        if image.shape[0] != size[0] or image.shape[1] != size[1]:
            image = resize_uint8(image, size)  # same-size bilinear is the identity
        return image

    def _planned_affine(self, op: Op, image: tf.Tensor, row: dict[str, tf.Tensor],
                        i: int) -> tf.Tensor:
        """`apply_geometry_op(affine)` with the matrix (and coin) the plan drew."""
        kw = affine_kwargs(op)
        fn = lambda: augment.affine(  # noqa: E731
            image, row[f"_affine{i}"], None, str(kw.get("interpolation", "bilinear")),
            str(kw.get("fill_mode", "constant")), float(kw.get("fill_value", 0.0)))
        if f"_affine{i}_on" not in row:
            return fn()
        out = tf.cond(row[f"_affine{i}_on"], fn, lambda: image)
        return tf.ensure_shape(out, [None, None, image.shape[-1]])

    def _composed_crop(self, encoded: tf.Tensor, row: dict[str, tf.Tensor]
                       ) -> tuple[tf.Tensor, int]:
        """Window decode + resize (+ the planned flip): (image, next geometry op)."""
        size = self.s.image_size
        crop, _, _ = decode_window(encoded, self.s.channels, self._crop_window(row),
                                   target=self.dct_target)
        if not self.fast_flip:
            return resize_uint8(crop, size), 1
        if native.available():  # the flip done by the native resize itself
            return native.resize_bilinear_u8(crop, size, row["_flip"]), 2
        image = resize_uint8(crop, size)  # random_flip's own branch, with the planned coin
        return tf.cond(row["_flip"], lambda: tf.reverse(image, [1]), lambda: image), 2

    def decode_only(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                    serialized: tf.Tensor, row: dict[str, tf.Tensor] | None = None) -> tf.Tensor:
        """L1 alone (stage report): parse + decode (fused window when training)."""
        feats = self.parse(serialized, (IMAGE_KEY,))
        if self.fast_crop and row is not None:
            crop, _, _ = decode_window(feats[IMAGE_KEY], self.s.channels, self._crop_window(row),
                                       target=self.dct_target)
            return crop
        return decode_full(feats[IMAGE_KEY], self.s.channels)

    def process(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                serialized: tf.Tensor, row: dict[str, tf.Tensor] | None = None
                ) -> dict[str, tf.Tensor]:
        # only the two features used: a converted dataset carries nine, and every
        # parsed string feature is a copy
        feats = self.parse(serialized, (IMAGE_KEY, LABEL_KEY))
        encoded = feats[IMAGE_KEY]
        label = tf.cast(tf.reshape(feats[LABEL_KEY], []), tf.int64)
        out: dict[str, tf.Tensor] = {"_local": local, "label": label}
        if self.augmenting and row is not None:
            if self.s.enable_rate >= 1.0:
                image = self.train_image(encoded, row)
            else:
                image = tf.cond(row["_enabled"], lambda: self.train_image(encoded, row),
                                lambda: self.eval_image(encoded))
                out["_enabled"] = row["_enabled"]
        else:
            image = self.eval_image(encoded)
        h, w = self.s.image_size
        out["image"] = tf.ensure_shape(image, [h, w, self.s.channels])
        return out

    def sentinel(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                 serialized: tf.Tensor, row: dict[str, tf.Tensor] | None = None
                 ) -> dict[str, tf.Tensor]:
        h, w = self.s.image_size
        out = {"_local": local, "label": tf.constant(-1, tf.int64),
               "image": tf.zeros([h, w, self.s.channels], tf.uint8)}
        if self.augmenting and self.s.enable_rate < 1.0:
            out["_enabled"] = tf.constant(False)
        return out

    # ------------------------------------------------------------------ batch, L3, L4
    def batch(self, ds: tf.data.Dataset, drop_remainder: bool) -> tf.data.Dataset:
        return ds.batch(self.s.batch_size, drop_remainder=drop_remainder)

    def compose(self, batch: dict[str, tf.Tensor], global_batch: tf.Tensor,
                num_classes: int | None, keep_index: bool) -> dict[str, tf.Tensor]:
        s = self.s
        images = batch["image"]  # uint8
        labels: tf.Tensor = batch["label"]
        if s.one_hot:
            if not num_classes:
                raise ConfigError("data.num_classes: needed for one-hot labels (label_format "
                                  "one_hot, mixup or cutmix) and the manifest has no class names")
            labels = self.to_one_hot(labels, int(num_classes))
        if self.device:
            out = {"image": images, "label": labels,
                   **self.device_inputs(batch, images, global_batch)}
        else:
            x, labels = self.augment_batch(batch, images, labels, global_batch)
            out = {"image": x, "label": labels}
        if keep_index:
            out["index"] = seeds.global_index(batch["_local"], self.wi, self.wc)
        return out

    def device_inputs(self, batch: dict[str, tf.Tensor], images: tf.Tensor,
                      global_batch: tf.Tensor) -> dict[str, tf.Tensor]:
        """What `augment_batch` would draw for this batch, as tensors for the device
        stage (`augment.on_device`, its module docstring lists the keys): the
        enable decisions, the L3 inputs of `pixel_inputs`, the L4 draws of each
        mixer's sampler from the same op seeds. No pixel is touched."""
        b = tf.shape(images)[0]
        out = {on_device.ENABLED: batch["_enabled"] if "_enabled" in batch
               else tf.ones([b], tf.bool)}
        if self.pixel:
            inputs = self.pixel_inputs(batch)
            if self.fused:
                out[on_device.PIXEL_PARAMS] = inputs["_pparams"]
                out[on_device.PIXEL_APPLY] = inputs["_papply"]
            else:
                out[on_device.PIXEL_SEEDS] = inputs["_pseeds"]
        bseed = seeds.batch_seed(self.es, global_batch)
        h, w = self.s.image_size
        for k, op in enumerate(self.batch_ops):
            alpha = float(op.params.get("alpha", 0.2 if op.name == "mixup" else 1.0))
            seed = seeds.op_seed(bseed, k)
            if op.name == "mixup":
                out["mixup_perm"], out["mixup_lambda"] = self.samplers[k](seed, b, alpha, op.p)
            else:
                (out["cutmix_perm"], out["cutmix_boxes"],
                 out["cutmix_weight"]) = self.samplers[k](seed, b, h, w, alpha, op.p)
        return out

    def pixel_fields(self, sseed: Callable[[int], tf.Tensor] | None) -> dict[str, tf.Tensor]:
        """Per-sample L3 inputs carried to the batch (detection): drawn params
        (fused) or op seeds. `sseed=None` gives placeholders of the same structure."""
        n = len(self.pixel)
        if not n:
            return {}
        if sseed is None:
            if self.fused:
                return {"_pparams": tf.zeros([n], tf.float32), "_papply": tf.zeros([n], tf.bool)}
            return {"_pseeds": tf.zeros([n, 2], tf.int64)}
        pseeds = tf.stack([sseed(PIXEL_BASE + j) for j in range(n)])
        if self.fused:
            params, apply = self.fused.sample(pseeds)
            return {"_pparams": params, "_papply": apply}
        return {"_pseeds": pseeds}

    def pixel_inputs(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The batch's L3 inputs, drawn row by row from each sample's own seeds,
        vectorized: `_pparams`/`_papply` [B, n] (fused) or `_pseeds` [B, n, 2] --
        what `pixel_fields` draws per sample, bit for bit."""
        base = self.op_base(seeds.global_index(batch["_local"], self.wi, self.wc))
        rows = [seeds.fold(base, PIXEL_BASE + j) for j in range(len(self.pixel))]
        if not self.fused:
            return {"_pseeds": tf.stack(rows, axis=1)}
        params, applies = [], []
        for op, seed in zip(self.fused.ops, rows):
            sampler = getattr(color, FUSABLE[op.name][0])
            kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in op.params.items()}
            if op.p >= 1.0:
                params.append(tf.cast(sampler(seed, **kw), tf.float32))
                applies.append(tf.ones(tf.shape(seed)[:1], tf.bool))
            else:
                pseed, aseed = color.split_seed(seed)  # the exact random_op split
                params.append(tf.cast(sampler(pseed, **kw), tf.float32))
                applies.append(color.sample_apply(aseed, op.p))
        return {"_pparams": tf.stack(params, axis=1), "_papply": tf.stack(applies, axis=1)}

    def l3(self, batch: dict[str, tf.Tensor], images: tf.Tensor, normalize: bool
           ) -> tuple[tf.Tensor, bool]:
        """Batched L3 on uint8 `images`; returns (x, normalized). x is float32 [0,1]
        (or normalized) for float32 output, uint8 for uint8 output."""
        float_out = self.s.output_dtype == "float32"
        inputs = self.pixel_inputs(batch)
        if self.fused:
            norm = normalize and float_out
            return self.fused(images, inputs["_pparams"], inputs["_papply"],
                              to_float=float_out, normalize=norm), norm
        x = tf.cast(images, tf.float32) * (1.0 / 255.0) if float_out else images
        for j, fn in enumerate(self.pixel_fns):
            x = fn(x, inputs["_pseeds"][:, j])
        return x, False

    def pixel_stage(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Batch + L3 alone (the stage report's "pixel" prefix): what `compose`
        computes before L4 and normalize, for every row."""
        out = {k: v for k, v in batch.items() if not k.startswith("_")}
        if self.pixel and not self.device:  # device mode: no L3 on the host
            out["image"], _ = self.l3(batch, batch["image"], normalize=False)
        return out

    def augment_batch(self, batch: dict[str, tf.Tensor], images: tf.Tensor, labels: tf.Tensor,
                      global_batch: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """L3 (batched) -> L4 -> normalize, gated PER SAMPLE by augment.enable_rate.

        Every sample carries its own decision (`_enabled`, drawn in the plan from
        the batch it was planned in), the one its L2 followed. A batch whose rows
        agree runs one branch; one whose rows disagree (after a skipped record, or
        under `deterministic: false`) runs L3 and selects per row, then L4 on the
        whole batch -- a plain row takes part as a mixing partner with its plain
        pixels and label -- and finally every plain row gets exactly its plain
        rendering back (image and label), so a plain sample is always the eval
        rendering and only enabled samples are augmented (docs/pipeline.md).
        """
        s = self.s
        float_out = s.output_dtype == "float32"

        def plain() -> tuple[tf.Tensor, tf.Tensor]:
            x = self.normalize(images) if float_out else images
            return x, labels

        if not (self.pixel or self.batch_ops):
            return plain()

        def augmented(mask: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor]:
            x, y, normalized = images, labels, False
            if self.pixel:
                x, normalized = self.l3(batch, images, normalize=not self.batch_ops)
                if mask is not None and self.batch_ops:  # L4 sees plain rows unaugmented
                    x = select_rows(mask, x, tf.cast(images, tf.float32) * (1.0 / 255.0)
                                    if float_out else images)
            elif float_out:
                x = tf.cast(images, tf.float32) * (1.0 / 255.0)
            bseed = seeds.batch_seed(self.es, global_batch)
            for k, op in enumerate(self.batch_ops):
                alpha = float(op.params.get("alpha", 0.2 if op.name == "mixup" else 1.0))
                x, y = self.mixers[k](x, y, seeds.op_seed(bseed, k), alpha, op.p)
            if float_out and not normalized:
                x = self.normalize(x)
            return x, y

        if s.enable_rate >= 1.0:
            return augmented()
        return gated(batch["_enabled"], augmented, plain)


def eval_image(s: Settings, encoded: tf.Tensor, crop_in_decoder: bool = True) -> tf.Tensor:
    """Eval/serving L1 of one encoded image: centre-crop window (decoded alone for
    JPEG), bilinear resize, uint8 [H, W, channels]. The one definition that the eval
    pipeline and the exported serving graph (`pipeline.serving`) both trace. With
    `data.dct_scaling` the window is decoded at the largest DCT reduction that
    keeps it >= the output (`_decode.dct_ratio`)."""
    size, frac = s.image_size, s.eval_crop_fraction
    crop, _, _ = decode_window(
        encoded, s.channels, lambda h, w: augment.center_crop_window(h, w, size, frac),
        crop_in_decoder, target=size if s.dct_scaling else None)
    return resize_uint8(crop, size)


def device_spec(config: Any) -> on_device.DeviceSpec:
    """The `augment.DeviceSpec` of a config: its train L3 ops, L4 ops, normalize,
    output dtype and enable rate, for the device stage of `pixel_stage: device`."""
    from tfpipe.pipeline._settings import settings

    s = settings(config)
    if s.task != "classification":
        raise ConfigError(f"augment.pixel_stage: 'device' needs data.task 'classification', "
                          f"got {s.task!r} (detection runs L3 on the host: use 'host')")
    return on_device.DeviceSpec(pixel=tuple(s.active("pixel")), batch=tuple(s.active("batch")),
                                mean=s.mean, std=s.std, output_dtype=s.output_dtype,
                                enable_rate=s.enable_rate)


def device_stage(config: Any, **layer_kwargs: Any) -> on_device.OnDevice:
    """`augment.OnDevice` for `config`: apply it in the train step to the batches of
    `build_pipeline(config)` with `augment.pixel_stage: device` (docs/training.md)."""
    return on_device.OnDevice(device_spec(config), **layer_kwargs)
