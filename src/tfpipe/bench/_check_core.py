"""The parts of `tfpipe check` that the image and the table checklists share:
the result and context types, the batch helpers and the checks both run.
`check` (images, `run_checks`) and `_check_tabular` (tables) import them here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

Builder = Callable[..., Any]


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str
    skipped: bool = False   # not applicable to this config (counts as passed)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "skipped": self.skipped,
                "detail": self.detail}


@dataclass
class Context:
    """What the checks share: the config, its settings, and cached batches."""

    config: Any
    settings: Any
    builder: Builder
    batches: int = 3
    _first: list[dict[str, np.ndarray]] | None = field(default=None, repr=False)
    _first_ds: Any = field(default=None, repr=False)
    peak_rss_delta_mb: float = 0.0

    def build(self, config: Any = None, split: str = "train", epoch: int = 0,
              worker: Any = None, **kw: Any) -> Any:
        return self.builder(self.config if config is None else config, split=split,
                            epoch=epoch, worker=worker, **kw)

    def first_batches(self) -> list[dict[str, np.ndarray]]:
        """`batches` batches of a first build (reused by several checks), RSS tracked."""
        if self._first is None:
            from tfpipe.bench._measure import _RssSampler

            with _RssSampler() as rss:
                self._first = take(self.first_dataset(), self.batches)
            self.peak_rss_delta_mb = (rss.peak_bytes - rss.start_bytes) / 2**20
        return self._first

    def first_dataset(self) -> Any:
        """The dataset object of the first build (the one `first_batches` iterated)."""
        if self._first_ds is None:
            self._first_ds = self.build()
        return self._first_ds

    def build_indexed(self, config: Any = None, **kw: Any) -> Any:
        """`build(..., keep_index=True)`; a builder without that option builds plain."""
        try:
            return self.build(config, keep_index=True, **kw)
        except TypeError:
            return self.build(config, **kw)

    def variant(self, overrides: Sequence[str]) -> Any:
        """The config with `key=value` overrides (validated like `--set`)."""
        from tfpipe.bench._build import resolve_config

        return resolve_config(self.config, overrides)


def take(dataset: Any, n: int | None) -> list[dict[str, np.ndarray]]:
    """Up to n batches (all when n is None) as dicts of NumPy arrays."""
    out = []
    for i, batch in enumerate(dataset):
        if n is not None and i >= n:
            break
        if isinstance(batch, (tuple, list)):
            # a tabular (features, label) batch: the features by name; images: "image"
            batch = ({**batch[0], "label": batch[1]} if isinstance(batch[0], dict)
                     else {"image": batch[0], "label": batch[1]})
        out.append({k: np.asarray(v) for k, v in batch.items()})
    return out


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def diff_batches(a: list[dict[str, np.ndarray]], b: list[dict[str, np.ndarray]]) -> str | None:
    """None when bit-identical; else where the first difference is and how big."""
    if len(a) != len(b):
        return f"the builds gave {len(a)} and {len(b)} batches"
    for i, (x, y) in enumerate(zip(a, b)):
        if sorted(x) != sorted(y):
            return f"batch {i}: keys differ: {sorted(x)} vs {sorted(y)}"
        for key in sorted(x):
            u, v = x[key], y[key]
            if u.shape != v.shape or u.dtype != v.dtype:
                return (f"batch {i}, key {key!r}: {u.dtype}{list(u.shape)} vs "
                        f"{v.dtype}{list(v.shape)}")
            if _bits(u) != _bits(v):
                if u.dtype.kind in "fiub":
                    d = np.abs(u.astype(np.float64) - v.astype(np.float64))
                    differ = int(np.count_nonzero(u != v))
                    return (f"batch {i}, key {key!r}: {differ} of {u.size} elements differ, "
                            f"max abs diff {float(np.nanmax(d)):.6g}")
                return f"batch {i}, key {key!r}: values differ"
    return None


# doctor rules whose findings make a pipeline irreproducible
STATEFUL_RULES = ("stateful-random", "stateful-random-seed")


def check_epochs(ctx: Context) -> CheckResult:
    """Epoch 1 must not repeat epoch 0: neither `build(epoch=1)` nor a second pass
    over the same dataset object (what `model.fit(ds, epochs=N)` and a second `for`
    loop do) may start with the same batch."""
    name = "epochs differ"
    s = ctx.settings
    augmenting = bool(s.active("geometry") + s.active("pixel") + s.active("batch")) and (
        s.enable_rate > 0)
    if s.shuffle_buffer <= 1 and not augmenting:
        return CheckResult(name, True, "no shuffle and no augmentation: every epoch is the "
                           "same by design", skipped=True)
    first = ctx.first_batches()[:1]
    problems = []
    next_epoch = take(ctx.build(epoch=1), 1)
    if not diff_batches(first, next_epoch):
        problems.append("build(epoch=1) starts with the same batch as epoch 0, bit for bit: "
                        "the epoch does not reach the shuffle and augmentation seeds")
    again = take(ctx.first_dataset(), 1)
    if not diff_batches(first, again):
        problems.append("iterating the same dataset a second time repeats epoch 0 bit for "
                        "bit, so model.fit(ds, epochs=N) trains N times on the same batches; "
                        "build one dataset per epoch (build_pipeline(config, epoch=e)) or use "
                        "a tfpipe version where each new iteration is the next epoch")
    if problems:
        return CheckResult(name, False, "; ".join(problems))
    return CheckResult(name, True, "epoch 1 (build(epoch=1)) and a second iteration of the "
                       "same dataset each start with another batch than epoch 0")


def _plain_count(path: str, compression: str | None) -> tuple[int, str | None]:
    """Records a plain `tf.data.TFRecordDataset` reads from `path`, and the error that
    stopped it (None when it read to the end). Independent of tfpipe's reader."""
    import tensorflow as tf

    n = 0
    kind = "GZIP" if (compression or "").lower() == "gzip" else ""
    try:
        for _ in tf.data.TFRecordDataset(path, compression_type=kind):
            n += 1
    except tf.errors.OpError as exc:
        return n, f"{type(exc).__name__}: {exc.message.splitlines()[0][:120]}"
    return n, None


