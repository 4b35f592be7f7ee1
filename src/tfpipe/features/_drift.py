"""Drift: new data against the stored train statistics, one streaming pass.

Numbers are compared in the baseline's quantile bins (exact counts of the new
data in the stored bins): PSI and Jensen-Shannon divergence. Categories are
compared over the stored vocabulary plus one out-of-vocabulary bucket:
L-infinity distance, the rate of values outside the stored vocabulary beyond
the rate a fresh sample is expected to have (the baseline's OOV share plus the
Good-Turing share of never-seen values that the listed singletons stand for),
and frequent baseline values that vanished. With
transform specs, the new data also runs through the same `build_transforms`
graph: OOV rate of vocabulary outputs, empty and overfull buckets of bucketize
outputs. Thresholds: `DriftThresholds` (defaults documented in docs/tabular.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from tfpipe.errors import ConfigError, InputError
from tfpipe.features._compute import iter_batches, numeric_values, string_values
from tfpipe.features._sketch import FrequencyAccumulator, NumericAccumulator
from tfpipe.features._stats import Statistics

PSI_EPSILON = 1e-4  # bin shares are floored here, so an empty bin gives a finite PSI


@dataclass(frozen=True)
class DriftThresholds:
    """A column is flagged when a metric exceeds its threshold (see docs/tabular.md)."""

    psi: float = 0.2  # population stability index; 0.1-0.25 "moderate", > 0.25 "major"
    js: float = 0.05  # Jensen-Shannon divergence, base 2 (0..1)
    linf: float = 0.05  # L-infinity distance of category shares
    new_category_rate: float = 0.05  # share of values outside the vocabulary, beyond baseline
    dropped_share: float = 0.01  # a baseline value with this share that vanished
    missing_rate: float = 0.05  # absolute change of the missing share
    oov_rate: float = 0.05  # after transform: OOV share increase of a vocabulary output
    empty_bucket_share: float = 0.01  # after transform: expected share of an empty bucket
    overfull_factor: float = 2.0  # after transform: bucket share > factor * expected

    @classmethod
    def from_mapping(cls, obj: Mapping[str, Any] | None, where: str = "thresholds"
                     ) -> DriftThresholds:
        if obj is None:
            return cls()
        if not isinstance(obj, Mapping):
            raise ConfigError(f"{where}: expected a mapping of threshold -> number")
        known = [f.name for f in fields(cls)]
        values: dict[str, float] = {}
        for key, value in obj.items():
            if key not in known:
                raise ConfigError(f"{where}.{key}: unknown threshold; allowed: "
                                  f"{', '.join(known)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
                    or math.isnan(value):
                raise ConfigError(f"{where}.{key}: must be a number >= 0, got {value!r}")
            values[key] = float(value)
        return cls(**values)


@dataclass
class ColumnDrift:
    name: str
    kind: str  # numeric | categorical | absent
    metrics: dict[str, float]
    flags: list[str]  # "psi 0.41 > 0.2", ...
    plot: dict[str, Any] = field(default_factory=dict)  # what the report draws

    @property
    def flagged(self) -> bool:
        return bool(self.flags)


@dataclass
class TransformHealth:
    name: str  # the output feature
    kind: str
    metrics: dict[str, Any]
    flags: list[str]

    @property
    def flagged(self) -> bool:
        return bool(self.flags)


@dataclass
class DriftReport:
    baseline: dict[str, Any]  # source, split, num_rows, sha256
    new_data: dict[str, Any]  # source, num_rows
    thresholds: DriftThresholds
    columns: list[ColumnDrift]
    transforms: list[TransformHealth] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        return any(c.flagged for c in self.columns) or any(t.flagged for t in self.transforms)

    @property
    def flagged_names(self) -> list[str]:
        names = ([c.name for c in self.columns if c.flagged]
                 + [t.name for t in self.transforms if t.flagged])
        return list(dict.fromkeys(names))

    def to_dict(self) -> dict[str, Any]:
        return {"flagged": self.flagged, "flagged_names": self.flagged_names,
                "baseline": self.baseline, "new_data": self.new_data,
                "thresholds": asdict(self.thresholds),
                "columns": [{"name": c.name, "kind": c.kind, "flagged": c.flagged,
                             "flags": c.flags, "metrics": c.metrics} for c in self.columns],
                "transforms": [{"name": t.name, "kind": t.kind, "flagged": t.flagged,
                                "flags": t.flags, "metrics": t.metrics}
                               for t in self.transforms],
                "notes": self.notes}

    def to_markdown(self, plots: Mapping[str, str] | None = None) -> str:
        from tfpipe.features._report import markdown

        return markdown(self, plots)

    def to_html(self) -> str:
        from tfpipe.features._report import html

        return html(self)

    def write(self, path: Any) -> Any:
        """Write the report to a .md (SVG plots beside it) or .html file; return its Path."""
        from tfpipe.features._report import write_report

        return write_report(self, path)


# ----------------------------------------------------------------------------- metrics
def psi(p: np.ndarray, q: np.ndarray, eps: float = PSI_EPSILON) -> float:
    """Population stability index sum (q - p) ln(q / p) of two share vectors (floored at eps)."""
    p = np.maximum(np.asarray(p, np.float64), eps)
    q = np.maximum(np.asarray(q, np.float64), eps)
    return float(np.sum((q - p) * np.log(q / p)))


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence in bits (0 = equal, 1 = disjoint)."""
    p = np.asarray(p, np.float64)
    q = np.asarray(q, np.float64)
    m = 0.5 * (p + q)

    def kl(a: np.ndarray) -> float:
        nz = a > 0
        return float(np.sum(a[nz] * np.log2(a[nz] / m[nz])))

    return max(0.0, 0.5 * kl(p) + 0.5 * kl(q))


