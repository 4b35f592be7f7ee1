"""`build_transforms(specs, stats) -> FeatureTransforms`: Keras preprocessing layers
initialized from the stored statistics (no `adapt()`), graph ops only.

Each kind's exact definition, its missing-value treatment and what is
host-independent are in docs/tabular.md ("Transforms"); the comments here say why.

Raw input of one column: a dense `[B]` tensor, or a `SparseTensor` / `RaggedTensor`
`[B, None]` with 0 or 1 values per row (what `tf.io.parse_example` gives for the
var-length feature the table converter writes for a nullable column: a null is an
empty list). A dense column may come with a bool mask `<column>__missing` `[B]`
(the serving signature's way to say "null"). NaN in a float column is missing too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from tfpipe.errors import ConfigError
from tfpipe.features._spec import (IMPUTE_WORDS, INDICATOR_SUFFIX, INPUT_DTYPES, MISSING_SUFFIX,
                                   NUMERIC_KINDS, TIME_PARTS, TransformSpec)

_TF_DTYPES = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}
_SECONDS_PER_DAY = 86400
# 1970-01-01 was a Thursday: with Monday = 0 its day of week is 3.
_EPOCH_WEEKDAY = 3
_MINUTES_PER_DAY = 1440

# Parameters each kind takes, with their defaults (None: no default / optional).
PARAMS: dict[str, dict[str, Any]] = {
    "normalize": {"impute": "mean", "missing_indicator": False},
    "min_max": {"impute": "mean", "missing_indicator": False},
    "clip": {"lower": None, "upper": None, "lower_quantile": None, "upper_quantile": None,
             "impute": "mean", "missing_indicator": False},
    "log1p": {"impute": "zero", "missing_indicator": False},
    "bucketize": {"num_buckets": 10, "impute": "median", "missing_indicator": False},
    "vocabulary": {"top_k": None, "min_frequency": 1, "num_oov": 1},
    "embedding_id": {"top_k": None, "min_frequency": 1, "num_oov": 1, "embedding_dim": None},
    "hash": {"num_bins": 1024},
    "cross": {"num_bins": 1024},
    "time": {"part": "hour", "utc_offset_minutes": 0},
    "passthrough": {"impute": None, "missing_indicator": False},
}


@dataclass(frozen=True)
class OutputInfo:
    """What one output feature is: dtype, per-row shape, and for indices the number
    of distinct values (`cardinality`: the `input_dim` of an Embedding over it)."""

    name: str
    kind: str
    dtype: str
    shape: tuple[int, ...]
    cardinality: int | None = None
    embedding_dim: int | None = None


def _err(spec: TransformSpec, msg: str) -> ConfigError:
    return ConfigError(f"features.{spec.name} (transform {spec.kind!r}, column "
                       f"{', '.join(repr(c) for c in spec.columns)}): {msg}")


# ---------------------------------------------------------------- host-independent math
def log1p_f32(x: tf.Tensor) -> tf.Tensor:
    """float32 `log1p(x)` computed from IEEE basic operations only.

    `tf.math.log1p` runs Eigen's vectorized polynomial, whose multiply-adds become
    FMAs on hosts that have them: the last bit depends on the CPU. Here every step
    is a separate exactly-rounded TF op (add, multiply, divide, bitcast, integer
    shifts) in float64, so every host computes the same float64 and the same
    float32 from it. log(u) = e ln 2 + 2 atanh(s), s = (m - 1) / (m + 1) with
    u = m 2^e, m in [sqrt(1/2), sqrt(2)) (|s| < 0.172: 12 series terms reach
    float64 precision); log1p(x) = log(u) x / (u - 1) with u = 1 + x (Goldberg's
    correction for the rounding of 1 + x). Within 1 ulp of the correctly rounded
    float32 log1p for x >= 0 (tested against NumPy).
    """
    x64 = tf.cast(x, tf.float64)
    u = 1.0 + x64
    bits = tf.bitcast(u, tf.int64)
    e = tf.bitwise.right_shift(bits, 52) - 1023
    mbits = tf.bitwise.bitwise_or(tf.bitwise.bitwise_and(bits, 0x000FFFFFFFFFFFFF),
                                  0x3FF0000000000000)
    m = tf.bitcast(mbits, tf.float64)
    big = m > math.sqrt(2.0)
    m = tf.where(big, m * 0.5, m)
    e = tf.where(big, e + 1, e)
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    p = tf.fill(tf.shape(s), tf.constant(1.0 / 23.0, tf.float64))
    for k in range(10, -1, -1):
        p = p * s2 + 1.0 / (2 * k + 1)
    log_u = tf.cast(e, tf.float64) * math.log(2.0) + 2.0 * s * p
    safe = tf.where(tf.equal(u, 1.0), tf.ones_like(u), u - 1.0)
    out = tf.where(tf.equal(u, 1.0), x64, log_u * (x64 / safe))
    out = tf.where(tf.math.is_finite(x64), out, x64)  # +inf stays inf, NaN stays NaN
    return tf.cast(out, tf.float32)


def _angle_table(steps: int) -> np.ndarray:
    """(sin, cos) of 2 pi k / steps, k = 0..steps-1, as float32 constants: a lookup
    instead of tf.sin/tf.cos, whose vectorized kernels differ between CPUs."""
    return np.array([[math.sin(2 * math.pi * k / steps), math.cos(2 * math.pi * k / steps)]
                     for k in range(steps)], np.float32)


# ----------------------------------------------------------------------------- inputs
def split_missing(value: Any, mask: Any, dtype: tf.DType, column: str
                  ) -> tuple[tf.Tensor, tf.Tensor]:
    """(dense [B] values, bool [B] missing) of one raw column (see module doc)."""
    zero = tf.constant("" if dtype == tf.string else 0, dtype)
    if isinstance(value, tf.SparseTensor):
        # straight from parse_example's sparse output (no ragged detour): values
        # per row counted, then each row's value at column 0 of a [B, 1] dense
        rows = value.indices[:, 0]
        n = value.dense_shape[0]
        counts = tf.math.unsorted_segment_sum(tf.ones_like(rows), rows, n)
        check = tf.debugging.assert_less_equal(
            counts, tf.ones_like(counts),
            message=f"column {column!r}: a row holds more than one value (list columns "
                    "are not transformable; one value or null per row)")
        with tf.control_dependencies([check]):
            missing = tf.equal(counts, 0)
            one = tf.SparseTensor(tf.stack([rows, tf.zeros_like(rows)], 1), value.values,
                                  tf.stack([n, tf.constant(1, tf.int64)]))
        value = tf.reshape(tf.sparse.to_dense(one, default_value=zero), [-1])
    elif isinstance(value, tf.RaggedTensor):
        lengths = value.row_lengths()
        check = tf.debugging.assert_less_equal(
            lengths, tf.ones_like(lengths),
            message=f"column {column!r}: a row holds more than one value (list columns "
                    "are not transformable; one value or null per row)")
        with tf.control_dependencies([check]):
            missing = tf.equal(lengths, 0)
        dense = value.to_tensor(default_value=zero, shape=[None, 1])
        value = tf.reshape(dense, [-1])
    else:
        value = tf.convert_to_tensor(value)
        if value.dtype != dtype:
            raise ConfigError(f"column {column!r}: expected {dtype.name} values, got "
                              f"{value.dtype.name}")
        if value.shape.rank == 2 and value.shape[1] == 1:
            value = tf.reshape(value, [-1])
        if value.shape.rank != 1:
            raise ConfigError(f"column {column!r}: expected a [batch] tensor, got shape "
                              f"{value.shape}")
        missing = tf.zeros(tf.shape(value), tf.bool)
    if mask is not None:
        missing = tf.logical_or(missing, tf.reshape(tf.cast(mask, tf.bool), [-1]))
    if dtype == tf.float32:
        missing = tf.logical_or(missing, tf.math.is_nan(value))
    value = tf.where(missing, tf.fill(tf.shape(value), zero), value)
    return value, missing


# ------------------------------------------------------------------------- the layer
class FeatureTransforms(keras.layers.Layer):
    """Raw columns -> transformed features, one whole batch at a time.

    `raw_spec`: raw column name -> `tf.TensorSpec([None], dtype)`; `nullable`: the
    columns that may be missing (their mask `<column>__missing` is part of the
    serving input); `output_info`: output name -> `OutputInfo`.
    """

    def __init__(self, plans: Sequence["_Plan"], raw_spec: dict[str, tf.TensorSpec],
                 nullable: Sequence[str], stats_sha256: str | None = None, **kwargs: Any) -> None:
        super().__init__(trainable=False, **kwargs)
        self._plans = list(plans)
        # Keras tracks layers held in attributes; a list keeps them all. Built here,
        # eagerly: a first build inside a traced function (Keras' symbolic pass, a
        # tf.data map) would leave their constants in that function's graph.
        self._layers_used = [layer for p in self._plans for layer in p.layers]
        with tf.init_scope():
            for layer in self._layers_used:
                if not layer.built:
                    layer.build((None,))
        self.built = True
        self.raw_spec = dict(raw_spec)
        self.nullable = tuple(nullable)
        self.stats_sha256 = stats_sha256
        self.output_info: dict[str, OutputInfo] = {}
        for p in self._plans:
            for info in p.outputs():
                self.output_info[info.name] = info
        self.specs = tuple(p.spec for p in self._plans)

    @property
    def serving_spec(self) -> dict[str, tf.TensorSpec]:
        """The serving input: every raw column, plus a bool mask per nullable column."""
        out = {c: tf.TensorSpec([None], s.dtype, name=c) for c, s in self.raw_spec.items()}
        for c in self.nullable:
            out[c + MISSING_SUFFIX] = tf.TensorSpec([None], tf.bool, name=c + MISSING_SUFFIX)
        return out

    def call(self, raw: Mapping[str, Any]) -> dict[str, tf.Tensor]:
        absent = [c for c in self.raw_spec if c not in raw]
        if absent:
            raise ConfigError(f"raw input lacks column(s) {absent}; the transforms need "
                              f"{sorted(self.raw_spec)}")
        cols: dict[str, tuple[tf.Tensor, tf.Tensor]] = {}
        for c, spec in self.raw_spec.items():
            cols[c] = split_missing(raw[c], raw.get(c + MISSING_SUFFIX), spec.dtype, c)
        # One static batch size for every column: a nullable column comes out of
        # parse_example as [None] where a fixed one is [B] (drop_remainder), and
        # a cross of the two must see equal shapes (issue #26 item 7)
        known = [v.shape[0] for v, _ in cols.values() if v.shape[0] is not None]
        if known:
            cols = {c: (tf.ensure_shape(v, [known[0]]), tf.ensure_shape(m, [known[0]]))
                    for c, (v, m) in cols.items()}
        out: dict[str, tf.Tensor] = {}
        for p in self._plans:
            out.update(p.apply(cols))
        return out

    def compute_output_spec(self, raw: Any) -> Any:  # Keras symbolic calls
        return {n: keras.KerasTensor((None, *i.shape), dtype=i.dtype)
                for n, i in self.output_info.items()}


# --------------------------------------------------------------------------- plans
class _Plan:
    """One TransformSpec bound to its statistics and Keras layers."""

    layers: list[Any]

    def __init__(self, spec: TransformSpec) -> None:
        self.spec = spec
        self.layers = []

    def outputs(self) -> list[OutputInfo]:
        raise NotImplementedError

    def apply(self, cols: dict[str, tuple[tf.Tensor, tf.Tensor]]) -> dict[str, tf.Tensor]:
        raise NotImplementedError


def _param(spec: TransformSpec, key: str) -> Any:
    allowed = PARAMS[spec.kind]
    unknown = sorted(set(spec.params) - set(allowed))
    if unknown:
        raise _err(spec, f"unknown parameter(s) {unknown}; allowed: {sorted(allowed)}")
    return spec.params.get(key, allowed[key])


def _numeric(spec: TransformSpec, cs: Any, where: str, what: str) -> Any:
    if cs is None or getattr(cs, "numeric", None) is None:
        raise _err(spec, f"needs the column's numeric statistics ({what}), which {where} "
                         "does not hold; convert with --stats")
    return cs.numeric


def _quantile_at(n: Any, fraction: float, spec: TransformSpec, where: str) -> float:
    """The stored quantile boundary at `fraction` (k/Q exactly, else an error)."""
    q = list(n.quantiles)
    count = len(q) + 1
    k = fraction * count
    if not q or abs(k - round(k)) > 1e-9 or not 1 <= round(k) <= len(q):
        raise _err(spec, f"quantile {fraction:g} is not stored in {where} (it holds k/{count}, "
                         f"k = 1..{count - 1})")
    return float(q[int(round(k)) - 1])


def _impute_value(spec: TransformSpec, cs: Any, where: str) -> float | None:
    how = _param(spec, "impute")
    if how is None:
        return None
    if isinstance(how, bool) or not isinstance(how, (int, float, str)):
        raise _err(spec, f"impute must be one of {', '.join(IMPUTE_WORDS)} or a number, "
                         f"got {how!r}")
    if not isinstance(how, str):
        return float(how)
    if how not in IMPUTE_WORDS:
        raise _err(spec, f"impute must be one of {', '.join(IMPUTE_WORDS)} or a number, "
                         f"got {how!r}")
    if how == "zero":
        return 0.0
    n = _numeric(spec, cs, where, f"impute: {how}")
    if how == "median":
        return _quantile_at(n, 0.5, spec, where)
    return float({"mean": n.mean, "min": n.min, "max": n.max}[how])


class _NumericPlan(_Plan):
    def __init__(self, spec: TransformSpec, cs: Any, where: str, dtype: str) -> None:
        super().__init__(spec)
        self.column = spec.columns[0]
        self.dtype = dtype
        self.indicator = bool(_param(spec, "missing_indicator"))
        self.impute = _impute_value(spec, cs, where)
        kind = spec.kind
        self.lower = self.upper = None
        self.boundaries: list[float] = []
        if kind == "normalize":
            n = _numeric(spec, cs, where, "mean, std")
            mean = np.float32(n.mean)
            # A constant column (std 0) is only centred: dividing by Keras' epsilon
            # would blow an unseen value up to ~1e7.
            std = np.float32(n.std) if n.std > 0 else np.float32(1.0)
            # sqrt(fl(s * s)) == s in IEEE arithmetic: Keras' sqrt(variance) gives std back.
            self.layers = [keras.layers.Normalization(axis=None, mean=float(mean),
                                                      variance=float(std * std))]
        elif kind == "min_max":
            n = _numeric(spec, cs, where, "min, max")
            lo, hi = np.float32(n.min), np.float32(n.max)
            rng = np.float32(hi - lo) if hi > lo else np.float32(1.0)
            self.layers = [keras.layers.Normalization(axis=None, mean=float(lo),
                                                      variance=float(rng * rng))]
        elif kind == "clip":
            for side in ("lower", "upper"):
                v, q = _param(spec, side), _param(spec, f"{side}_quantile")
                if v is not None and q is not None:
                    raise _err(spec, f"give {side} or {side}_quantile, not both")
                if q is not None:
                    v = _quantile_at(_numeric(spec, cs, where, f"{side}_quantile"), float(q),
                                     spec, where)
                setattr(self, side, None if v is None else float(np.float32(v)))
            if self.lower is None and self.upper is None:
                raise _err(spec, "needs lower/upper or lower_quantile/upper_quantile")
            if self.lower is not None and self.upper is not None and self.lower > self.upper:
                raise _err(spec, f"lower {self.lower:g} > upper {self.upper:g}")
        elif kind == "bucketize":
            n = _numeric(spec, cs, where, "quantiles")
            nb = _param(spec, "num_buckets")
            count = len(n.quantiles) + 1
            ok = [d for d in range(2, count + 1) if count % d == 0]
            if isinstance(nb, bool) or not isinstance(nb, int) or nb not in ok:
                raise _err(spec, f"num_buckets must divide the {count} stored quantile bins "
                                 f"of {where}: one of {ok}, got {nb!r}")
            step = count // nb
            # float32 boundaries: Bucketize holds them as float32 and compares float32 inputs.
            self.boundaries = [float(np.float32(n.quantiles[k * step - 1])) for k in range(1, nb)]
            self.layers = [keras.layers.Discretization(bin_boundaries=self.boundaries,
                                                       output_mode="int")]

    def outputs(self) -> list[OutputInfo]:
        kind = self.spec.kind
        card = len(self.boundaries) + 1 if kind == "bucketize" else None
        out = [OutputInfo(self.spec.name, kind, "int64" if kind == "bucketize" else "float32",
                          (), card)]
        if self.indicator:
            out.append(OutputInfo(self.spec.name + INDICATOR_SUFFIX, kind, "float32", ()))
        return out

    def apply(self, cols: dict[str, tuple[tf.Tensor, tf.Tensor]]) -> dict[str, tf.Tensor]:
        value, missing = cols[self.column]
        x = tf.cast(value, tf.float32)
        if self.impute is not None:
            x = tf.where(missing, tf.fill(tf.shape(x), np.float32(self.impute)), x)
        kind = self.spec.kind
        if kind in ("normalize", "min_max"):
            y = self.layers[0](x)
        elif kind == "clip":
            lo = -np.inf if self.lower is None else self.lower
            hi = np.inf if self.upper is None else self.upper
            y = tf.clip_by_value(x, np.float32(lo), np.float32(hi))
        elif kind == "log1p":
            y = log1p_f32(tf.maximum(x, 0.0))
        else:  # bucketize
            y = tf.cast(self.layers[0](x), tf.int64)
        out = {self.spec.name: y}
        if self.indicator:
            out[self.spec.name + INDICATOR_SUFFIX] = tf.cast(missing, tf.float32)
        return out


class _LookupPlan(_Plan):
    """vocabulary / embedding_id: index 0 = missing, 1..num_oov = out of vocabulary,
    then the vocabulary in the statistics' order (frequency desc, value asc)."""

    def __init__(self, spec: TransformSpec, cs: Any, where: str, dtype: str) -> None:
        super().__init__(spec)
        self.column = spec.columns[0]
        cat = getattr(cs, "categorical", None) if cs is not None else None
        if cat is None:
            raise _err(spec, f"needs the column's vocabulary, which {where} does not hold; "
                             "convert with --stats")
        top_k, min_freq, num_oov = (_param(spec, k) for k in ("top_k", "min_frequency",
                                                              "num_oov"))
        for key, v, lo in (("top_k", top_k, 1), ("min_frequency", min_freq, 1),
                           ("num_oov", num_oov, 1)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < lo):
                raise _err(spec, f"{key} must be an integer >= {lo}, got {v!r}")
        vocab = [v for v, f in cat.vocabulary if f >= min_freq]
        if top_k is not None:
            vocab = vocab[:top_k]
        if not vocab:
            raise _err(spec, f"no value of the stored vocabulary ({where}) has frequency >= "
                             f"{min_freq}")
        self.vocabulary = vocab
        self.num_oov = num_oov
        if dtype == "string":
            words = [v.decode() if isinstance(v, bytes) else str(v) for v in vocab]
            layer = keras.layers.StringLookup(vocabulary=words, num_oov_indices=num_oov,
                                              mask_token=None, output_mode="int")
        else:
            layer = keras.layers.IntegerLookup(vocabulary=np.array(vocab, np.int64),
                                               num_oov_indices=num_oov, mask_token=None,
                                               vocabulary_dtype="int64", output_mode="int")
        self.layers = [layer]
        self.cardinality = 1 + num_oov + len(vocab)
        dim = _param(spec, "embedding_dim") if spec.kind == "embedding_id" else None
        if spec.kind == "embedding_id" and dim is None:
            # the fast.ai rule of thumb, capped: a documented default, not a tuned one
            dim = int(min(600, round(1.6 * self.cardinality ** 0.56)))
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise _err(spec, f"embedding_dim must be an integer >= 1, got {dim!r}")
        self.embedding_dim = dim

    def outputs(self) -> list[OutputInfo]:
        return [OutputInfo(self.spec.name, self.spec.kind, "int64", (), self.cardinality,
                           self.embedding_dim)]

    def apply(self, cols: dict[str, tuple[tf.Tensor, tf.Tensor]]) -> dict[str, tf.Tensor]:
        value, missing = cols[self.column]
        index = tf.cast(self.layers[0](value), tf.int64) + 1
        return {self.spec.name: tf.where(missing, tf.zeros_like(index), index)}


