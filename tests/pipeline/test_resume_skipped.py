"""Exact resume when records were skipped (issue 22, items 3 and 4).

Under `on_error: skip` a skipped record shifts every later batch by one stream
position, so batch k no longer starts at stream position k * batch_size. The
position a run saves therefore holds the stream offset its trained batches
consumed (`tfpipe.pipeline.stream_offset`), and `build_pipeline(cfg, epoch=e,
step=k, offset=p)` starts there. Oracle: the uninterrupted epoch's batches.

Data: a photo folder through `tfpipe convert` (4 shards of 10 train records),
three records made undecodable. With `shuffle_buffer: 1` the stream order is
the interleave's (position p = shard p % 4, record p // 4), so the bad records
sit at stream positions 2, 13 and 30: good samples 0 1 3 4 | 5 6 7 8 | 9 10 11
12 | 14 15 16 17 | ...; resuming at step 2 has one bad record before the point
(2) and two after it, at step 3 one right at the point (13 is the next position
after batch 2), at step 6 two before it.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

import tfpipe.train
from tfpipe.errors import ConfigError
from tfpipe import pipeline as tp
from tfpipe.pipeline import build_pipeline

try:
    from .bad_data import converted_dataset, corrupt_records
    from .conftest import base_config
except ImportError:  # imported by path
    from bad_data import converted_dataset, corrupt_records  # type: ignore[no-redef]
    from conftest import base_config  # type: ignore[no-redef]

BAD_POSITIONS = (2, 13, 30)
GOOD = [p for p in range(40) if p not in BAD_POSITIONS]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = converted_dataset(tmp_path_factory.mktemp("resume-skip"))
    corrupt_records(d, "train", [(p % 4, p // 4) for p in BAD_POSITIONS])
    return d


def _cfg(data, **over) -> dict:
    return base_config(str(data), **{"data.image_size": [24, 24], "pipeline.batch_size": 4,
                                     "pipeline.shuffle_buffer": 1,
                                     "augment.batch": {"mixup": {"alpha": 0.4}}, **over})


def _arrays(ds) -> list[dict[str, np.ndarray]]:
    return [{k: v.numpy() for k, v in b.items()} for b in ds]


def _same(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert sorted(x) == sorted(y)
        for k in x:
            assert x[k].dtype == y[k].dtype and np.array_equal(x[k], y[k]), k


@pytest.mark.slow
@pytest.mark.parametrize("block, steps", [(True, (2, 3, 6)), (False, (3,))],
                         ids=["block-path", "per-element"])
def test_resume_at_the_recorded_offset_is_the_uninterrupted_epoch(data, block, steps):
    from tfpipe.pipeline import _block

    cfg = _cfg(data, **{"pipeline.on_error": "skip"})
    with _block.forced(block):
        ref = build_pipeline(cfg, keep_index=True)
        e0, e1 = _arrays(ref), _arrays(ref)
        assert [int(i) for b in e0 for i in b["index"]] == GOOD[:36]  # the oracle's order
        for k in steps:
            # the stream position after the (4k)-th good sample
            want = GOOD[4 * k - 1] + 1
            assert tp.stream_offset(ref, epoch=0, step=k) == want
            resumed = build_pipeline(cfg, step=k, offset=want, keep_index=True)
            _same(_arrays(resumed), e0[k:])  # the rest of epoch 0 ...
            if k == 3:
                _same(_arrays(resumed), e1)  # ... then epoch 1 whole
        # without the offset, step 3 counts stream positions: another batch 3
        naive = _arrays(build_pipeline(cfg, step=3, keep_index=True))
        assert not np.array_equal(naive[0]["index"], e0[3]["index"])


def _model() -> keras.Model:
    keras.utils.set_random_seed(1)
    m = keras.Sequential([keras.Input((24, 24, 3)), keras.layers.Flatten(),
                          keras.layers.Dense(4)])
    m.compile(keras.optimizers.SGD(0.05, momentum=0.9),
              keras.losses.CategoricalCrossentropy(from_logits=True))
    return m


class _Crash(keras.callbacks.Callback):
    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.seen = at, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.at:
            raise RuntimeError("crash")


@pytest.mark.slow
def test_fit_resumes_exactly_after_skipped_records(data, tmp_path):
    """Uninterrupted `tfpipe.train.fit` (2 epochs) vs one that crashes after step 5
    (last checkpoint: step 3, with the bad record at position 2 before it and the
    one at 13 right at it) and resumes from it: the same final weights, bit for bit
    (CPU). The position saved holds the offset."""
    cfg = _cfg(data, **{"pipeline.on_error": "skip"})
    m = _model()
    tfpipe.train.fit(m, cfg, 2, tmp_path / "full", save_every=3, verbose=0)
    full = [w.numpy() for w in m.weights]

    m = _model()
    with pytest.raises(RuntimeError, match="crash"):
        tfpipe.train.fit(m, cfg, 2, tmp_path / "cut", save_every=3, verbose=0,
                         callbacks=[_Crash(5)])
    position = tfpipe.train.PipelinePosition(cfg)
    m = _model()
    manager = tfpipe.train.checkpoint(m, position, tmp_path / "cut")
    tfpipe.train.restore(manager, position)
    assert position.value() == (0, 3) and position.offset == GOOD[11] + 1
    m = _model()
    tfpipe.train.fit(m, cfg, 2, tmp_path / "cut", save_every=3, verbose=0)
    for a, b in zip(full, [w.numpy() for w in m.weights]):
        np.testing.assert_array_equal(a, b)


def test_fit_refuses_steps_per_epoch(data, tmp_path):
    cfg = _cfg(data)
    with pytest.raises(ConfigError, match="steps_per_epoch") as e:
        tfpipe.train.fit(_model(), cfg, 1, tmp_path / "c", steps_per_epoch=3, verbose=0)
    assert "batches_per_pass" in str(e.value)
