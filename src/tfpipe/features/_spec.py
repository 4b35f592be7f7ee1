"""`TransformSpec` and the transform table: names, parameters, dtypes (no TensorFlow).

The config (`tfpipe.config`, which may import leaves only) keeps its own copy of
the kind list and parameter table; tests/features/test_transforms_config.py checks
that the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

#: Every transform kind, in the order docs/tabular.md lists them.
KINDS = ("normalize", "min_max", "clip", "log1p", "bucketize", "vocabulary", "hash", "cross",
         "time", "embedding_id", "passthrough")
NUMERIC_KINDS = ("normalize", "min_max", "clip", "log1p", "bucketize")
CATEGORICAL_KINDS = ("vocabulary", "hash", "cross", "embedding_id")
#: Record dtypes each kind accepts as input.
INPUT_DTYPES: dict[str, tuple[str, ...]] = {
    **{k: ("int64", "float32") for k in NUMERIC_KINDS},
    **{k: ("int64", "string") for k in CATEGORICAL_KINDS},
    "time": ("int64", "float32"),
    "passthrough": ("int64", "float32", "string"),
}
#: `time` parts: hour of day, day of week (Monday 0), or (sin, cos) of their angle.
TIME_PARTS = ("hour", "day_of_week", "hour_cyclic", "day_cyclic")
IMPUTE_WORDS = ("mean", "median", "min", "max", "zero")
#: Suffix of the missing-value mask of a nullable raw column (`price__missing`),
#: and of the indicator output of a transform with `missing_indicator: true`.
MISSING_SUFFIX = "__missing"
INDICATOR_SUFFIX = "_missing"


@dataclass(frozen=True)
class TransformSpec:
    """One output feature: `kind` applied to `columns` with `params` (docs/tabular.md)."""

    name: str
    kind: str
    columns: tuple[str, ...]
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from tfpipe.errors import ConfigError

        if self.kind not in KINDS:
            raise ConfigError(f"features.{self.name}: unknown transform {self.kind!r}; "
                              f"allowed: {', '.join(KINDS)}")
        cols = tuple(self.columns)
        object.__setattr__(self, "columns", cols)
        want = "2 or more columns" if self.kind == "cross" else "exactly one column"
        if (self.kind == "cross") != (len(cols) != 1) or not cols:
            raise ConfigError(f"features.{self.name}: transform {self.kind!r} takes {want}, "
                              f"got {list(cols)}")
        object.__setattr__(self, "params", dict(self.params))