class _HashPlan(_Plan):
    """hash / cross: bin 0 = missing (any input missing, for a cross); values hash
    into 1..num_bins-1 (FarmHash64 of the value's text: integer, host-independent)."""

    def __init__(self, spec: TransformSpec) -> None:
        super().__init__(spec)
        nb = _param(spec, "num_bins")
        if isinstance(nb, bool) or not isinstance(nb, int) or nb < 2:
            raise _err(spec, f"num_bins must be an integer >= 2, got {nb!r}")
        self.num_bins = nb
        self.layers = [keras.layers.Hashing(num_bins=nb - 1) if spec.kind == "hash"
                       else keras.layers.HashedCrossing(num_bins=nb - 1, output_mode="int")]

    def outputs(self) -> list[OutputInfo]:
        return [OutputInfo(self.spec.name, self.spec.kind, "int64", (), self.num_bins)]

    def apply(self, cols: dict[str, tuple[tf.Tensor, tf.Tensor]]) -> dict[str, tf.Tensor]:
        values = [cols[c][0] for c in self.spec.columns]
        missing = cols[self.spec.columns[0]][1]
        for c in self.spec.columns[1:]:
            missing = tf.logical_or(missing, cols[c][1])
        if self.spec.kind == "hash":
            h = self.layers[0](values[0])
        else:
            h = self.layers[0](tuple(values))
        h = tf.cast(h, tf.int64) + 1
        return {self.spec.name: tf.where(missing, tf.zeros_like(h), h)}


