"""Seed guarantees: parallelism-independent, epochs differ, workers disjoint, restart.

The hard cases are on: mixup and cutmix, augment.enable_rate < 1, bad records in
the middle of the stream (every later sample shifts batch), several interleave
cycles. deterministic: true promises identical WHOLE batches whatever
num_parallel_calls; deterministic: false identical samples (compared by index,
with L4 off: a mixed sample depends on its batch partners by definition).
"""

from __future__ import annotations

import numpy as np
import pytest

from tfpipe.pipeline import build_pipeline

from .bad_data import BAD, write_bad_dataset
from .conftest import NUM, base_config
from .helpers import all_ops, batches, by_index, graph_def

# one xdist worker builds the module fixtures (bad_data, epoch0, epoch1) once
pytestmark = pytest.mark.xdist_group("pipeline-reproducibility")

HARD = {"augment.enable_rate": 0.5,
        "augment.batch": {"mixup": {"alpha": 0.4}, "cutmix": {"alpha": 1.0, "p": 0.5}}}


@pytest.fixture(scope="module")
def bad_data(tmp_path_factory, images) -> str:
    return write_bad_dataset(tmp_path_factory.mktemp("bad-repro"), images)


def _same_batches(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b) and a
    for k, (x, y) in enumerate(zip(a, b)):
        assert x.keys() == y.keys()
        for key in x:
            np.testing.assert_array_equal(x[key], y[key], err_msg=f"batch {k}, {key!r}")


@pytest.mark.parametrize("cycle", [1, 2, "autotune"])
def test_whole_batches_identical_whatever_parallelism(bad_data, cycle):
    """Bad records, mixup + cutmix, enable_rate 0.5: num_parallel_calls 1 vs 4 vs
    autotune give the same batches, bit for bit, under deterministic: true."""
    runs = [batches(build_pipeline(base_config(bad_data, **HARD, **{
        "pipeline.interleave_cycle": cycle, "pipeline.num_parallel_calls": npc,
        "pipeline.drop_remainder": False}), keep_index=True)) for npc in (1, 4, "autotune")]
    for other in runs[1:]:
        _same_batches(runs[0], other)
    delivered = np.concatenate([b["index"] for b in runs[0]])
    assert len(delivered) == NUM - len(BAD)  # the bad records were skipped ...
    labels = np.concatenate([b["label"] for b in runs[0]])
    assert (labels.max(axis=1) < 1).any()  # ... and L4 mixed something


@pytest.mark.parametrize("cycle", [1, "autotune"])
def test_samples_identical_deterministic_false(bad_data, cycle):
    """deterministic: false may reorder samples across batches; each sample (by
    index) is still bit-identical, enable_rate and bad records included."""
    over = {"augment.enable_rate": 0.5, "pipeline.interleave_cycle": cycle,
            "pipeline.drop_remainder": False}
    ref = by_index(build_pipeline(base_config(bad_data, **over, **{
        "pipeline.num_parallel_calls": 1}), keep_index=True))
    loose = by_index(build_pipeline(base_config(bad_data, **over, **{
        "pipeline.num_parallel_calls": 4, "pipeline.deterministic": False}), keep_index=True))
    _same(ref, loose)
    assert len(ref) == NUM - len(BAD)


@pytest.fixture(scope="module")
def epoch0(dataset):
    return batches(build_pipeline(base_config(dataset), keep_index=True))


@pytest.fixture(scope="module")
def reference(epoch0):
    """by_index of the epoch-0 batches (the same build: epoch0 is its whole first pass)."""
    out = {}
    for b in epoch0:
        for i, idx in enumerate(b["index"]):
            assert int(idx) not in out, f"index {idx} seen twice"
            out[int(idx)] = (b["image"][i], b["label"][i])
    return out


def _same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k][0], b[k][0], err_msg=f"index {k}")
        np.testing.assert_array_equal(a[k][1], b[k][1])


