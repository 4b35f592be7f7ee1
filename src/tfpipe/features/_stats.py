"""The statistics model: per-column summaries of a table's train split.

One `Statistics` object feeds the feature transforms (normalize, bucketize,
vocabulary) and is the drift baseline. It is plain data: JSON in, JSON out,
versioned and hashed (see `_stats_io`). No TensorFlow here (pyarrow/numpy only).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from tfpipe.errors import ConfigError, InputError

STATISTICS_FILE = "statistics.json"  # beside manifest.json in the dataset directory
STATISTICS_VERSION = 1
DTYPES = ("int64", "float32", "string")


def _enc_float(x: float) -> float | str:
    # JSON has no NaN/inf: an empty column's mean is NaN, a column may hold inf.
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _dec_float(x: Any) -> float:
    if isinstance(x, str):
        if x in ("nan", "inf", "-inf"):
            return float(x)
        raise ValueError(f"not a number: {x!r}")
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"not a number: {x!r}")
    return float(x)


@dataclass(frozen=True)
class NumericStats:
    """Numbers of one column (non-missing values only).

    `quantiles` are the boundaries at k/Q, k=1..Q-1 (ascending, may repeat);
    `histogram` counts train values per quantile bin: len(quantiles)+1 bins,
    bin i = [q_{i-1}, q_i) (first (-inf, q_0), last [q_last, inf)).
    Quantiles and histogram come from a mergeable sketch: every quantile's rank
    is within `quantile_rank_error` of the exact one, each bin count within
    2 * quantile_rank_error of the exact count (both 0 when the column had at
    most `sketch_k` values: then they are exact).
    """

    count: int
    missing: int
    min: float
    max: float
    mean: float
    std: float  # population (ddof=0)
    quantiles: tuple[float, ...]
    histogram: tuple[int, ...]
    quantile_rank_error: int = 0  # additive field: the sketch's guaranteed rank error

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "missing": self.missing, "min": _enc_float(self.min),
                "max": _enc_float(self.max), "mean": _enc_float(self.mean),
                "std": _enc_float(self.std),
                "quantiles": [_enc_float(q) for q in self.quantiles],
                "histogram": list(self.histogram),
                "quantile_rank_error": self.quantile_rank_error}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> NumericStats:
        return cls(int(obj["count"]), int(obj["missing"]), _dec_float(obj["min"]),
                   _dec_float(obj["max"]), _dec_float(obj["mean"]), _dec_float(obj["std"]),
                   tuple(_dec_float(q) for q in obj["quantiles"]),
                   tuple(int(h) for h in obj["histogram"]),
                   int(obj.get("quantile_rank_error", 0)))


@dataclass(frozen=True)
class CategoricalStats:
    """Values of one column as categories (ints and strings).

    `vocabulary`: (value, frequency) of the `top_k` most frequent values,
    frequency descending then value ascending. Exact while the column had at
    most `max_exact_unique` distinct values; beyond that a Misra-Gries summary:
    each listed frequency is a lower bound, at most `frequency_error` below the
    true one, and `num_unique` is a lower bound (`num_unique_exact` False).
    """

    count: int
    missing: int
    num_unique: int
    num_unique_exact: bool
    vocabulary: tuple[tuple[str | int, int], ...]
    oov_count: int  # non-missing values not in `vocabulary`
    frequency_error: int = 0  # additive field: 0 when exact
    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "missing": self.missing, "num_unique": self.num_unique,
                "num_unique_exact": self.num_unique_exact,
                "vocabulary": [[v, f] for v, f in self.vocabulary],
                "oov_count": self.oov_count, "frequency_error": self.frequency_error}

    @property
    def listed_singletons(self) -> int:
        """Vocabulary values seen exactly once in the baseline."""
        return sum(1 for _, f in self.vocabulary if f == 1)

    @property
    def unseen_share(self) -> float | None:
        """Good-Turing estimate of the share of a fresh sample's values that the baseline
        never held: N1 / N, N1 the values seen once. Known when the vocabulary lists
        every value (exact counts, nothing out of vocabulary); else None. Drift needs
        only the listed singletons (docs/tabular.md, "Drift")."""
        if not self.count or not self.num_unique_exact or self.oov_count:
            return None
        return self.listed_singletons / self.count

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> CategoricalStats:
        vocab = []
        for value, freq in obj["vocabulary"]:
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise ValueError(f"vocabulary value {value!r} is not a string or int")
            vocab.append((value, int(freq)))
        return cls(int(obj["count"]), int(obj["missing"]), int(obj["num_unique"]),
                   bool(obj["num_unique_exact"]), tuple(vocab), int(obj["oov_count"]),
                   int(obj.get("frequency_error", 0)))

    @property
    def values(self) -> tuple[str | int, ...]:
        """The vocabulary values, most frequent first."""
        return tuple(v for v, _ in self.vocabulary)


@dataclass(frozen=True)
class ColumnStats:
    name: str
    dtype: str  # "int64" | "float32" | "string" (the record feature dtype)
    numeric: NumericStats | None  # ints and floats
    categorical: CategoricalStats | None  # ints and strings

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype,
                "numeric": None if self.numeric is None else self.numeric.to_dict(),
                "categorical": (None if self.categorical is None
                                else self.categorical.to_dict())}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> ColumnStats:
        dtype = obj["dtype"]
        if dtype not in DTYPES:
            raise ValueError(f"column {obj.get('name')!r}: dtype {dtype!r} is not one of "
                             f"{', '.join(DTYPES)}")
        return cls(str(obj["name"]), dtype,
                   None if obj["numeric"] is None else NumericStats.from_dict(obj["numeric"]),
                   (None if obj["categorical"] is None
                    else CategoricalStats.from_dict(obj["categorical"])))


def canonical_json(value: Any) -> str:
    """Key-sorted, whitespace-free JSON: the text the hash is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)


