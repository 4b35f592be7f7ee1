"""Planning: split parsing, stable hashed splits, balanced shard chunks."""

from __future__ import annotations

import pytest

from tfpipe.convert._plan import Item, assign_split, parse_split, plan_shards
from tfpipe.errors import ConfigError


def test_parse_split() -> None:
    assert parse_split(None) == {"train": 1.0}
    assert parse_split("train=0.9, val=0.1") == {"train": 0.9, "val": 0.1}
    assert list(parse_split("val=0.2,train=0.8")) == ["val", "train"]
    for bad, msg in [("train=0.9,val=0.2", "sum to 1, got 1.1"), ("train", "NAME=RATIO"),
                     ("train=x", "must be a number"), ("train=1,train=0", "twice"),
                     ("train=1.5,val=-0.5", r"in \(0, 1\]"), ("a b=1", "letters")]:
        with pytest.raises(ConfigError, match=msg):
            parse_split(bad)


def test_split_ratios_and_stability() -> None:
    ratios = {"train": 0.8, "val": 0.1, "test": 0.1}
    keys = [f"class{k % 7}/img{k}.jpg" for k in range(20000)]
    got = [assign_split(k, ratios, 0) for k in keys]
    for name, r in ratios.items():
        assert abs(got.count(name) / len(keys) - r) < 0.015
    # Adding keys never moves existing ones; a different seed does.
    assert [assign_split(k, ratios, 0) for k in keys[:500]] == got[:500]
    assert [assign_split(k, ratios, 1) for k in keys[:500]] != got[:500]


def test_plan_chunks_are_balanced_and_deterministic() -> None:
    items = [Item(f"c{k % 4}/{k:04d}.jpg", 1000 + k, [k]) for k in range(103)]
    plan = plan_shards(items, {"train": 1.0}, seed=0, shard_size=12_000)
    sizes = [len(s.items) for s in plan.shards]
    total = sum(1000 + k + 200 for k in range(103))
    assert len(sizes) == -(-total // 12_000)
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == 103
    assert {s.count for s in plan.shards} == {len(sizes)}
    again = plan_shards(list(reversed(items)), {"train": 1.0}, seed=0, shard_size=12_000)
    assert [s.digest() for s in again.shards] == [s.digest() for s in plan.shards]
    # Classes (key prefix) are mixed within every shard, not grouped.
    for s in plan.shards:
        assert len({it.key[:2] for it in s.items}) >= 2
    # Never more shards than inputs, never zero.
    assert len(plan_shards(items[:3], {"train": 1.0}, 0, 1).shards) == 3
    assert len(plan_shards(items[:3], {"train": 1.0}, 0, 1 << 40).shards) == 1
    with pytest.raises(ConfigError, match="share the key"):
        plan_shards(items + items[:1], {"train": 1.0}, 0, 1000)