def _shares(counts: Sequence[int] | np.ndarray) -> np.ndarray:
    c = np.asarray(counts, np.float64)
    total = c.sum()
    return c / total if total > 0 else c


# ----------------------------------------------------------------------------- pass
class _NumericDrift:
    def __init__(self, boundaries: Sequence[float]) -> None:
        self.boundaries = np.asarray(boundaries, np.float64)
        self.counts = np.zeros(len(boundaries) + 1, np.int64)
        self.moments = NumericAccumulator()

    def add(self, values: np.ndarray, missing: int) -> None:
        bins = np.searchsorted(self.boundaries, values, side="right")
        self.counts += np.bincount(bins, minlength=self.counts.size)
        self.moments.missing += missing
        if values.size:
            self.moments._combine(values.size, float(values.mean()),
                                  float(np.sum((values - values.mean()) ** 2)),
                                  float(values.min()), float(values.max()))


class _CategoricalDrift:
    def __init__(self, vocabulary: Sequence[str | int], dtype: str) -> None:
        import pyarrow as pa

        self.dtype = dtype
        self.vocab = (pa.array([v.encode() for v in vocabulary], pa.binary()) if dtype == "string"
                      else pa.array(vocabulary, pa.int64()))
        self.counts = np.zeros(len(vocabulary), np.int64)
        self.count = 0
        self.missing = 0
        self.other = FrequencyAccumulator(1_000)  # heavy hitters outside the vocabulary

    def add(self, present: Any, missing: int) -> None:
        import pyarrow.compute as pc

        self.count += len(present)
        self.missing += missing
        if not len(present):
            return
        idx = pc.index_in(present, value_set=self.vocab)
        inside = idx.drop_null().to_numpy(zero_copy_only=False)
        self.counts += np.bincount(inside, minlength=self.counts.size)
        outside = present.filter(pc.is_null(idx))
        if len(outside):
            self.other.add(outside, 0)


