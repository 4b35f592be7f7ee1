"""The block path (pipeline/_block.py) gives the per-element path's bytes.

The oracle is the per-element path of the same config (`_block.forced(False)`),
itself tested against TF's ops and NumPy elsewhere (test_outputs, test_plan,
tests/native). Every comparison is whole pipelines: each batch's images,
labels and indices bit for bit, the same number of batches, the same element
spec; and each asserts which path was taken, from the dataset graph.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.native import jpeg as native_jpeg
from tfpipe.pipeline import _block, build_pipeline, reset_skipped_counts, skipped_counts

from .bad_data import BAD, write_bad_dataset
from .conftest import _example, base_config, write_shards
from .helpers import all_ops, graph_def

pytestmark = pytest.mark.skipif(not native_jpeg.has_decode_crop_resize_block(),
                                reason="native kernels not built (the block path needs them)")

# The block op, and the rebatch only the block path has.
MARKERS = ("TfpipeDecodeCropResizeBlock", "RebatchDatasetV2")


def _ops(ds: tf.data.Dataset) -> set[str]:
    return all_ops(graph_def(ds))


def _build(cfg, block: bool, split: str = "train", **kw) -> tf.data.Dataset:
    with _block.forced(block):
        ds = build_pipeline(cfg, split, **kw)
    ops = _ops(ds)
    for m in MARKERS:
        assert (m in ops) == block, f"block path {'not ' if block else ''}taken ({m})"
    return ds


def _values(ds: tf.data.Dataset) -> list:
    return [tf.nest.map_structure(lambda t: t.numpy(), b) for b in ds]


def _same(cfg, split: str = "train", after=None, **kw) -> list:
    """Both paths of `cfg`: equal element specs and equal batches; -> the batches.
    `after(block)` runs right after each path's pass (counts, logs)."""
    a, b = _build(cfg, True, split, **kw), _build(cfg, False, split, **kw)
    assert a.element_spec == b.element_spec
    got = _values(a)
    if after:
        after(True)
    want = _values(b)
    if after:
        after(False)
    assert len(got) == len(want) > 0
    for i, (x, y) in enumerate(zip(got, want)):
        tf.nest.assert_same_structure(x, y)
        for u, v in zip(tf.nest.flatten(x), tf.nest.flatten(y)):
            assert u.dtype == v.dtype and u.shape == v.shape, f"batch {i}"
            np.testing.assert_array_equal(u, v, err_msg=f"batch {i}")
    return got


# L3 off where it is not the point: `compose` is the same code on both paths, and
# each L3 kernel adds seconds to a pipeline's first batch
NO_L3 = {"augment.pixel": {}}


def _imagenet(path: str, **over):
    return tfpipe.load_config("imagenet", {"data.path": path, "data.image_size": [32, 32],
                                           "data.num_classes": 4, "pipeline.batch_size": 8,
                                           "pipeline.shuffle_buffer": 32,
                                           "pipeline.num_parallel_calls": 2, **over})


@pytest.mark.slow
def test_imagenet_float32_png_rows_mixed_in(dataset):
    """RRC + flip + brightness/contrast/saturation + normalize; every block has PNG
    rows (the per-sample fallback, scattered back) and grayscale JPEGs."""
    got = _same(_imagenet(dataset), keep_index=True)
    assert got[0]["image"].dtype == np.float32
    assert sorted(int(i) for b in got for i in b["index"]) == list(range(56))


def test_uint8_drop_remainder_supervised_worker(dataset):
    """uint8 out; batch 10 over 28 records (worker 1 of 2), drop_remainder."""
    got = _same(_imagenet(dataset, **{"data.output_dtype": "uint8", "pipeline.batch_size": 10,
                                      "pipeline.drop_remainder": True, **NO_L3}),
                worker=(1, 2), as_supervised=True)
    assert [len(b[1]) for b in got] == [10, 10]


