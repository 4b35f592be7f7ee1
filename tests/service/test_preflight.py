"""`tfpipe check` multi-worker pre-flight and TF_CONFIG parsing (issue 13)."""

from __future__ import annotations

import json

import pytest
import tensorflow as tf

from tfpipe.bench.check import run_checks
from tfpipe.errors import ConfigError
from tfpipe.pipeline import build_pipeline, tf_config_worker, worker_shares

from .conftest import config

GOOD = {"cluster": {"chief": ["127.0.0.1:2000"], "worker": ["127.0.0.1:2001",
                                                            "127.0.0.1:2002"]},
        "task": {"type": "worker", "index": 1}}


def test_good_tf_config_places_this_worker():
    me = tf_config_worker(json.dumps(GOOD))
    assert (me.index, me.count) == (2, 3)  # chief is input worker 0
    assert me.addresses == ("127.0.0.1:2000", "127.0.0.1:2001", "127.0.0.1:2002")
    assert tf_config_worker("") is None


@pytest.mark.parametrize("text, message", [
    ("{cluster: 1}", "TF_CONFIG: not valid JSON"),
    (json.dumps({"task": {"type": "worker", "index": 0}}), "needs a 'cluster' object"),
    (json.dumps({**GOOD, "task": {"type": "ps", "index": 0}}),
     r"task.type 'ps' is not a job of the cluster \(jobs: chief, worker\)"),
    (json.dumps({**GOOD, "task": {"type": "worker", "index": 2}}),
     "task.index must be 0..1 for cluster.worker, got 2"),
    (json.dumps({"cluster": {"worker": ["127.0.0.1"]}, "task": {"type": "worker"}}),
     r"cluster.worker\[0\] must be 'host:port' with a port 1..65535, got '127.0.0.1'"),
    (json.dumps({"cluster": {"worker": ["h:1", "h:1"]}, "task": {"type": "worker"}}),
     r"address h:1 is both cluster.worker\[0\] and cluster.worker\[1\]"),
    (json.dumps({"cluster": {"worker": ["h:1"], "evaluator": ["h:2"]},
                 "task": {"type": "evaluator", "index": 0}}), "runs no training input"),
])
def test_bad_tf_config_names_the_key(text, message):
    with pytest.raises(ConfigError, match=message):
        tf_config_worker(text)


def test_worker_tf_config_is_this_processes_place(monkeypatch):
    from tfpipe.pipeline._build import _worker

    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["h:1", "h:2"]},
                                                "task": {"type": "worker", "index": 1}}))
    assert _worker("TF_CONFIG") == (1, 2)
    monkeypatch.delenv("TF_CONFIG")
    assert _worker("TF_CONFIG") == (0, 1)


@pytest.mark.slow
def test_auto_shard_policy_is_explicit(data):
    policy = tf.data.experimental.AutoShardPolicy
    cfg = config(data)
    assert build_pipeline(cfg, worker=(0, 2)).options() \
        .experimental_distribute.auto_shard_policy == policy.OFF
    assert build_pipeline(cfg).options().experimental_distribute.auto_shard_policy == \
        policy.DATA


@pytest.mark.slow
def test_preflight_multiworker(data, monkeypatch):
    cfg = config(data)
    monkeypatch.delenv("TF_CONFIG", raising=False)
    (r,) = run_checks(cfg, only=["multiworker"])
    assert r.passed and r.skipped and "TF_CONFIG not set" in r.detail
    # 3 shards of 16 for 2 workers: 32 vs 16 is 4 batches apart -> by record
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["h:1", "h:2"]},
                                                "task": {"type": "worker", "index": 0}}))
    assert worker_shares(cfg, 2) == (False, [24, 24])
    (r,) = run_checks(cfg, only=["multiworker"])
    assert r.passed, r.detail
    assert "input worker 0 of 2" in r.detail
    assert "record-level sharding" in r.detail and "EVERY worker reads every file" in r.detail
    assert "auto-shard policy OFF per worker" in r.detail
    # 3 workers, 3 equal shards: whole files
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["h:1", "h:2", "h:3"]},
                                                "task": {"type": "worker", "index": 2}}))
    (r,) = run_checks(cfg, only=["multiworker"])
    assert r.passed and "whole shard files per worker, records [16, 16, 16]" in r.detail
    # a broken TF_CONFIG fails the check with the key named
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["h:1"]},
                                                "task": {"type": "worker", "index": 3}}))
    (r,) = run_checks(cfg, only=["multiworker"])
    assert not r.passed and "task.index must be 0..0 for cluster.worker, got 3" in r.detail