def _raw_tensors(batch: Any, layer: Any) -> dict[str, Any]:
    """The serving-style raw input of `layer` for one Arrow batch (values + missing masks)."""
    import tensorflow as tf

    from tfpipe.features._spec import MISSING_SUFFIX

    raw: dict[str, Any] = {}
    for name, spec in layer.raw_spec.items():
        col = batch.column(name)
        nulls = col.is_null().to_numpy(zero_copy_only=False)
        if spec.dtype == tf.string:
            filled = string_values(col.fill_null(""))[0].to_pylist() if len(col) else []
            raw[name] = tf.constant(filled, tf.string, shape=[len(col)])
        elif spec.dtype == tf.int64:
            raw[name] = tf.constant(col.cast("int64").fill_null(0).to_numpy(
                zero_copy_only=False), tf.int64)
        else:
            raw[name] = tf.constant(col.cast("float64").fill_null(float("nan")).to_numpy(
                zero_copy_only=False).astype(np.float32), tf.float32)
        if name in layer.nullable:
            raw[name + MISSING_SUFFIX] = tf.constant(nulls, tf.bool)
    return raw


class _Health:
    """Counts of transformed outputs: index histograms of lookup and bucketize outputs."""

    def __init__(self, specs: Sequence[Any], stats: Statistics) -> None:
        from tfpipe.features._transforms import build_transforms

        self.layer = build_transforms(list(specs), stats)
        self.specs = {s.name: s for s in specs}
        self.watch = {name: info for name, info in self.layer.output_info.items()
                      if name in self.specs and info.kind in ("vocabulary", "embedding_id",
                                                              "bucketize")}
        self.counts = {name: np.zeros(info.cardinality, np.int64)
                       for name, info in self.watch.items()}
        self.present = {name: 0 for name in self.watch}

    def add(self, batch: Any) -> None:
        if not self.watch or batch.num_rows == 0:
            return
        out = self.layer(_raw_tensors(batch, self.layer))
        for name, info in self.watch.items():
            idx = out[name].numpy().reshape(-1)
            column = self.specs[name].columns[0]
            col = batch.column(column)
            missing = col.is_null().to_numpy(zero_copy_only=False)
            if self.layer.raw_spec[column].dtype.name == "float32":
                missing |= np.isnan(col.cast("float64").fill_null(0).to_numpy(
                    zero_copy_only=False))
            idx = idx[~missing]  # health is about present values; missing is reported apart
            self.present[name] += idx.size
            self.counts[name] += np.bincount(idx, minlength=info.cardinality)[:info.cardinality]


def _lookup_params(spec: Any) -> dict[str, Any]:
    from tfpipe.features._transforms import PARAMS

    params = dict(PARAMS[spec.kind])
    params.update(spec.params)
    return params


def _health_results(health: _Health, stats: Statistics, th: DriftThresholds
                    ) -> list[TransformHealth]:
    out = []
    for name, info in health.watch.items():
        spec = health.specs[name]
        counts = health.counts[name]
        n = health.present[name]
        flags: list[str] = []
        col = stats.column(spec.columns[0])
        if info.kind in ("vocabulary", "embedding_id"):
            p = _lookup_params(spec)
            num_oov = int(p["num_oov"])
            kept = [f for _, f in col.categorical.vocabulary if f >= p["min_frequency"]]
            if p["top_k"] is not None:
                kept = kept[:p["top_k"]]
            base_total = col.categorical.count
            # Good-Turing, as for columns: kept values seen once go to OOV in a fresh sample
            base_oov = ((base_total - sum(kept) + sum(1 for f in kept if f == 1)) / base_total
                        if base_total else 0.0)
            new_oov = float(counts[1:1 + num_oov].sum() / n) if n else 0.0
            metrics = {"oov_rate": new_oov, "baseline_oov_rate": base_oov, "rows": n}
            if new_oov - base_oov > th.oov_rate:
                flags.append(f"oov_rate {new_oov:.3f} > baseline {base_oov:.3f} + {th.oov_rate:g}")
        else:
            hist = np.asarray(col.numeric.histogram, np.float64)
            nb = info.cardinality
            step = hist.size // nb
            expected = _shares([hist[j * step:(j + 1) * step].sum() for j in range(nb)])
            share = _shares(counts) if n else np.zeros(nb)
            empty = [j for j in range(nb) if counts[j] == 0 and expected[j] >= th.empty_bucket_share]
            over = [j for j in range(nb) if share[j] > th.overfull_factor * expected[j]
                    and share[j] - expected[j] > th.empty_bucket_share]
            metrics = {"rows": n, "empty_buckets": empty, "overfull_buckets": over,
                       "bucket_share": [float(s) for s in share],
                       "expected_share": [float(e) for e in expected]}
            if n and empty:
                flags.append(f"{len(empty)} empty bucket(s) {empty} expected >= "
                             f"{th.empty_bucket_share:g} of rows")
            if n and over:
                flags.append(f"{len(over)} overfull bucket(s) {over} > "
                             f"{th.overfull_factor:g}x expected")
        out.append(TransformHealth(name, info.kind, metrics, flags))
    return out