def test_crop_p_and_enable_rate_no_drop(dataset):
    """crop p < 1 (whole-image rows, mode 1) and enable_rate 0.5 (eval rows, mode 2);
    the last batch short (56 = 5 x 10 + 6)."""
    got = _same(base_config(dataset, **{"augment.geometry.random_resized_crop.p": 0.5, **NO_L3,
                                        "augment.enable_rate": 0.5, "pipeline.batch_size": 10,
                                        "pipeline.drop_remainder": False}), keep_index=True)
    assert [len(b["label"]) for b in got] == [10] * 5 + [6]


def test_mixup_cutmix_device_resume(dataset):
    """pixel_stage device (uint8 + the L3/L4 draws) with mixup + cutmix, resumed at
    step 3 (the skip before the blocks, the batch numbering from 3)."""
    cfg = _imagenet(dataset, **{"augment.batch.mixup.enabled": True,
                                "augment.batch.cutmix.enabled": True,
                                "augment.pixel_stage": "device"})
    got = _same(cfg, keep_index=True, step=3)
    assert len(got) == 7 - 3 and got[0]["image"].dtype == np.uint8
    assert "mixup_perm" in got[0] and "augment_enabled" in got[0]


def test_eval_split_and_cache(dataset, tmp_path):
    _same(_imagenet(dataset), "validation", keep_index=True)
    cfg = _imagenet(dataset, **{"pipeline.cache": str(tmp_path)})
    with _block.forced(True):
        ds = build_pipeline(cfg, "validation")
    first, second = _values(ds), _values(ds)  # the second pass reads the cache
    # eval caches its decoded batches (outside the per-iteration part, both paths)
    bs = tfpipe.pipeline.settings(cfg).batch_size
    assert any(p.name.endswith(f"-batches{bs}.index") for p in tmp_path.iterdir())
    for x, y in zip(first, second):
        np.testing.assert_array_equal(x["image"], y["image"])


def test_not_deterministic_same_samples(dataset):
    cfg = _imagenet(dataset, **{"pipeline.deterministic": False, **NO_L3})
    got = {}
    for block in (True, False):
        rows = {}
        for b in _values(_build(cfg, block, keep_index=True)):
            for i, idx in enumerate(b["index"]):
                rows[int(idx)] = (b["image"][i], b["label"][i])
        got[block] = rows
    assert sorted(got[True]) == sorted(got[False]) == list(range(56))
    # (the image of a sample depends on its index only; mixing partners do not exist here)
    for idx, (img, label) in got[True].items():
        np.testing.assert_array_equal(img, got[False][idx][0])
        assert label == got[False][idx][1]


@pytest.fixture(scope="module")
def bad(tmp_path_factory, images) -> tuple[str, list[str]]:
    out = tmp_path_factory.mktemp("blockbad")
    glob = write_bad_dataset(out, images)
    return glob, sorted(str(p) for p in out.iterdir())


def test_skip_counts_names_and_keeps_the_rest(bad, capfd):
    """A damaged JPEG, text and a broken PNG under skip: counted and named like the
    per-element path; the surviving samples equal its output (later batches
    re-formed from the survivors), with enable_rate gating rows whose batch shifted."""
    glob, paths = bad
    cfg = base_config(glob, **{"augment.enable_rate": 0.5, "pipeline.batch_size": 5, **NO_L3})
    seen = {}

    def after(block: bool) -> None:
        seen[block] = (skipped_counts(), capfd.readouterr().err)
        reset_skipped_counts()

    reset_skipped_counts()
    capfd.readouterr()
    got = _same(cfg, keep_index=True, after=after)
    assert sum(len(b["label"]) for b in got) == (56 - len(BAD)) // 5 * 5  # drop_remainder
    for block in (True, False):
        counts, err = seen[block]
        assert counts == {paths[0]: 2, paths[2]: 1}, block
        for shard, rec in BAD:
            assert (f"tfpipe: bad record {rec} in shard {paths[shard]} "
                    "(pipeline.on_error=skip); skipped") in err