def test_bit_identical_whatever_parallelism(dataset, reference):
    serial = base_config(dataset, **{"pipeline.num_parallel_calls": 1,
                                     "pipeline.interleave_cycle": 1})
    # interleave_cycle changes the record ORDER (so which sample gets which index);
    # keep it, and vary only parallelism and determinism.
    serial["pipeline"]["interleave_cycle"] = "autotune"
    _same(reference, by_index(build_pipeline(serial, keep_index=True)))
    loose = base_config(dataset, **{"pipeline.num_parallel_calls": "autotune",
                                    "pipeline.deterministic": False})
    _same(reference, by_index(build_pipeline(loose, keep_index=True)))
    assert len(reference) == (NUM // 8) * 8


@pytest.fixture(scope="module")
def epoch1(dataset):
    return batches(build_pipeline(base_config(dataset), epoch=1, keep_index=True))


def test_epochs_differ(epoch0, epoch1):
    # two fresh builds, epoch=0 and epoch=1 (the module's fixtures: no build of its own)
    e0, e1 = epoch0, epoch1
    assert not np.array_equal(e0[0]["image"], e1[0]["image"])
    assert not np.array_equal(np.concatenate([b["label"] for b in e0]),
                              np.concatenate([b["label"] for b in e1]))


def test_train_workers_disjoint_and_complete(dataset):
    """3 shards, 2 workers: files are split; indices disjoint, every sample once."""
    cfg = base_config(dataset, **{"pipeline.drop_remainder": False})
    seen: list[int] = []
    for w in range(2):
        got = by_index(build_pipeline(cfg, worker=(w, 2), keep_index=True))
        assert all(k % 2 == w for k in got), "global index = local * workers + worker"
        seen += list(got)
    # unique global indices, hence unique sample seeds (workers may hold unequal
    # counts, so the indices are not exactly 0..N-1)
    assert len(seen) == len(set(seen)) == NUM


def test_eval_workers_cover_every_record_once(dataset):
    """1 shard, 2 workers: elements are split; the eval images of both workers
    together are exactly the single-worker eval images."""
    cfg = base_config(dataset.replace("*.tfrecord", "*-00000-*.tfrecord"))
    whole = sorted(x.tobytes() for x, _ in by_index(
        build_pipeline(cfg, split="validation", keep_index=True)).values())
    assert len(whole) == -(-NUM // 3)  # eval never drops the remainder
    parts = []
    for w in range(2):
        parts += [x.tobytes() for x, _ in by_index(build_pipeline(
            cfg, split="validation", worker=(w, 2), keep_index=True)).values()]
    assert sorted(parts) == whole


def test_input_context_worker(dataset):
    import tensorflow as tf

    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
    got = by_index(build_pipeline(base_config(dataset), worker=ctx, keep_index=True))
    assert got and all(k % 2 == 1 for k in got)


def test_restart_at_step_reproduces(dataset, epoch1):
    cfg = base_config(dataset)
    full = epoch1
    resumed = batches(build_pipeline(cfg, epoch=1, keep_index=True).skip(3))
    assert len(resumed) == len(full) - 3
    for a, b in zip(full[3:], resumed):
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


STATEFUL_RANDOM = {"RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal",
                   "ParameterizedTruncatedNormal", "Multinomial", "RandomGamma", "RandomPoisson",
                   "RandomPoissonV2", "RandomShuffle", "RandomCrop", "SampleDistortedBoundingBox",
                   "SampleDistortedBoundingBoxV2", "RngSkip", "RngReadAndSkip",
                   "StatefulUniform", "StatefulUniformInt", "StatefulUniformFullInt",
                   "StatefulStandardNormalV2", "StatefulTruncatedNormal",
                   "StatefulRandomBinomial", "RandomGammaGrad", "RandomDataset"}


def test_every_op_runs_and_no_stateful_random_op_in_graph(dataset):
    """Every geometry and pixel op of the config op table, mixup and cutmix, in one
    pipeline: it runs, and its graph (with the function library) holds no stateful RNG."""
    from tfpipe.config import GEOMETRY_OPS, PIXEL_OPS, load_config

    cfg = load_config(base_config(dataset, **{
        "augment.geometry": {name: {"p": 0.5} for name in GEOMETRY_OPS},
        "augment.pixel": {name: {"p": 0.5} for name in PIXEL_OPS},
        "augment.batch": {"mixup": {"alpha": 0.2}, "cutmix": {"alpha": 1.0}},
        "augment.enable_rate": 0.5}))
    ds = build_pipeline(cfg)
    x, y = next(iter(ds.map(lambda e: (e["image"], e["label"]))))
    assert x.shape == (8, 32, 32, 3) and np.isfinite(x.numpy()).all() and y.shape == (8, 4)
    ops = all_ops(graph_def(ds))
    assert "StatelessRandomUniformV2" in ops or any(o.startswith("Stateless") for o in ops)
    bad = sorted(o for o in ops if o in STATEFUL_RANDOM or o.startswith("Stateful"))
    assert not bad, f"stateful random ops in the pipeline graph: {bad}"