class _TimePlan(_Plan):
    """Local time from epoch seconds: local = floor(t) + 60 * utc_offset_minutes."""

    def __init__(self, spec: TransformSpec) -> None:
        super().__init__(spec)
        self.column = spec.columns[0]
        part, off = _param(spec, "part"), _param(spec, "utc_offset_minutes")
        if part not in TIME_PARTS:
            raise _err(spec, f"part must be one of {', '.join(TIME_PARTS)}, got {part!r}")
        if isinstance(off, bool) or not isinstance(off, int) or not -840 <= off <= 840:
            raise _err(spec, f"utc_offset_minutes must be an integer in [-840, 840], got {off!r}")
        self.part, self.offset = part, off
        self.table = (_angle_table(_MINUTES_PER_DAY) if part == "hour_cyclic"
                      else _angle_table(7) if part == "day_cyclic" else None)

    def outputs(self) -> list[OutputInfo]:
        if self.part in ("hour_cyclic", "day_cyclic"):
            return [OutputInfo(self.spec.name, "time", "float32", (2,))]
        # the last index is the missing value
        return [OutputInfo(self.spec.name, "time", "int64", (), 25 if self.part == "hour" else 8)]

    def apply(self, cols: dict[str, tuple[tf.Tensor, tf.Tensor]]) -> dict[str, tf.Tensor]:
        value, missing = cols[self.column]
        if value.dtype.is_floating:
            # floor in float64: float32 seconds of today's epoch are whole to ~128 s anyway
            value = tf.cast(tf.floor(tf.cast(value, tf.float64)), tf.int64)
        local = value + 60 * self.offset
        if self.part in ("hour", "hour_cyclic"):
            minute = tf.math.floordiv(tf.math.floormod(local, _SECONDS_PER_DAY), 60)
            if self.part == "hour":
                y = tf.where(missing, tf.fill(tf.shape(minute), tf.constant(24, tf.int64)),
                             tf.math.floordiv(minute, 60))
                return {self.spec.name: y}
            index = minute
        else:
            dow = tf.math.floormod(tf.math.floordiv(local, _SECONDS_PER_DAY) + _EPOCH_WEEKDAY, 7)
            if self.part == "day_of_week":
                return {self.spec.name: tf.where(missing, tf.fill(tf.shape(dow), tf.constant(
                    7, tf.int64)), dow)}
            index = dow
        sc = tf.gather(tf.constant(self.table), index)
        return {self.spec.name: tf.where(missing[:, None], tf.zeros_like(sc), sc)}