def test_raise_names_shard_and_record(bad):
    glob, paths = bad
    cfg = base_config(glob, **{"pipeline.on_error": "raise", "pipeline.shuffle_buffer": 0,
                               **NO_L3})
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"bad record \d in shard .*-0000[02]-of-00003"):
        _values(_build(cfg, True))


def test_a_block_parse_example_rejects_goes_row_by_row(tmp_path, images):
    """A record that is no Example fails the whole block's parse_example: the block
    goes row by row and only that record is lost."""
    recs = [_example(enc, fmt, i % 4) for i, (enc, fmt, _) in enumerate(images[:20])]
    recs[6] = b"\x0a\xff\xff not a protobuf"
    paths = write_shards(tmp_path, "train", recs, 1)
    cfg = base_config(str(tmp_path / "train-*.tfrecord"), **{"pipeline.drop_remainder": False,
                                                             **NO_L3})
    reset_skipped_counts()
    got = _same(cfg, keep_index=True)
    assert sum(len(b["label"]) for b in got) == 19
    assert skipped_counts() == {paths[0]: 2}  # once per path: block and per-element
    reset_skipped_counts()


def test_a_record_parse_example_rejects_under_raise(tmp_path, images):
    """Only parse_example is isolated per block (`_block._parsed`): under raise, a
    record it rejects fails the pipeline with its own index and shard (the block
    parsed row by row finds it)."""
    recs = [_example(enc, fmt, i % 4) for i, (enc, fmt, _) in enumerate(images[:12])]
    recs[6] = b"\x0a\xff\xff not a protobuf"
    write_shards(tmp_path, "train", recs, 1)
    raising = base_config(str(tmp_path / "train-*.tfrecord"), **{"pipeline.on_error": "raise",
                                                                 **NO_L3})
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"bad record 6 in shard .*train-00000-of-00001"):
        _values(_build(raising, True))


def test_eligibility(dataset):
    """Only what the block op computes takes it: not rot90 after the crop, not a
    vertical flip, not L3 without the crop (a full decode + resize), not
    detection; a train config without augmentation and eval splits do."""
    from tfpipe.pipeline import _classify
    from tfpipe.pipeline._settings import settings
    from tfpipe.pipeline._source import open_records

    cases = [({}, True, True),
             ({"augment.geometry.rot90": {"p": 0.5}}, True, False),
             ({"augment.geometry.flip.vertical": True}, True, False),
             ({"augment.geometry": {}}, True, False),
             ({"augment.geometry": {}, "augment.pixel": {}}, True, True),
             ({"augment.geometry.rot90": {"p": 0.5}}, False, True)]
    got = []
    with _block.forced(True):
        for over, train, want in cases:
            s = settings(base_config(dataset, **over))
            src = open_records(s.data_path, "train", s.task)
            builder = _classify.Classify(s, tf.zeros([2], tf.int64), 0, 1, src.parse, train)
            got.append(_block.eligible(builder, src.parse_spec, train) == want)
        s = settings(base_config(dataset, **{"data.task": "detection"}))
        assert not _block.eligible(_classify.Classify(s, tf.zeros([2], tf.int64), 0, 1,
                                                      src.parse, True), src.parse_spec, True)
    assert all(got), got
    with _block.forced(False):
        assert not _block.enabled()


# --------------------------------------------------------------- the op's write-out
@pytest.fixture
def write_outs(monkeypatch):
    """The `write_out` each block op call of a pipeline built meanwhile is given
    (None: the block stays uint8 and compose runs L3 + normalize)."""
    seen: list = []
    real = native_jpeg.decode_crop_resize_block

    def spy(*args, **kw):
        seen.append(args[9] if len(args) > 9 else kw.get("write_out"))
        return real(*args, **kw)

    monkeypatch.setattr(native_jpeg, "decode_crop_resize_block", spy)
    return seen


