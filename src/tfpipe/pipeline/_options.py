"""`tf.data.Options` and parallelism defaults from the config."""

from __future__ import annotations

import tensorflow as tf

from tfpipe import system
from tfpipe.pipeline._settings import AUTOTUNE, Settings

# Per-sample map parallelism when the config says autotune. AUTOTUNE caps a map
# at the runner pool size (2 on the 2-core dev box, PERF-NOTES), while decode
# threads block on memory as much as on ALU: a fixed 2x the CPUs measured
# fastest in benchmarks/l1_bench.py (docs/performance.md, "Pipeline").
MAP_PARALLEL_PER_CPU = 2


def map_parallelism(s: Settings) -> int:
    """num_parallel_calls for the per-sample map (an int, never AUTOTUNE)."""
    if s.num_parallel_calls != AUTOTUNE:
        return s.num_parallel_calls
    cpus = s.private_threadpool or system.available_cpus()
    return max(2, MAP_PARALLEL_PER_CPU * int(cpus))


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
