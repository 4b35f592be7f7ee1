"""Bounded numeric field types whose errors read "must be in [0, 1], got 1.7"."""

from __future__ import annotations

import math
from typing import Annotated, Any, Callable

from pydantic import AfterValidator, BeforeValidator


def fmt(value: Any) -> str:
    """A value the way the user wrote it in YAML."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}" if math.isfinite(value) and value == round(value, 6) else repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(v)}" for k, v in value.items()) + "}"
    return str(value)


def describe(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    """'in [0, 1]', 'in (0, 1]', '>= 0', '> 0'."""
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{fmt(lo)}, {fmt(hi)}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {fmt(lo)}"
    if hi is not None:
        return f"{'<' if hi_open else '<='} {fmt(hi)}"
    return "a number"


def _inside(v: float, lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> bool:
    if isinstance(v, float) and not math.isfinite(v):
        return False
    if lo is not None and (v <= lo if lo_open else v < lo):
        return False
    if hi is not None and (v >= hi if hi_open else v > hi):
        return False
    return True


def _check(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if not _inside(v, lo, hi, lo_open, hi_open):
            raise ValueError(f"must be {describe(lo, hi, lo_open, hi_open)}, got {fmt(v)}")
        return v

    return check


def _check_pair(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool,
                ordered: bool) -> Callable[[Any], Any]:
    def check(v: tuple[float, float]) -> tuple[float, float]:
        if not all(_inside(x, lo, hi, lo_open, hi_open) for x in v):
            raise ValueError(f"both values must be {describe(lo, hi, lo_open, hi_open)}, got {fmt(v)}")
        if ordered and v[0] > v[1]:
            raise ValueError(f"lower must be <= upper, got {fmt(v)}")
        return v

    return check


def _pair_shape(what: str) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if not isinstance(v, (list, tuple)) or len(v) != 2:
            raise ValueError(f"must be a {what} pair of numbers, got {fmt(v)}")
        return v

    return check


def Float(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
          hi_open: bool = False) -> Any:
    return Annotated[float, AfterValidator(_check(lo, hi, lo_open, hi_open))]


def Int(lo: int | None = None, hi: int | None = None) -> Any:
    return Annotated[int, AfterValidator(_check(lo, hi, False, False))]


def Range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
          hi_open: bool = False) -> Any:
    """A [lower, upper] pair, each value bounded, lower <= upper."""
    return Annotated[tuple[float, float], BeforeValidator(_pair_shape("[lower, upper]")),
                     AfterValidator(_check_pair(lo, hi, lo_open, hi_open, True))]


def Pair(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
         hi_open: bool = False) -> Any:
    """Two bounded values with no order between them (e.g. translate [fx, fy])."""
    return Annotated[tuple[float, float], BeforeValidator(_pair_shape("[x, y]")),
                     AfterValidator(_check_pair(lo, hi, lo_open, hi_open, False))]


Unit = Float(0.0, 1.0)
