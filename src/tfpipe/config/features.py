"""The `features:` section: tabular transforms by output name (docs/tabular.md, "Config").

    features:
      label: label
      columns:
        price_log: {transform: log1p, column: price}
        category: {transform: vocabulary, num_oov: 2}     # column defaults to the key
        user_x_item: {transform: cross, columns: [user_id, item_id], num_bins: 4096}

Here the structure is checked: transform names, parameter names, types and
ranges. What needs the data (the column exists, its dtype suits the transform,
the statistics hold what the transform needs) is checked when the pipeline is
built (`tfpipe.features.build_transforms`). `tfpipe.config` imports leaves only,
so the table below mirrors `tfpipe.features.PARAMS` (a test keeps them equal).
"""

from __future__ import annotations

from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tfpipe.config._types import fmt

TRANSFORMS = ("normalize", "min_max", "clip", "log1p", "bucketize", "vocabulary", "hash",
              "cross", "time", "embedding_id", "passthrough")
TIME_PARTS = ("hour", "day_of_week", "hour_cyclic", "day_cyclic")
IMPUTE_WORDS = ("mean", "median", "min", "max", "zero")


def _int(lo: int, hi: int | None = None, none_ok: bool = False) -> Any:
    def check(v: Any) -> str | None:
        if v is None and none_ok:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
            rng = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
            return f"must be an integer {rng}{' or null' if none_ok else ''}"
        return None
    return check


def _number(none_ok: bool = True) -> Any:
    def check(v: Any) -> str | None:
        if v is None and none_ok:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return "must be a number" + (" or null" if none_ok else "")
        return None
    return check


def _fraction(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
        return "must be a number in (0, 1) (a stored quantile, k / num_quantiles) or null"
    return None


def _bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else "must be true or false"


def _impute(v: Any) -> str | None:
    if v in IMPUTE_WORDS or (isinstance(v, (int, float)) and not isinstance(v, bool)):
        return None
    return f"must be one of {', '.join(IMPUTE_WORDS)} or a number"


def _impute_any(v: Any) -> str | None:
    if v is None or isinstance(v, str) or (isinstance(v, (int, float)) and not isinstance(v, bool)):
        return None
    return "must be a value of the column's type (number or string) or null"


def _part(v: Any) -> str | None:
    return None if v in TIME_PARTS else f"must be one of {', '.join(TIME_PARTS)}"


_NUM = {"impute": _impute, "missing_indicator": _bool}
_VOCAB = {"top_k": _int(1, none_ok=True), "min_frequency": _int(1), "num_oov": _int(1)}
#: transform -> parameter -> check (None when fine, else what is allowed)
PARAMETERS: dict[str, dict[str, Any]] = {
    "normalize": dict(_NUM),
    "min_max": dict(_NUM),
    "clip": {"lower": _number(), "upper": _number(), "lower_quantile": _fraction,
             "upper_quantile": _fraction, **_NUM},
    "log1p": dict(_NUM),
    "bucketize": {"num_buckets": _int(2), **_NUM},
    "vocabulary": dict(_VOCAB),
    "embedding_id": {**_VOCAB, "embedding_dim": _int(1, none_ok=True)},
    "hash": {"num_bins": _int(2)},
    "cross": {"num_bins": _int(2)},
    "time": {"part": _part, "utc_offset_minutes": _int(-840, 840)},
    "passthrough": {"impute": _impute_any, "missing_indicator": _bool},
}


class FeatureColumn(BaseModel):
    """One output feature: `transform` of `column` (default: the output's name) or,
    for `cross`, of `columns`; the transform's parameters beside them."""

    model_config = ConfigDict(extra="allow")

    transform: str
    column: Union[str, None] = None
    columns: Union[list[str], None] = None

    @field_validator("transform", mode="before")
    @classmethod
    def _kind(cls, v: Any) -> Any:
        if v not in TRANSFORMS:
            from tfpipe.config._errors import suggest

            hint = suggest(v, list(TRANSFORMS)) if isinstance(v, str) else ""
            raise ValueError(f"unknown transform {fmt(v)}{hint}; allowed: {', '.join(TRANSFORMS)}")
        return v

    @model_validator(mode="after")
    def _params(self) -> "FeatureColumn":
        table = PARAMETERS[self.transform]
        problems = []
        for key, value in (self.model_extra or {}).items():
            check = table.get(key)
            if check is None:
                allowed = ", ".join(sorted(table)) or "none"
                problems.append(f"{key} is not a parameter of {self.transform!r}; allowed: {allowed}")
                continue
            why = check(value)
            if why:
                problems.append(f"{key} {why}, got {fmt(value)}")
        if self.transform == "cross":
            if self.column is not None or not self.columns or len(self.columns) < 2:
                problems.append("needs `columns: [a, b, ...]` (2 or more), got "
                                f"{fmt(self.columns or self.column)}")
        elif self.columns is not None:
            problems.append("columns: only 'cross' takes several columns; use `column:`")
        if problems:
            col = self.columns if self.transform == "cross" else self.column
            where = f"transform {self.transform!r}" + (
                f", column {fmt(col)}" if col else ", column: the output's name")
            raise ValueError("\n".join(f"{p} ({where})" for p in problems))
        return self

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def input_columns(self, name: str) -> tuple[str, ...]:
        if self.transform == "cross":
            return tuple(self.columns or ())
        return (self.column or name,)


def _columns_shorthand(v: Any) -> Any:
    """`price: log1p` is `price: {transform: log1p}`."""
    if not isinstance(v, dict):
        raise ValueError(f"must be a mapping of output name -> {{transform: ..., ...}}, got {fmt(v)}")
    return {k: {"transform": c} if isinstance(c, str) else c for k, c in v.items()}


class FeaturesConfig(BaseModel):
    """Tabular data: the label column, the transforms, where the statistics are."""

    model_config = ConfigDict(extra="forbid")

    label: str
    columns: dict[str, FeatureColumn] = Field(default_factory=dict)
    # statistics.json to initialize the transforms from; default: beside the
    # dataset's manifest (`tfpipe convert ... --stats` writes it there)
    statistics: Union[str, None] = None

    @field_validator("columns", mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        return _columns_shorthand(v)

    @model_validator(mode="after")
    def _label(self) -> "FeaturesConfig":
        if not self.columns:
            raise ValueError(".columns: needs at least one output feature")
        uses = [n for n, c in self.columns.items() if self.label in c.input_columns(n)]
        if uses:
            raise ValueError(f".columns.{uses[0]}: reads the label column {self.label!r}; "
                             "a feature made from the label leaks it into the model")
        return self

    def to_dict(self) -> dict[str, Any]:
        cols = {}
        for name, c in self.columns.items():
            entry: dict[str, Any] = {"transform": c.transform}
            if c.column is not None:
                entry["column"] = c.column
            if c.columns is not None:
                entry["columns"] = list(c.columns)
            entry.update(c.params)
            cols[name] = entry
        return {"label": self.label, "columns": cols, "statistics": self.statistics}