class _PassPlan(_Plan):
    def __init__(self, spec: TransformSpec, dtype: str) -> None:
        super().__init__(spec)
        self.column = spec.columns[0]
        self.dtype = dtype
        self.indicator = bool(_param(spec, "missing_indicator"))
        imp = _param(spec, "impute")
        if imp is not None:
            ok = isinstance(imp, str) if dtype == "string" else (
                isinstance(imp, (int, float)) and not isinstance(imp, bool))
            if not ok or (dtype == "int64" and not float(imp).is_integer()):
                raise _err(spec, f"impute for a {dtype} column must be a "
                                 f"{'string' if dtype == 'string' else 'number'}, got {imp!r}")
        self.impute = imp

    def outputs(self) -> list[OutputInfo]:
        out = [OutputInfo(self.spec.name, "passthrough", self.dtype, ())]
        if self.indicator:
            out.append(OutputInfo(self.spec.name + INDICATOR_SUFFIX, "passthrough", "float32", ()))
        return out

    def apply(self, cols: dict[str, tuple[tf.Tensor, tf.Tensor]]) -> dict[str, tf.Tensor]:
        value, missing = cols[self.column]
        if self.impute is not None:
            fill = self.impute.encode() if self.dtype == "string" else self.impute
            value = tf.where(missing, tf.fill(tf.shape(value), tf.constant(
                fill, _TF_DTYPES[self.dtype])), value)
        out = {self.spec.name: value}
        if self.indicator:
            out[self.spec.name + INDICATOR_SUFFIX] = tf.cast(missing, tf.float32)
        return out


