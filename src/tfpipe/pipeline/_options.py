"""`tf.data.Options` and parallelism defaults from the config."""

from __future__ import annotations

import tensorflow as tf

from tfpipe import system
from tfpipe.pipeline._settings import AUTO, AUTOTUNE, Settings

# Per-sample map parallelism when the config says `auto` (the default). tf.data's
# AUTOTUNE caps a map at the runner pool size (2 on the 2-core dev box,
# PERF-NOTES), while decode threads block on memory as much as on ALU: a fixed 2x
# the CPUs measured fastest in benchmarks/l1_bench.py (docs/performance-history.md,
# "Pipeline"). `autotune` hands the value to tf.data (tf.data.AUTOTUNE).
MAP_PARALLEL_PER_CPU = 2


def map_parallelism(s: Settings) -> int:
    """num_parallel_calls of the per-sample map: the configured int, for `auto`
    2 x the CPUs, for `autotune` tf.data.AUTOTUNE (-1). The samples are the same
    bits for every value (their seeds come from their index, not the thread)."""
    if s.num_parallel_calls == AUTO:
        cpus = s.private_threadpool or system.available_cpus()
        return max(2, MAP_PARALLEL_PER_CPU * int(cpus))
    return s.num_parallel_calls


def batch_parallelism(s: Settings) -> int:
    """num_parallel_calls of the per-batch maps (L3, L4): half the per-sample
    map's, at least 1; AUTOTUNE when that is AUTOTUNE."""
    npc = map_parallelism(s)
    return npc if npc == AUTOTUNE else max(1, npc // 2)


def options(s: Settings) -> tf.data.Options:
    opts = tf.data.Options()
    opts.deterministic = s.deterministic
    opts.autotune.enabled = True
    budget_mb = s.ram_budget_mb
    if budget_mb is None:
        budget_mb = system.available_memory_bytes() // 2 // (1 << 20)
    opts.autotune.ram_budget = int(budget_mb) * (1 << 20)
    opts.threading.private_threadpool_size = int(s.private_threadpool or system.available_cpus())
    # The isolation interleave and the skip-count table are stateful; they hold no
    # iterator state worth checkpointing.
    opts.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return opts
