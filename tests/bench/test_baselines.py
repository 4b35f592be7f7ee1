"""Reference pipelines: NumPy augmentation against OpenCV, same shapes as tfpipe."""

from __future__ import annotations

import cv2
import numpy as np
import tensorflow as tf

from tfpipe.bench import baselines as B


def test_numpy_augment_without_randomness_is_resize_and_normalize() -> None:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (50, 70, 3), dtype=np.uint8)
    spec = B.NaiveSpec(image_size=(24, 32), scale=None, flip_p=0.0, brightness=None,
                       contrast=None)
    out = B.numpy_augment(img, spec, np.random.default_rng(1))
    want = (cv2.resize(img, (32, 24), interpolation=cv2.INTER_LINEAR) / 255.0
            - np.array(B.IMAGENET_MEAN)) / np.array(B.IMAGENET_STD)
    assert out.dtype == np.float32 and out.shape == (24, 32, 3)
    np.testing.assert_allclose(out, want, atol=1e-5)
    spec8 = B.NaiveSpec(image_size=(24, 32), scale=None, flip_p=1.0, brightness=None,
                        contrast=None, output_dtype="uint8")
    out8 = B.numpy_augment(img, spec8, np.random.default_rng(1))
    np.testing.assert_array_equal(
        out8, cv2.resize(img, (32, 24), interpolation=cv2.INTER_LINEAR)[:, ::-1])


def test_rrc_window_inside_image_with_scale_and_ratio() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        y, x, ch, cw = B.rrc_window(rng, 90, 120, (0.2, 0.9), (0.75, 4 / 3))
        assert 0 <= y and y + ch <= 90 and 0 <= x and x + cw <= 120 and ch > 0 and cw > 0
        area = ch * cw / (90 * 120)
        if (ch, cw) != (90, 120):  # not the fallback
            assert 0.18 <= area <= 0.92 and 0.7 <= cw / ch <= 1.4


def test_naive_matches_tfpipe_shapes_and_dtypes(tiny_config) -> None:
    from tfpipe import build_pipeline

    ours = build_pipeline(tiny_config).element_spec
    naive, spec = B.naive_from_config(tiny_config)
    theirs = next(iter(naive))
    assert spec.image_size == (32, 32) and spec.saturation == (0.6, 1.4)
    assert sorted(ours) == sorted(theirs)
    for k in ours:
        assert ours[k].shape == theirs[k].shape and ours[k].dtype == theirs[k].dtype, k


def test_naive_one_hot_when_mixup_on(tiny_config) -> None:
    from tfpipe.bench._build import resolve_config

    cfg = resolve_config(tiny_config, ["augment.batch.mixup.enabled=true"])
    naive, spec = B.naive_from_config(cfg)
    assert spec.one_hot and spec.not_reproduced == ("mixup",)
    y = next(iter(naive))["label"]
    assert y.shape == (8, 4) and y.dtype == tf.float32
    np.testing.assert_array_equal(tf.reduce_sum(y, axis=1), np.ones(8))


def test_side_by_side_variants_shapes(tiny_data: str) -> None:
    files, _ = B.shard_files(tiny_data)
    for fn in (B.cv2_py_function, B.albumentations_numpy_function, B.tf_image_per_sample,
               B.keras_layers):
        b = next(iter(fn(files, batch_size=4, size=24)))
        assert b["image"].shape == (4, 24, 24, 3) and b["image"].dtype == tf.float32, fn
        assert b["label"].dtype == tf.int64


def test_decode_only_decodes_the_real_sizes(tiny_data: str) -> None:
    from PIL import Image
    import io

    files, _ = B.shard_files(tiny_data)
    pairs = list(B.read_records(files).take(4).as_numpy_iterator())
    want = [Image.open(io.BytesIO(data)).size[::-1] for data, _ in pairs]  # (h, w)
    summary = next(iter(B.decode_only(files, batch_size=4)))["image"].numpy()
    assert [tuple(s[:2]) for s in summary] == want and (summary[:, 2] == 3).all()
    cropped = next(iter(B.decode_only(files, batch_size=4, crop=True)))["image"].numpy()
    assert all(c[0] <= h and c[1] <= w for c, (h, w) in zip(cropped, want))


def test_decode_only_like_runs_with_tfpipe_threading(tiny_config, tiny_data: str) -> None:
    """The fair ceiling: every record tfpipe reads, decoded in full, under the
    pipeline's own tf.data options (private thread pool, determinism)."""
    from PIL import Image
    import io

    from tfpipe.pipeline import options, settings

    ds = B.decode_only_like(tiny_config, num_parallel_calls=3)
    want = options(settings(tiny_config))
    got = ds.options()
    assert got.threading.private_threadpool_size == want.threading.private_threadpool_size > 0
    assert got.deterministic == want.deterministic
    assert got.autotune.ram_budget == want.autotune.ram_budget
    files, _ = B.shard_files(tiny_data)
    sizes = sorted(Image.open(io.BytesIO(d)).size[::-1]
                   for d, _ in B.read_records(files).as_numpy_iterator())
    batches = [b["image"].numpy() for b in ds]
    assert [len(b) for b in batches] == [8, 8, 8, 8]  # 32 records, batch_size 8
    assert sorted(tuple(r[:2]) for b in batches for r in b) == sizes