# ---------------------------------------------------------------------------- build
def _column_stats(stats: Any, column: str) -> Any:
    if stats is None:
        return None
    cols = getattr(stats, "columns", {})
    return cols.get(column) if isinstance(cols, Mapping) else None


def build_transforms(specs: Sequence[TransformSpec], stats: Any, *,
                     dtypes: Mapping[str, str] | None = None,
                     nullable: Sequence[str] | None = None,
                     where: str = "the statistics") -> FeatureTransforms:
    """The `FeatureTransforms` layer for `specs`, initialized from `stats`.

    dtypes: raw column -> record dtype ("int64" | "float32" | "string"); default
    the statistics' dtypes. nullable: columns that may be missing (default: those
    the statistics saw missing values in). where: how errors name the statistics
    (the pipeline passes the path of statistics.json). Errors name the output,
    the transform and the column (ConfigError).
    """
    if not specs:
        raise ConfigError("features: no transforms given (features.columns is empty)")
    known = dict(dtypes) if dtypes is not None else {
        n: c.dtype for n, c in getattr(stats, "columns", {}).items()}
    names: set[str] = set()
    plans: list[_Plan] = []
    used: dict[str, str] = {}
    for spec in specs:
        if not isinstance(spec, TransformSpec):
            raise ConfigError(f"build_transforms takes TransformSpec objects, got {spec!r}")
        if spec.name in names:
            raise _err(spec, "output name used twice")
        names.add(spec.name)
        for c in spec.columns:
            if c not in known:
                raise _err(spec, f"unknown column {c!r}; the data has {', '.join(sorted(known))}")
            dt = known[c]
            if dt not in INPUT_DTYPES[spec.kind]:
                raise _err(spec, f"column {c!r} holds {dt}; {spec.kind!r} takes "
                                 f"{' or '.join(INPUT_DTYPES[spec.kind])} columns")
            used[c] = dt
        cs = _column_stats(stats, spec.columns[0])
        dt = known[spec.columns[0]]
        if spec.kind in NUMERIC_KINDS:
            plans.append(_NumericPlan(spec, cs, where, dt))
        elif spec.kind in ("vocabulary", "embedding_id"):
            plans.append(_LookupPlan(spec, cs, where, dt))
        elif spec.kind in ("hash", "cross"):
            plans.append(_HashPlan(spec))
        elif spec.kind == "time":
            plans.append(_TimePlan(spec))
        else:
            plans.append(_PassPlan(spec, dt))
        for p in plans[-1:]:
            for info in p.outputs():
                if info.name != spec.name and info.name in names:
                    raise _err(spec, f"output {info.name!r} clashes with another output")
                names.add(info.name)
    if nullable is None:
        nullable = [c for c in used if (cs := _column_stats(stats, c)) is not None and any(
            getattr(getattr(cs, part, None), "missing", 0) for part in ("numeric", "categorical"))]
    raw_spec = {c: tf.TensorSpec([None], _TF_DTYPES[dt], name=c) for c, dt in used.items()}
    sha = getattr(stats, "sha256", None)
    return FeatureTransforms(plans, raw_spec, [c for c in used if c in set(nullable)],
                             stats_sha256=sha if isinstance(sha, str) else None)
