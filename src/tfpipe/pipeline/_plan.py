"""The plan stage: a sample's seeds, and the draws that do not depend on its image.

Seeds (docs/seeds.md): sample seed = `sample_seed(epoch_seed, global_index)`;
geometry op i draws from `op_seed(sample_seed, i)`, pixel op j from
`op_seed(sample_seed, PIXEL_BASE + j)`; L4 op k from `op_seed(batch_seed, k)`.
Whether a sample is augmented at all (`augment.enable_rate`) is one draw per
planned batch, `op_seed(batch_seed, ENABLE_OP)` of the batch the sample is
planned in, `global_index(local // batch_size, worker, workers)`.

`SampleSeeds` derives those seeds (classification and detection alike).
`PlanStage.plan` makes, once per block of samples (`_errors.planned`), the
classification draws that need no pixels -- the op-seed base, the
random-resized-crop numbers, the flip coin, the enable coin -- with the
vectorized Philox of `tfpipe.seeds.*_rows`: the same bits as the per-sample
ops (tests/pipeline/test_plan.py). Per sample this used to be ~20 small RNG
kernels; it was the largest overhead of the train path.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import tensorflow as tf

from tfpipe import augment, seeds
from tfpipe.augment.geometry import bernoulli, split_seeds
from tfpipe.pipeline._settings import Op

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


def pair(op: Op, key: str, default: tuple[float, float]) -> tuple[float, float]:
    """A two-number op parameter (scale, ratio) as floats."""
    v = op.params.get(key, default)
    return (float(v[0]), float(v[1]))


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


class SampleSeeds:
    """The seeds of one epoch's samples on one worker (docs/seeds.md)."""

    def __init__(self, epoch_seed: tf.Tensor, worker: int, workers: int, batch_size: int
                 ) -> None:
        self.es, self.wi, self.wc, self.batch_size = epoch_seed, worker, workers, batch_size
        # Hoisted: fold(epoch_seed, SAMPLE_TAG) is the same for every sample.
        self.stream = seeds.sample_stream(epoch_seed)

    def global_index(self, local: tf.Tensor) -> tf.Tensor:
        return seeds.global_index(local, self.wi, self.wc)

    def indices(self, local: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """(global sample index, global index of the batch it is planned in)."""
        gbatch = seeds.global_index(local // self.batch_size, self.wi, self.wc)
        return self.global_index(local), gbatch

    def op_base(self, gidx: tf.Tensor) -> tf.Tensor:
        """`op_seed(sample_seed(epoch_seed, gidx), k)` is `fold(op_base(gidx), k)`:
        the common folds once. gidx scalar -> [2]; gidx [n] -> rows [n, 2]."""
        return seeds.fold(seeds.fold(self.stream, gidx), seeds.OP_TAG)

    def op_seeds(self, gidx: tf.Tensor) -> Callable[[int], tf.Tensor]:
        """k -> `op_seed(sample_seed(epoch_seed, gidx), k)`."""
        base = self.op_base(gidx)
        return lambda k: seeds.fold(base, k)

    def enabled(self, global_batch: tf.Tensor, rate: float) -> tf.Tensor:
        return batch_enabled(self.es, global_batch, rate)

    def batch_seed(self, global_batch: tf.Tensor) -> tf.Tensor:
        return seeds.batch_seed(self.es, global_batch)


def fast_crop(geometry: Sequence[Op]) -> bool:
    """random_resized_crop (bilinear) first: its window is drawn before decoding
    (decode_and_crop), from draws made in the plan."""
    return bool(geometry) and geometry[0].name == "random_resized_crop" and \
        geometry[0].params.get("interpolation", "bilinear") == "bilinear"


def fast_flip(geometry: Sequence[Op]) -> bool:
    """... and a horizontal-only flip right after it: its coin is drawn in the plan too."""
    return fast_crop(geometry) and len(geometry) > 1 and geometry[1].name == "flip" and \
        bool(geometry[1].params.get("horizontal", True)) and \
        not bool(geometry[1].params.get("vertical", False))


class PlanStage:
    """The image-independent draws of classification training, per block of samples."""

    def __init__(self, sample_seeds: SampleSeeds, geometry: Sequence[Op], enable_rate: float,
                 image_size: tuple[int, int]) -> None:
        self.seeds, self.geometry, self.enable_rate = sample_seeds, list(geometry), enable_rate
        self.image_size = image_size
        self.fast_crop, self.fast_flip = fast_crop(self.geometry), fast_flip(self.geometry)
        # affine ops whose matrix the plan draws (vectorized, the same bits): the
        # input size must be image_size, so none after a rot90 of a non-square size
        square = image_size[0] == image_size[1]
        ops = self.geometry
        self.planned_affine = [i for i, op in enumerate(ops) if op.name == "affine" and (
            square or "rot90" not in [o.name for o in ops[:i]])]

    def plan(self, local: tf.Tensor) -> dict[str, tf.Tensor]:
        """The draws of a block of samples (local indices [n]).

        `_base`: op-seed bases; `_enabled`: the batch's enable coin (enable_rate < 1);
        `_crop`: `crop_window_draws(op_seed(0))` [n, 4, attempts]; `_crop_on`: its
        p-coin (p < 1); `_flip`: the flip coin of op 1; `_affine{i}` / `_affine{i}_on`:
        affine op i's matrix [n, 3, 3] (`sample_affine_matrices`) and p-coin. The
        same calls as for one sample, on rows of seeds (vectorized Philox): the
        same bits (tested).
        """
        gidx, gbatch = self.seeds.indices(local)
        base = self.seeds.op_base(gidx)
        out = {"_base": base}
        if self.enable_rate < 1.0:
            enabled = self.seeds.enabled(gbatch, self.enable_rate)
            out["_enabled"] = tf.broadcast_to(enabled, tf.shape(local))
        if self.fast_crop:
            op = self.geometry[0]
            s0 = seeds.fold(base, 0)
            out["_crop"] = augment.crop_window_draws(
                s0, pair(op, "scale", augment.CROP_SCALE), pair(op, "ratio", augment.CROP_RATIO))
            if op.p < 1.0:
                out["_crop_on"] = coin(s0, op.p)
        if self.fast_flip:  # = random_flip's horizontal draw
            flip_seed = split_seeds(seeds.fold(base, 1), 2)[:, 0]
            out["_flip"] = bernoulli(flip_seed, self.geometry[1].p)
        for i in self.planned_affine:  # = random_affine's matrix and p-coin, per row
            op, si = self.geometry[i], seeds.fold(base, i)
            out[f"_affine{i}"] = augment.sample_affine_matrices(
                si, self.image_size, **affine_kwargs(op, draws_only=True))
            if op.p < 1.0:
                out[f"_affine{i}_on"] = coin(si, op.p)
        return out