def drift(stats: Statistics, new_data: Any, *, columns: Iterable[str] | None = None,
          ignore: Iterable[str] = (), thresholds: DriftThresholds | Mapping[str, Any] | None = None,
          transforms: Sequence[Any] | None = None, chunk_rows: int = 1_000_000,
          max_unique_ratio: float = 0.5) -> DriftReport:
    """Compare `new_data` (path, Table or batches) with the stored `stats`.

    columns: the columns to compare (default: every column of `stats`), less
    `ignore`. transforms: `TransformSpec`s; the new data runs through
    `build_transforms(transforms, stats)` for the after-transform health.
    max_unique_ratio: an integer column whose baseline has more distinct values
    than this share of its rows (timestamps, row keys) is compared as a number
    only: new values are expected there, so category metrics would always fire.
    """
    th = thresholds if isinstance(thresholds, DriftThresholds) else \
        DriftThresholds.from_mapping(thresholds)
    wanted = list(stats.columns) if columns is None else list(columns)
    for name in list(wanted) + list(ignore):
        stats.column(name)  # ConfigError naming the known columns
    wanted = [c for c in wanted if c not in set(ignore)]
    schema, batches, source = iter_batches(new_data, chunk_rows)
    present = [c for c in wanted if c in schema.names]
    absent = [c for c in wanted if c not in schema.names]
    numeric: dict[str, _NumericDrift] = {}
    categorical: dict[str, _CategoricalDrift] = {}
    for name in present:
        col = stats.column(name)
        if col.numeric is not None and col.numeric.count:
            numeric[name] = _NumericDrift(col.numeric.quantiles)
        cat = col.categorical
        if cat is not None and not (col.dtype == "int64" and cat.count
                                    and cat.num_unique > max_unique_ratio * cat.count):
            categorical[name] = _CategoricalDrift(cat.values, col.dtype)
    health = None
    if transforms:
        need = {c for spec in transforms for c in spec.columns}
        lacking = sorted(need - set(schema.names))
        if lacking:
            raise InputError(f"{source}: lacks column(s) {', '.join(lacking)} that the "
                             "transforms read")
        health = _Health(transforms, stats)
    rows = 0
    try:
        for batch in batches:
            rows += batch.num_rows
            for name, acc in numeric.items():
                acc.add(*numeric_values(batch.column(name), stats.column(name).dtype))
            for name, acc in categorical.items():
                arr = batch.column(name)
                if acc.dtype == "string":
                    acc.add(*string_values(arr))
                else:
                    import pyarrow as pa

                    a = arr.dictionary_decode() if pa.types.is_dictionary(arr.type) else arr
                    a = a.cast(pa.int64())
                    acc.add(a.drop_null(), a.null_count)
            if health is not None:
                health.add(batch)
    except Exception as exc:  # noqa: BLE001 - Arrow read errors, bad casts
        import pyarrow as pa

        if isinstance(exc, (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError)):
            raise InputError(f"{source}: cannot read or convert: {exc}") from None
        raise
    results: list[ColumnDrift] = []
    for name in wanted:
        if name in absent:
            results.append(ColumnDrift(name, "absent", {}, [f"column missing from {source}"]))
            continue
        col = stats.column(name)
        if name in numeric:
            results.append(_numeric_result(name, col.numeric, numeric[name], th))
        if name in categorical:
            results.append(_categorical_result(name, col.categorical, categorical[name], th))
    notes = []
    key_like = [c for c in present if stats.column(c).categorical is not None
                and c not in categorical]
    if key_like:
        notes.append(f"compared as numbers only (mostly distinct values in the baseline): "
                     f"{', '.join(key_like)}")
    extra = [c for c in schema.names if c not in stats.columns]
    if extra:
        notes.append(f"columns without statistics (not compared): {', '.join(extra)}")
    if rows == 0:
        notes.append("the new data has no rows")
    return DriftReport(
        baseline={"source": stats.source, "split": stats.split, "num_rows": stats.num_rows,
                  "sha256": stats.sha256},
        new_data={"source": source, "num_rows": rows}, thresholds=th, columns=results,
        transforms=[] if health is None else _health_results(health, stats, th), notes=notes)


