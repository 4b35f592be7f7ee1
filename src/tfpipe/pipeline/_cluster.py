"""Multi-worker input: who this worker is (TF_CONFIG) and how the shards split."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from tfpipe.errors import ConfigError

# The task types that run the input pipeline under MultiWorkerMirroredStrategy:
# the chief is worker 0, then the workers (TF's own ordering).
INPUT_TASKS = ("chief", "worker")


@dataclass(frozen=True)
class ClusterWorker:
    index: int  # this process's input pipeline among `count`
    count: int
    task_type: str
    task_index: int
    addresses: tuple[str, ...]  # the input workers' addresses, index order


def _address(text: Any, where: str) -> None:
    if not isinstance(text, str):
        raise ConfigError(f"TF_CONFIG: {where} must be a 'host:port' string, got {text!r}")
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"TF_CONFIG: {where} must be 'host:port' with a port 1..65535, "
                          f"got {text!r}")


def tf_config_worker(text: str | None = None) -> ClusterWorker | None:
    """This process's (index, count) among the input workers, from TF_CONFIG
    (`text`, default the environment variable); None when it is not set.

    Checks what tf.distribute would trip over later, with the key named: valid
    JSON, a `cluster` of address lists, `task.type` one of the cluster's job
    types, `0 <= task.index < len(cluster[type])`, every address 'host:port',
    no address twice. Chief and workers run input pipelines (chief first).
    """
    text = os.environ.get("TF_CONFIG") if text is None else text
    if text is None or not text.strip():
        return None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"TF_CONFIG: not valid JSON ({exc})") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("cluster"), dict):
        raise ConfigError("TF_CONFIG: needs a 'cluster' object, e.g. "
                          '{"cluster": {"worker": ["host0:port", "host1:port"]}, '
                          '"task": {"type": "worker", "index": 0}}')
    cluster = cfg["cluster"]
    seen: dict[str, str] = {}
    for job, addresses in cluster.items():
        if not isinstance(addresses, list) or not addresses:
            raise ConfigError(f"TF_CONFIG: cluster.{job} must be a non-empty list of "
                              f"'host:port', got {addresses!r}")
        for i, a in enumerate(addresses):
            _address(a, f"cluster.{job}[{i}]")
            if a in seen:
                raise ConfigError(f"TF_CONFIG: address {a} is both {seen[a]} and "
                                  f"cluster.{job}[{i}]")
            seen[a] = f"cluster.{job}[{i}]"
    task = cfg.get("task")
    if not isinstance(task, dict):
        raise ConfigError("TF_CONFIG: needs a 'task' object: {\"type\": ..., \"index\": ...}")
    ttype, tindex = task.get("type"), task.get("index", 0)
    if ttype not in cluster:
        raise ConfigError(f"TF_CONFIG: task.type {ttype!r} is not a job of the cluster "
                          f"(jobs: {', '.join(cluster)})")
    if isinstance(tindex, bool) or not isinstance(tindex, int) \
            or not 0 <= tindex < len(cluster[ttype]):
        raise ConfigError(f"TF_CONFIG: task.index must be 0..{len(cluster[ttype]) - 1} for "
                          f"cluster.{ttype}, got {tindex!r}")
    inputs = [(job, i) for job in INPUT_TASKS for i in range(len(cluster.get(job, [])))]
    addresses = tuple(cluster[job][i] for job, i in inputs)
    if (ttype, tindex) not in inputs:  # e.g. a parameter server or evaluator
        raise ConfigError(f"TF_CONFIG: task {ttype}:{tindex} runs no training input "
                          f"(input tasks: {', '.join(INPUT_TASKS)})")
    return ClusterWorker(inputs.index((ttype, tindex)), len(inputs), ttype, tindex, addresses)


def worker_shares(config: Any, count: int, split: str = "train") -> tuple[bool, list[int]]:
    """How `build_pipeline(config, worker=(i, count))` splits `split`: (whole files,
    records per worker). Whole files when there are enough of them to keep every
    share within one batch, else every worker reads every file and keeps every
    count-th record (pipeline/_source.py `worker_files`)."""
    from tfpipe.pipeline._settings import settings
    from tfpipe.pipeline._source import open_records, record_counts, worker_files

    s = settings(config)
    src = open_records(s.data_path, split, s.task, s.keys)
    counts = record_counts(src.files)
    by_count = dict(zip(src.files, counts))
    shares = []
    by_record = False
    for i in range(count):
        files, by_record = worker_files(src.files, i, count, counts, s.batch_size)
        if by_record:
            n = sum(counts)
            return False, [n // count + (1 if w < n % count else 0) for w in range(count)]
        shares.append(sum(by_count[f] for f in files))
    return not by_record, shares