def _write_out_off(cfg) -> list:
    with _block.write_out(False):
        return _values(_build(cfg, True))


@pytest.mark.slow
def test_write_out_gated_ops_enable_rate_device(dataset, write_outs):
    """L3 + normalize in the block op's write-out = compose's bytes (the block path
    with the write-out off; compose = the per-element path: the tests above, whose
    float32 pipelines now take the write-out, normalize alone included):
    brightness p 0.5 (gated per row), contrast (its exact channel mean),
    enable_rate 0.5 (plain rows: normalize of the levels), a short last batch.
    pixel_stage device keeps uint8 (no write-out). uint8 write-outs:
    tests/native/test_decode_block.py (against the chain op)."""
    cfg = _imagenet(dataset, **{"augment.enable_rate": 0.5, "pipeline.batch_size": 10,
                                "augment.pixel": {"brightness": {"max_delta": 0.4, "p": 0.5},
                                                  "contrast": {"lower": 0.6, "upper": 1.4}},
                                "pipeline.drop_remainder": False})
    got = _values(_build(cfg, True))
    wo = [w for w in write_outs if w is not None]
    assert wo and wo[0].ops == ("brightness", "contrast") and wo[0].gated == (True, False)
    assert wo[0].float_out
    want = _write_out_off(cfg)
    assert len(got) == len(want) == 6 and got[0]["image"].dtype == np.float32
    for i, (x, y) in enumerate(zip(got, want)):
        for k in ("image", "label"):
            np.testing.assert_array_equal(x[k], y[k], err_msg=f"batch {i} {k}")
    write_outs.clear()
    ds = _build(_imagenet(dataset, **{"augment.pixel_stage": "device"}), True)
    assert ds.element_spec["image"].dtype == tf.uint8
    assert write_outs and all(w is None for w in write_outs)


_ISA_SCRIPT = r"""
import sys
import numpy as np
import tensorflow as tf
from tfpipe import sample_data
from tfpipe.native import jpeg


def run():
    photos = list(sample_data.source_photos().values())[:2]
    enc = tf.stack([tf.io.encode_jpeg(np.ascontiguousarray(p[:300, :300, :3]), quality=90)
                    for p in photos])
    draws = tf.constant(np.random.default_rng(0).uniform(0, 1, (2, 4, 10)), tf.float32)
    outs = []
    for float_out in (True, False):
        wo = jpeg.WriteOut(ops=("brightness", "contrast", "saturation"),
                           gated=(False, True, False), float_out=float_out,
                           mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                           params=tf.constant([[0.1, 1.3, 0.8], [-0.2, 0.7, 1.2]]),
                           apply=tf.constant([[True, True, True], [True, False, True]]),
                           enabled=tf.constant([True, False]))
        out, status, _ = jpeg.decode_crop_resize_block(enc, draws, [0, 0], [True, False],
                                                       (224, 224), (3 / 4, 4 / 3), write_out=wo)
        assert status.numpy().tolist() == [0, 0]
        outs.append(out.numpy())
    return outs


if __name__ == "__main__":
    np.savez(sys.argv[1], *run())
"""


def test_write_out_rows_are_isa_independent() -> None:
    """The write-out runs pixel.cc's chain (tests/native/test_pixel_isa.py: its AVX
    and SSE2 loops, the same bytes); here the fused rows themselves, float32 and
    uint8, 224x224 photos (the chain's pairwise mean at full size), with the
    kernels' default loops and with their baseline ones (`native.baseline_isa()`:
    the op's `isa` attr)."""
    from tfpipe import native

    namespace: dict = {}
    exec(compile(_ISA_SCRIPT, "isa_rows", "exec"), namespace)  # noqa: S102 - the rows script
    here = namespace["run"]()
    with native.baseline_isa():
        baseline = namespace["run"]()
    for got, want in zip(here, baseline):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)