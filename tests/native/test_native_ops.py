"""tfpipe.native: the C++ resize is bit-identical to the pure-TF path it replaces.

Oracle: `tf.image.resize(bilinear)` + `tf.round` + `tf.saturate_cast` (what
`resize_uint8` runs without the native op), on real photos from
`tfpipe.sample_data`. Tests that need the built library skip (with the reason, and never under CI=true)
only when it is unavailable; the fallback tests always run.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import native
from tfpipe.pipeline._decode import resize_uint8
from tfpipe import switches

from .conftest import needs

needs_native = needs(native.available(), "native op")


def reference(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    out = tf.image.resize(image, size, method="bilinear")
    return tf.saturate_cast(tf.round(out), tf.uint8).numpy()


@pytest.fixture(scope="module")
def photos() -> list[np.ndarray]:
    from tfpipe.sample_data import source_photos

    rgb = [np.asarray(p) for p in source_photos().values() if np.asarray(p).ndim == 3]
    return [p[..., :3] for p in rgb[:3]]


def cases(photo: np.ndarray) -> list[tuple[np.ndarray, tuple[int, int]]]:
    h, w = photo.shape[:2]
    crop = photo[h // 5: h // 5 + 97, w // 7: w // 7 + 131]  # odd sizes, odd offset
    gray = photo[..., :1]
    return [
        (photo, (224, 224)),            # downscale, aspect change
        (crop, (224, 224)),             # upscale
        (crop, (97, 131)),              # same size (identity)
        (crop, (33, 262)),              # down in y, up in x
        (gray, (57, 80)),               # 1 channel
        (crop[:1, :1], (5, 3)),         # 1x1 input
        (crop[:2, :2], (7, 7)),         # 2x2 input
        (crop[:2, :2], (1, 1)),         # to 1x1
        (crop[:1, :9], (4, 4)),         # single row
        (np.ascontiguousarray(np.concatenate([crop, crop[..., :1]], -1)), (50, 61)),  # 4 ch
    ]


@needs_native
def test_native_resize_bit_identical_to_tf(photos):
    worst = 0
    for photo in photos:
        for image, size in cases(photo):
            want = reference(image, size)
            got = native.resize_bilinear_u8(image, size).numpy()
            assert got.shape == want.shape == (size[0], size[1], image.shape[2])
            worst = max(worst, int(np.abs(got.astype(int) - want).max()))
    assert worst == 0, f"max |native - tf| = {worst}"


@needs_native
def test_native_flip_mirrors_the_resized_image(photos):
    image = photos[0][:150, :211]
    plain = native.resize_bilinear_u8(image, (64, 90)).numpy()
    flipped = native.resize_bilinear_u8(image, (64, 90), flip=True).numpy()
    np.testing.assert_array_equal(flipped, plain[:, ::-1])
    np.testing.assert_array_equal(
        flipped, tf.reverse(reference(image, (64, 90)), [1]).numpy())


@needs_native
def test_native_resize_rejects_bad_input():
    with pytest.raises(tf.errors.InvalidArgumentError, match="size must be positive"):
        native.resize_bilinear_u8(np.zeros((4, 4, 3), np.uint8), (0, 5))
    with pytest.raises(tf.errors.InvalidArgumentError, match="non-empty"):
        native.resize_bilinear_u8(np.zeros((0, 4, 3), np.uint8), (2, 2))


def _traced_ops(size: tuple[int, int]) -> set[str]:
    fn = tf.function(lambda x: resize_uint8(x, size))
    g = fn.get_concrete_function(tf.TensorSpec([None, None, 3], tf.uint8)).graph
    return {op.type for op in g.get_operations()}


@needs_native
def test_resize_uint8_uses_the_native_op_when_available():
    assert "TfpipeResizeBilinearU8" in _traced_ops((16, 16))


def test_env_var_forces_the_pure_tf_fallback(monkeypatch, photos):
    monkeypatch.setitem(switches.OVERRIDES, native.ENV, False)
    assert not native.available() and native.load() is None
    assert native.status() == {"active": False, "path": None,
                               "reason": "disabled by TFPIPE_NATIVE=0",
                               "detail": "disabled by TFPIPE_NATIVE=0 (pure-TF fallback)"}
    ops = _traced_ops((16, 16))
    assert "TfpipeResizeBilinearU8" not in ops and "ResizeBilinear" in ops
    image = photos[1][:80, :120]
    np.testing.assert_array_equal(resize_uint8(tf.constant(image), (50, 70)).numpy(),
                                  reference(image, (50, 70)))


def _no_library(monkeypatch, tmp_path, aot):
    """A process state where the AOT library is `aot` and the cache is empty."""
    import tfpipe.native.build as build

    monkeypatch.delitem(switches.OVERRIDES, native.ENV, raising=False)
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setattr(build, "package_library", lambda key: aot)
    monkeypatch.setitem(switches.OVERRIDES, build.CACHE_ENV, str(tmp_path / "cache"))


def test_missing_library_falls_back_with_one_warning(monkeypatch, tmp_path, caplog):
    import tfpipe.native.build as build

    _no_library(monkeypatch, tmp_path, tmp_path / "_tfpipe_ops-tf0.so")
    monkeypatch.setitem(switches.OVERRIDES, build.BUILD_ENV, False)
    with caplog.at_level("INFO", logger="tfpipe.native"):
        assert not native.available() and not native.available()
    records = [r for r in caplog.records if r.name == "tfpipe.native"]
    assert [r.levelname for r in records] == ["WARNING"], records
    assert "TFPIPE_NATIVE_BUILD=0" in records[0].getMessage()
    assert "pure-TF fallback" in records[0].getMessage()
    st = native.status()
    assert not st["active"] and st["path"] is None and "not built" in st["reason"]
    assert "TfpipeResizeBilinearU8" not in _traced_ops((8, 8))
    with pytest.raises(RuntimeError, match="unavailable"):
        native.resize_bilinear_u8(np.zeros((4, 4, 3), np.uint8), (2, 2))
    assert not (tmp_path / "cache").exists()  # nothing was built or even prepared


def test_corrupt_library_falls_back(monkeypatch, tmp_path):
    bad = tmp_path / "_tfpipe_ops-tf0.so"
    bad.write_bytes(b"not an ELF file")
    _no_library(monkeypatch, tmp_path, bad)
    assert not native.available()
    assert "failed to load" in native.status()["detail"]
    assert str(bad) in native.status()["reason"]


# ---------------------------------------------------------------------- pipeline


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> str:
    from tfpipe.sample_data import make_jpeg_bytes

    root = tmp_path_factory.mktemp("native-shards")
    jpegs = make_jpeg_bytes(24, seed=1)
    for s in range(2):
        with tf.io.TFRecordWriter(str(root / f"train-{s:05d}-of-00002.tfrecord")) as w:
            for i in range(s, len(jpegs), 2):
                feats = {
                    "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[jpegs[i]])),
                    "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[b"jpeg"])),
                    "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[i % 3])),
                }
                w.write(tf.train.Example(features=tf.train.Features(
                    feature=feats)).SerializeToString())
    return str(root / "train-*.tfrecord")


def _pipeline(glob: str, train: bool = True):
    from tfpipe.pipeline import build_pipeline

    cfg = {"seed": 5, "data": {"path": glob, "image_size": [40, 48], "num_classes": 3},
           "pipeline": {"batch_size": 8, "shuffle_buffer": 32, "num_parallel_calls": 4},
           "augment": {"geometry": {"random_resized_crop": {"scale": [0.08, 1.0]},
                                    "flip": {"horizontal": True, "p": 0.5}},
                       "pixel": {"brightness": {"max_delta": 0.4},
                                 "contrast": {"lower": 0.6, "upper": 1.4, "p": 0.7},
                                 "saturation": {"lower": 0.5, "upper": 1.5}}}}
    if not train:
        cfg["augment"] = {}
    return build_pipeline(cfg, keep_index=True)


def _run(ds) -> list[dict[str, np.ndarray]]:
    return [{k: v.numpy() for k, v in b.items()} for b in ds]


@needs_native
@pytest.mark.parametrize("train", [True, False])
def test_pipeline_output_identical_with_native_on_and_off(monkeypatch, shards, train):
    """The reproducibility contract: switching the native op only changes speed."""
    on = _pipeline(shards, train)
    monkeypatch.setitem(switches.OVERRIDES, native.ENV, False)
    off = _pipeline(shards, train)
    a, b = _run(on), _run(off)
    assert len(a) == len(b) == 3
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k], err_msg=k)


@needs_native
def test_pipeline_graph_with_native_op_has_no_stateful_op(shards):
    ds = _pipeline(shards)
    policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    g = tf.compat.v1.GraphDef()
    g.ParseFromString(ds._as_serialized_graph(external_state_policy=policy).numpy())  # noqa: SLF001
    ops = {n.op for n in g.node}
    for f in g.library.function:
        ops |= {n.op for n in f.node_def}
    assert "TfpipeResizeBilinearU8" in ops
    assert not sorted(o for o in ops if o.startswith(("Stateful", "Random")))
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get("TfpipeResizeBilinearU8")
    assert not op_def.is_stateful  # a pure function of its inputs, like ResizeBilinear


@needs_native
def test_benchmark_choices_reach_the_kernels_as_op_attributes():
    """The kernels read no environment variable: `baseline_isa()` and
    `unaligned_crop()` set the ops' `isa` / `aligned_crop` attrs when they are built,
    and nothing else does (the defaults: the widest loops, the aligned request)."""
    from tfpipe.native import jpeg

    def attrs(fn, *specs):
        graph = tf.function(fn).get_concrete_function(*specs).graph
        return {op.type: {k: op.get_attr(k) for k in ("isa", "aligned_crop")
                          if k in op.node_def.attr}
                for op in graph.get_operations() if op.type.startswith("Tfpipe")}

    def resize(x):
        return native.resize_bilinear_u8(x, (8, 8))

    def block(c):
        return jpeg.decode_crop_resize_block(c, tf.zeros([1, 4, 10]), [0], [False], (8, 8),
                                             (0.75, 4 / 3))[0]

    u8 = tf.TensorSpec([16, 16, 3], tf.uint8)
    s = tf.TensorSpec([1], tf.string)
    assert attrs(resize, u8) == {"TfpipeResizeBilinearU8": {"isa": b"native"}}
    assert attrs(block, s) == {"TfpipeDecodeCropResizeBlock": {"isa": b"native",
                                                               "aligned_crop": True}}
    with native.baseline_isa(), jpeg.unaligned_crop():
        assert attrs(resize, u8) == {"TfpipeResizeBilinearU8": {"isa": b"baseline"}}
        assert attrs(block, s) == {"TfpipeDecodeCropResizeBlock": {"isa": b"baseline",
                                                                   "aligned_crop": False}}
    assert attrs(resize, u8) == {"TfpipeResizeBilinearU8": {"isa": b"native"}}
