"""The block path's record-size rule (pipeline/_block.py, `LARGE_RECORD_BYTES`):
records averaging that many encoded bytes keep the per-element path unless the
block path is forced; the mean comes from the manifest's shard bytes and record
counts, never from reading a record.

The observable is the dataset graph (only the block path has the block op and
its rebatch, as test_block_path.py asserts); the oracle for the mean is the
files' sizes from `os.path.getsize` and the manifest JSON read directly.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tfpipe.convert import convert
from tfpipe.native import jpeg as native_jpeg
from tfpipe.pipeline import _block, build_pipeline

from .conftest import base_config
from .helpers import all_ops, graph_def

pytestmark = pytest.mark.skipif(not native_jpeg.has_decode_crop_resize_block(),
                                reason="native kernels not built (the block path needs them)")

MARKERS = ("TfpipeDecodeCropResizeBlock", "RebatchDatasetV2")


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> Path:
    """12 small JPEGs in 2 class folders -> shards + manifest.json (a real convert)."""
    src = tmp_path_factory.mktemp("sizes_src")
    rng = np.random.default_rng(0)
    for i in range(12):
        d = src / f"c{i % 2}"
        d.mkdir(exist_ok=True)
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (40, 48, 3), np.uint8)).save(buf, "JPEG")
        (d / f"{i}.jpg").write_bytes(buf.getvalue())
    out = tmp_path_factory.mktemp("sizes_out") / "out"
    convert(src, out, shard_size="8KB", workers=1)
    return out


def _shards(out: Path) -> list[str]:
    return sorted(str(p) for p in out.glob("train-*.tfrecord"))


def _markers(cfg: dict) -> list[bool]:
    ops = all_ops(graph_def(build_pipeline(cfg, "train")))
    return [m in ops for m in MARKERS]


def test_mean_record_bytes_is_shard_bytes_over_manifest_counts(converted: Path) -> None:
    files = _shards(converted)
    assert len(files) > 1
    manifest = json.loads((converted / "manifest.json").read_text())
    records = sum(int(s["num_records"]) for s in manifest["splits"]["train"]["shards"])
    assert records == 12
    want = sum(os.path.getsize(f) for f in files) / records
    assert _block.mean_record_bytes(files) == pytest.approx(want, rel=1e-12)
    # a shard the manifest does not list: no mean (a glob of bare shards)
    assert _block.mean_record_bytes(files + [str(converted / "stray.tfrecord")]) is None


def test_large_records_keep_the_per_element_path_unless_forced(converted: Path,
                                                                monkeypatch) -> None:
    import tensorflow as tf

    from tfpipe.pipeline import _classify, settings
    from tfpipe.pipeline._source import open_records

    cfg = base_config(str(converted), **{"data.image_size": [16, 16],
                                         "data.num_classes": 2})
    s = settings(cfg)
    src = open_records(s.data_path, "train", s.task)
    files = _shards(converted)
    builder = _classify.Classify(s, tf.zeros([2], tf.int64), 0, 1, src.parse, True)

    def eligible() -> bool:
        return _block.eligible(builder, src.parse_spec, True, files)

    assert eligible(), "small records: the block path"
    mean = _block.mean_record_bytes(files)
    monkeypatch.setattr(_block, "LARGE_RECORD_BYTES", int(mean) + 1)
    assert eligible()
    # the threshold at this dataset's mean: its records now count as large
    monkeypatch.setattr(_block, "LARGE_RECORD_BYTES", int(mean))
    assert not eligible()
    with _block.forced(True):
        assert eligible()
    # and build_pipeline asks with the pipeline's own shards
    assert _markers(cfg) == [False, False]
