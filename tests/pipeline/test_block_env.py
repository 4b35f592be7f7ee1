"""The block path's variants are chosen in code, never by an environment variable
(issue 22, item 13): `_block.forced(False)` keeps the per-element path, with the
same bytes; `write_out(False)` and `structure(...)` nest and restore.

The observable is the dataset graph: only the block path has the block op and
its rebatch (the markers test_block_path.py asserts).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.native import jpeg as native_jpeg
from tfpipe.pipeline import _block, build_pipeline

from .conftest import base_config
from .helpers import all_ops, graph_def

pytestmark = pytest.mark.skipif(not native_jpeg.has_decode_crop_resize_block(),
                                reason="native kernels not built (the block path needs them)")

MARKERS = ("TfpipeDecodeCropResizeBlock", "RebatchDatasetV2")


def _batches(ds: tf.data.Dataset) -> dict[str, np.ndarray]:
    return {f"{i}/{k}": v.numpy() for i, b in enumerate(ds) for k, v in b.items()}


def _has_markers(ds: tf.data.Dataset) -> list[bool]:
    ops = all_ops(graph_def(ds))
    return [m in ops for m in MARKERS]


def test_forced_off_keeps_the_per_element_path_with_the_same_bytes(dataset, monkeypatch):
    # one shard (19 records), no augmentation, uint8: the cheapest pipeline the block
    # path takes
    cfg = base_config(dataset.replace("*.tfrecord", "train-00000-of-00003.tfrecord"),
                      **{"augment.geometry": {}, "augment.pixel": {},
                         "data.output_dtype": "uint8"})
    # the variables that used to steer it are not read any more
    monkeypatch.setenv("TFPIPE_BLOCK_PATH", "0")
    monkeypatch.setenv("TFPIPE_BLOCK_SCHED", "bogus")
    monkeypatch.setenv("TFPIPE_BLOCK_WRITE_OUT", "0")
    with _block.forced(True):
        block = build_pipeline(cfg, "train", keep_index=True)
    assert _has_markers(block) == [True, True], "not eligible: the test would prove nothing"
    assert _has_markers(build_pipeline(cfg, "train", keep_index=True)) == [True, True]
    with _block.forced(False):
        assert _block.enabled() is False
        with _block.forced(True):  # the innermost wins
            assert _block.enabled() is True
        per_element = build_pipeline(cfg, "train", keep_index=True)
    assert _block.enabled() is True
    assert _has_markers(per_element) == [False, False]
    want, got = _batches(block), _batches(per_element)
    assert sorted(got) == sorted(want) and want
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_structure_and_write_out_nest_and_restore():
    assert _block._structure() == "map" and _block._write_out_on() is True
    with _block.structure("isolated"), _block.write_out(False):
        assert _block._structure() == "isolated" and _block._write_out_on() is False
    assert _block._structure() == "map" and _block._write_out_on() is True
    with pytest.raises(ValueError, match=r"one of \('map', 'isolated'\), got 'bogus'"):
        with _block.structure("bogus"):
            pass
