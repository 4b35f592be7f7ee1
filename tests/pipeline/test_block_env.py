"""`TFPIPE_BLOCK_PATH=0` (read once, at import: pipeline/_block.py) keeps the
per-element path, with the same bytes.

The observable is the dataset graph: only the block path has the block op and
its rebatch (the markers test_block_path.py asserts). A fresh process started
with the variable builds an eligible pipeline without `_block.forced`; this
process builds the same config on the block path (forced on: it is eligible)
and on its default, and every batch must be equal bit for bit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

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

# The child: build the config it is given (no `forced`), say what it saw, save the batches.
_CHILD = r"""
import json, sys
import numpy as np
import tensorflow as tf
from tfpipe.pipeline import _block, build_pipeline

cfg = json.loads(sys.argv[1])
ds = build_pipeline(cfg, "train", keep_index=True)
policy = tf.data.experimental.ExternalStatePolicy.IGNORE
g = tf.compat.v1.GraphDef()
g.ParseFromString(ds._as_serialized_graph(external_state_policy=policy).numpy())
ops = {n.op for n in g.node} | {n.op for f in g.library.function for n in f.node_def}
arrays = {}
for i, b in enumerate(ds):
    for k, v in b.items():
        arrays[f"{i}/{k}"] = v.numpy()
np.savez(sys.argv[2], **arrays)
print(json.dumps({"enabled": _block.enabled(), "ops": sorted(ops)}))
"""


def _batches(ds: tf.data.Dataset) -> dict[str, np.ndarray]:
    return {f"{i}/{k}": v.numpy() for i, b in enumerate(ds) for k, v in b.items()}


def _has_markers(ds: tf.data.Dataset) -> list[bool]:
    ops = all_ops(graph_def(ds))
    return [m in ops for m in MARKERS]


# a fresh TF in the child: ~7-8 s estimated on a quiet 2-core machine; 15-32 s measured
# here at load 2-4 (the child and this process build side by side)
@pytest.mark.slow
def test_env_zero_keeps_the_per_element_path(dataset, tmp_path):
    # one shard (19 records), no augmentation, uint8: the cheapest pipeline the block
    # path takes; the child (a fresh TF) runs while this process builds its side
    cfg = base_config(dataset.replace("train-*", "train-00000-of-00003"),
                      **{"augment.geometry": {}, "augment.pixel": {},
                         "data.output_dtype": "uint8"})
    out = tmp_path / "env0.npz"
    env = dict(os.environ, TFPIPE_BLOCK_PATH="0", TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, json.dumps(cfg), str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with _block.forced(True):
            block = build_pipeline(cfg, "train", keep_index=True)
        assert _has_markers(block) == [True, True], "not eligible: the test would prove nothing"
        # this process's default follows its own environment (unset in CI: the block path)
        default_on = os.environ.get(_block.ENV, "1").strip() != "0"
        assert _has_markers(build_pipeline(cfg, "train", keep_index=True)) == [default_on] * 2
        want = _batches(block)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    seen = json.loads(stdout.strip().splitlines()[-1])
    assert seen["enabled"] is False
    assert [m in seen["ops"] for m in MARKERS] == [False, False], "block path taken with =0"
    with np.load(out) as z:
        got = {k: z[k] for k in z.files}
    assert sorted(got) == sorted(want) and want
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