def _missing_check(name: str, base_count: int, base_missing: int, new_count: int,
                   new_missing: int, th: DriftThresholds, metrics: dict[str, Any],
                   flags: list[str]) -> None:
    b = base_missing / (base_count + base_missing) if base_count + base_missing else 0.0
    n = new_missing / (new_count + new_missing) if new_count + new_missing else 0.0
    metrics["missing_rate"] = n
    metrics["baseline_missing_rate"] = b
    if abs(n - b) > th.missing_rate:
        flags.append(f"missing rate {n:.3f} vs baseline {b:.3f} (> {th.missing_rate:g} apart)")


def _numeric_result(name: str, base: Any, acc: _NumericDrift, th: DriftThresholds
                    ) -> ColumnDrift:
    p = _shares(base.histogram)
    q = _shares(acc.counts)
    m = acc.moments
    metrics: dict[str, Any] = {"rows": m.count}
    flags: list[str] = []
    if m.count:
        metrics.update(psi=psi(p, q), js=js_divergence(p, q), mean=m.mean,
                       baseline_mean=base.mean,
                       std=math.sqrt(max(m.m2, 0.0) / m.count), baseline_std=base.std)
        if metrics["psi"] > th.psi:
            flags.append(f"psi {metrics['psi']:.3f} > {th.psi:g}")
        if metrics["js"] > th.js:
            flags.append(f"js {metrics['js']:.3f} > {th.js:g}")
    _missing_check(name, base.count, base.missing, m.count, m.missing, th, metrics, flags)
    return ColumnDrift(name, "numeric", metrics, flags,
                       {"baseline": [float(v) for v in p], "new": [float(v) for v in q],
                        "boundaries": list(base.quantiles)})


def _noise(share: float, n: int) -> float:
    """3 binomial standard deviations of a share measured on n values: a fresh sample's
    rate strays this far from the expected one about once in 700."""
    return 3.0 * math.sqrt(max(share * (1.0 - share), 0.0) / n) if n else 0.0


