"""Conversion planning: inputs -> split -> shard, deterministic from the seed.

Everything here is pure Python over plain values, so a plan is the same on any
machine and for any number of workers: that is what makes the output
byte-identical and `--resume` safe.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from tfpipe.errors import ConfigError

DEFAULT_SPLIT = "train"
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9_.]+$")
# Per-record framing + tf.train.Example keys for the image features: added to the
# file size so the shard count estimate lands near the requested shard size.
RECORD_OVERHEAD_BYTES = 200


@dataclass(frozen=True)
class Item:
    """One raw input: `key` is its stable identity (relative path, row, image id).

    `payload` holds what a worker needs to read and encode it (plain,
    JSON-serializable values only, so it pickles to spawn workers and hashes into
    the plan). `size` is the estimated encoded size in bytes.
    """

    key: str
    size: int
    payload: Any = None
    name: str = ""  # how errors and the manifest name it (defaults to key)

    @property
    def label(self) -> str:
        return self.name or self.key


@dataclass(frozen=True)
class ShardPlan:
    split: str
    index: int
    count: int
    items: tuple[Item, ...]

    def digest(self) -> str:
        """Hash of the inputs (keys and payloads, in order) this shard encodes."""
        h = hashlib.sha256()
        own = getattr(self.items, "digest_into", None)
        if own is not None:  # table rows: the same bytes, hashed a batch at a time
            own(h)
            return h.hexdigest()
        for item in self.items:
            h.update(canonical_json([item.key, item.payload]).encode())
            h.update(b"\n")
        return h.hexdigest()


@dataclass
class Plan:
    shards: list[ShardPlan] = field(default_factory=list)
    splits: list[str] = field(default_factory=list)


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes__": bytes(value).hex()}
    raise TypeError(f"cannot hash a {type(value).__name__} into the plan")


def canonical_json(value: Any) -> str:
    """Key-sorted, whitespace-free JSON: the same value always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_json_default)


def parse_split(spec: str | dict[str, float] | None) -> dict[str, float]:
    """`"train=0.9,val=0.1"` (or a mapping) -> ordered {name: ratio}; ratios sum to 1."""
    if spec is None or spec == "":
        return {DEFAULT_SPLIT: 1.0}
    if isinstance(spec, str):
        out: dict[str, float] = {}
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            name, sep, value = part.partition("=")
            name = name.strip()
            if not sep:
                raise ConfigError(
                    f"split: expected NAME=RATIO pairs like 'train=0.9,val=0.1', got {part!r}")
            try:
                ratio = float(value)
            except ValueError:
                raise ConfigError(f"split: ratio of {name!r} must be a number, got {value!r}")
            if name in out:
                raise ConfigError(f"split: {name!r} is given twice")
            out[name] = ratio
    else:
        out = {str(k): float(v) for k, v in spec.items()}
    if not out:
        raise ConfigError("split: no split given; use e.g. 'train=0.9,val=0.1'")
    for name, ratio in out.items():
        if not _SPLIT_NAME.match(name):
            raise ConfigError(
                f"split: name {name!r} may use only letters, digits, '_' and '.'")
        if not (0.0 < ratio <= 1.0) or math.isnan(ratio):
            raise ConfigError(f"split: ratio of {name!r} must be in (0, 1], got {ratio}")
    total = sum(out.values())
    if abs(total - 1.0) > 1e-6:
        raise ConfigError(
            f"split: ratios must sum to 1, got {total:g} "
            f"({', '.join(f'{k}={v:g}' for k, v in out.items())})")
    return out


def unit_hash(seed: int, domain: str, key: str) -> float:
    """A stable number in [0, 1) from (seed, domain, key): no Python hash(), no RNG state."""
    digest = hashlib.sha256(f"{seed}:{domain}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def assign_split(key: str, ratios: dict[str, float], seed: int) -> str:
    """The split of one input: depends only on (seed, key, ratios), never on the other inputs,
    so re-runs give identical splits and adding files moves none of the existing ones."""
    u = unit_hash(seed, "split", key)
    edge = 0.0
    names = list(ratios)
    for name in names:
        edge += ratios[name]
        if u < edge:
            return name
    return names[-1]  # float round-off at the top edge


def plan_shards(items: Sequence[Item], ratios: dict[str, float], seed: int,
                shard_size: int) -> Plan:
    """Split, order and cut inputs into shards.

    Within a split the inputs are ordered by a seeded hash of their key, so classes
    (which usually follow folder or row order) are spread across and within shards.
    The shard count is `ceil(estimated bytes / shard_size)` (at least 1, at most
    one per input), and shard j takes the contiguous chunk [j*n//count, (j+1)*n//count)
    of that order, so shards hold balanced record counts.
    """
    if shard_size <= 0:
        raise ConfigError(f"shard_size must be > 0 bytes, got {shard_size}")
    own = getattr(items, "plan_shards", None)
    if own is not None:
        # A source too large for one Item per input in memory (tables) plans its
        # inputs on arrays: the same splits, order and cuts as below.
        return own(ratios, seed, shard_size)
    keys_seen: set[str] = set()
    by_split: dict[str, list[Item]] = {name: [] for name in ratios}
    for item in items:
        if item.key in keys_seen:
            raise ConfigError(f"two inputs share the key {item.key!r}")
        keys_seen.add(item.key)
        by_split[assign_split(item.key, ratios, seed)].append(item)
    plan = Plan(splits=list(ratios))
    for split, members in by_split.items():
        members.sort(key=lambda it: (unit_hash(seed, "order", it.key), it.key))
        n = len(members)
        if n == 0:
            continue
        total = sum(max(0, it.size) + RECORD_OVERHEAD_BYTES for it in members)
        count = min(n, max(1, math.ceil(total / shard_size)))
        for j in range(count):
            chunk = tuple(members[j * n // count:(j + 1) * n // count])
            plan.shards.append(ShardPlan(split, j, count, chunk))
    return plan