@dataclass(frozen=True)
class Statistics:
    """Per-column statistics of one split of one table (see docs/tabular.md)."""

    columns: dict[str, ColumnStats]
    num_rows: int
    split: str  # "train"
    source: str  # input file name
    settings: dict[str, Any] = field(default_factory=dict)  # what produced it
    version: int = STATISTICS_VERSION

    def column(self, name: str) -> ColumnStats:
        try:
            return self.columns[name]
        except KeyError:
            known = ", ".join(self.columns) or "(none)"
            raise ConfigError(f"statistics have no column {name!r}; columns are {known}") \
                from None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object without the hash."""
        return {"version": self.version, "num_rows": self.num_rows, "split": self.split,
                "source": self.source, "settings": self.settings,
                "columns": [c.to_dict() for c in self.columns.values()]}

    @property
    def sha256(self) -> str:
        """sha256 of the canonical JSON of `to_dict()` (everything but the hash)."""
        return hashlib.sha256(canonical_json(self.to_dict()).encode()).hexdigest()

    def to_json(self) -> str:
        obj = self.to_dict()
        obj["sha256"] = self.sha256
        return json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=True,
                          allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Statistics:
        """Parse and check (version, hash, field types); InputError says what is wrong."""
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise InputError(f"not valid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise InputError("not a statistics object (expected a JSON object)")
        version = obj.get("version")
        if version != STATISTICS_VERSION:
            hint = (" (written by a newer tfpipe: upgrade)" if isinstance(version, int)
                    and not isinstance(version, bool) and version > STATISTICS_VERSION
                    else "")
            raise InputError(f"statistics version {version!r} is not supported; this "
                             f"tfpipe reads version {STATISTICS_VERSION}{hint}")
        stored = obj.pop("sha256", None)
        if not isinstance(stored, str):
            raise InputError("statistics carry no sha256 field")
        try:
            columns = [ColumnStats.from_dict(c) for c in obj["columns"]]
            stats = cls({c.name: c for c in columns}, int(obj["num_rows"]),
                        str(obj["split"]), str(obj["source"]), dict(obj["settings"]),
                        int(obj["version"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"malformed statistics: {type(exc).__name__}: {exc}") from None
        actual = hashlib.sha256(canonical_json(obj).encode()).hexdigest()
        if actual != stored or stats.sha256 != stored:
            raise InputError(f"sha256 mismatch (stored {stored[:12]}, content {actual[:12]}):"
                             " the file was edited or damaged; recompute it with "
                             "`tfpipe convert ... --stats`")
        return stats