def _categorical_result(name: str, base: Any, acc: _CategoricalDrift, th: DriftThresholds
                        ) -> ColumnDrift:
    # What a FRESH sample of the baseline's distribution puts outside the stored
    # vocabulary (Good-Turing): values never seen make up about N1/N of it (N1: values
    # seen once). That mass comes from the singletons: those outside the vocabulary
    # are already in the baseline's OOV share, so the listed ones (L1 of them) are
    # added: expected = oov_count / N + L1 / N. Comparing with the raw OOV share (0 for
    # a complete vocabulary) flagged every long-tailed ID column.
    p = np.append(np.array([f for _, f in base.vocabulary], np.float64),
                  base.oov_count) / max(base.count, 1)
    p[-1] += base.listed_singletons / max(base.count, 1)
    outside = acc.count - int(acc.counts.sum())
    q = np.append(acc.counts, outside) / max(acc.count, 1)
    metrics: dict[str, Any] = {"rows": acc.count}
    flags: list[str] = []
    if acc.count:
        diff = np.abs(p - q)
        worst = int(np.argmax(diff))
        labels = [*base.values, "(out of vocabulary)"]
        new_rate = outside / acc.count
        base_oov = base.oov_count / base.count if base.count else 0.0
        expected = float(p[-1])
        # a value is "vanished" only where the new data should have held it about 5+
        # times (absent by chance with probability < e^-5)
        dropped = [v for i, (v, f) in enumerate(base.vocabulary)
                   if base.count and f / base.count >= th.dropped_share and acc.counts[i] == 0
                   and acc.count * f / base.count >= 5]
        top_new = acc.other.result(5, decode=acc.dtype == "string").vocabulary
        metrics.update(linf=float(diff[worst]), linf_value=labels[worst],
                       new_category_rate=new_rate, baseline_oov_rate=base_oov,
                       baseline_unseen_share=base.unseen_share,
                       expected_new_category_rate=expected,
                       dropped_categories=dropped, top_new_values=[list(t) for t in top_new])
        if metrics["linf"] > th.linf + _noise(float(p[worst]), acc.count):
            flags.append(f"linf {metrics['linf']:.3f} > {th.linf:g} (at {labels[worst]!r})")
        if new_rate - expected > th.new_category_rate + _noise(expected, acc.count):
            flags.append(f"new-category rate {new_rate:.3f} > expected {expected:.3f} "
                         f"(baseline OOV {base_oov:.3f} + listed singletons "
                         f"{expected - base_oov:.3f}) + {th.new_category_rate:g}")
        if dropped:
            flags.append(f"{len(dropped)} frequent baseline value(s) vanished: "
                         f"{', '.join(map(repr, dropped[:5]))}")
    _missing_check(name, base.count, base.missing, acc.count, acc.missing, th, metrics, flags)
    top = min(20, len(base.vocabulary))
    return ColumnDrift(name, "categorical", metrics, flags,
                       {"labels": [str(v) for v in base.values[:top]] + ["(OOV)"],
                        "baseline": [float(v) for v in p[:top]] + [float(p[-1] + p[top:-1].sum())],
                        "new": [float(v) for v in q[:top]] + [float(q[-1] + q[top:-1].sum())]})


DRIFT_CONFIG_KEYS = ("thresholds", "columns", "ignore", "transforms")


def load_drift_config(path: Any) -> dict[str, Any]:
    """A drift config file (YAML, safe-loaded) -> keyword arguments of `drift`.

    Keys: thresholds (mapping), columns / ignore (lists of column names),
    transforms (a list of {name, kind, columns (or column), params}).
    """
    from pathlib import Path

    import yaml

    from tfpipe.features._spec import TransformSpec

    where = str(path)
    try:
        obj = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise InputError(f"{where}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML: {exc}") from None
    obj = obj or {}
    if not isinstance(obj, Mapping):
        raise ConfigError(f"{where}: expected a mapping with keys {', '.join(DRIFT_CONFIG_KEYS)}")
    unknown = [k for k in obj if k not in DRIFT_CONFIG_KEYS]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; allowed: "
                          f"{', '.join(DRIFT_CONFIG_KEYS)}")
    out: dict[str, Any] = {"thresholds": DriftThresholds.from_mapping(
        obj.get("thresholds"), f"{where}: thresholds")}
    for key in ("columns", "ignore"):
        if key in obj:
            value = obj[key]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{where}: {key} must be a list of column names")
            out[key] = value
    if "transforms" in obj:
        specs = []
        items = obj["transforms"]
        if not isinstance(items, list):
            raise ConfigError(f"{where}: transforms must be a list of "
                              "{name, kind, columns, params}")
        for i, item in enumerate(items):
            if not isinstance(item, Mapping) or "kind" not in item:
                raise ConfigError(f"{where}: transforms[{i}] needs at least kind and column(s)")
            cols = item.get("columns", [item["column"]] if "column" in item else [])
            bad = [k for k in item if k not in ("name", "kind", "columns", "column", "params")]
            if bad:
                raise ConfigError(f"{where}: transforms[{i}].{bad[0]}: unknown key; allowed: "
                                  "name, kind, columns, column, params")
            specs.append(TransformSpec(str(item.get("name", "_".join(map(str, cols)))),
                                       str(item["kind"]), tuple(cols),
                                       dict(item.get("params") or {})))
        out["transforms"] = specs
    return out