def _ram_budget_mb(s: Any) -> float:
    from tfpipe.system import available_memory_bytes

    if s.ram_budget_mb:
        return float(s.ram_budget_mb)
    return available_memory_bytes() / 2**20 / 2


def check_memory(ctx: Context) -> CheckResult:
    name = "memory"
    s = ctx.settings
    budget = _ram_budget_mb(s)
    ctx.first_batches()
    measured = ctx.peak_rss_delta_mb
    mean_record, num_records = _record_stats(s)
    # the buffer never holds more than the dataset (per epoch)
    held = min(s.shuffle_buffer, num_records) if num_records else s.shuffle_buffer
    shuffle_mb = held * mean_record / 2**20
    batch = ctx.first_batches()[0]
    batch_mb = sum(v.nbytes for v in batch.values()) / 2**20
    # in flight: the shuffle buffer of records, plus about (prefetch + parallel batches)
    # decoded batches; AUTOTUNE depths are counted as the CPUs this process may use.
    from tfpipe.system import available_cpus

    depth = (s.prefetch if s.prefetch > 0 else available_cpus()) + 2
    estimate = shuffle_mb + depth * batch_mb
    detail = (f"RSS grew {measured:,.0f} MB over {ctx.batches} batches; steady-state estimate "
              f"{estimate:,.0f} MB (shuffle buffer {held} x {mean_record / 1024:,.0f} KB "
              f"records = {shuffle_mb:,.0f} MB + {depth} x {batch_mb:,.1f} MB batches); "
              f"budget {budget:,.0f} MB")
    worst = max(measured, estimate)
    if worst > budget:
        return CheckResult(name, False, detail + ": over budget; lower pipeline.shuffle_buffer "
                           "/ prefetch / batch_size or raise pipeline.ram_budget_mb")
    return CheckResult(name, True, detail)


def _record_stats(s: Any) -> tuple[float, int]:
    """(mean serialized record bytes, records) of the train split; (0, 0) if unknown."""
    try:
        from tfpipe.records import open_source

        src = open_source(s.data_path, split="train")
        n = int(src.num_records or 0)
        size = sum(Path(f).stat().st_size for f in src.files)
        return (size / n if n else 0.0), n
    except Exception:  # noqa: BLE001 - the estimate is advisory; the measured RSS still counts
        return 0.0, 0


def check_multiworker(ctx: Context) -> CheckResult:
    """Pre-flight for a multi-worker run (TF_CONFIG set): TF_CONFIG valid and
    consistent; how the shards split among the input workers (whole files, or
    every record read by every worker when there are too few or too uneven
    files); and the auto-shard policy tfpipe sets, so tf.distribute never falls
    back to DATA sharding silently (OFF per worker, DATA said explicitly whole)."""
    import tensorflow as tf

    from tfpipe.errors import ConfigError
    from tfpipe.pipeline import tf_config_worker, worker_shares

    name = "multi-worker"
    try:
        me = tf_config_worker()
    except ConfigError as exc:
        return CheckResult(name, False, str(exc))
    if me is None:
        return CheckResult(name, True, "TF_CONFIG not set: a single-worker run", skipped=True)
    n = me.count
    notes = [f"TF_CONFIG: {me.task_type}:{me.task_index} is input worker {me.index} of {n}"]
    by_file, shares = worker_shares(ctx.config, n)
    spread = max(shares) - min(shares)
    if by_file:
        notes.append(f"whole shard files per worker, records {shares} (spread {spread} <= "
                     f"batch {ctx.settings.batch_size})")
    else:
        notes.append(f"record-level sharding: too few or too uneven shard files for {n} "
                     f"workers, so EVERY worker reads every file and keeps 1 record in {n} "
                     f"({n}x the reading, not the decoding); records {shares}. Write a "
                     f"multiple of {n} shards of equal size (ideally 10+ per worker) to "
                     "read whole files instead")
    problems = []
    policy = tf.data.experimental.AutoShardPolicy
    per_worker = ctx.build(ctx.config, worker=(me.index, n)).options()
    whole = ctx.build(ctx.config).options()
    got_w = per_worker.experimental_distribute.auto_shard_policy
    got_a = whole.experimental_distribute.auto_shard_policy
    if got_w != policy.OFF:
        problems.append(f"per-worker pipeline has auto_shard_policy {got_w.name}, not OFF: "
                        "tf.distribute would shard it again and drop data")
    if got_a not in (policy.DATA, policy.OFF):
        problems.append(f"whole pipeline has auto_shard_policy {got_a.name}: tf.distribute "
                        "would try FILE sharding and fall back to DATA with only a log line")
    if not problems:
        notes.append("auto-shard policy OFF per worker (build with worker=ctx inside "
                     "strategy.distribute_datasets_from_function), DATA for a whole pipeline "
                     "(experimental_distribute_dataset: every worker decodes everything)")
    return CheckResult(name, not problems, "; ".join(problems or notes))
