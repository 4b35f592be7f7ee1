"""Reference pipelines to compare tfpipe against, reading the same shards.

These are deliberately written the common ways, slow ones included: Python
(OpenCV / PIL / albumentations) inside `tf.py_function` / `tf.numpy_function`,
per-sample `tf.image`, Keras preprocessing layers. They are the only place in
tfpipe where Python runs inside a `tf.data` map, on purpose. They read the
records with a plain `tf.data.TFRecordDataset` (no tfpipe reader).

The augmentation is the imagenet one: random-resized crop, horizontal flip,
brightness/contrast (saturation when configured), normalize with mean/std. For a
segmentation config the naive pipeline also decodes each record's mask and gives
it the image's crop (nearest) and flip: batches are {"image", "mask"}.
"""

from __future__ import annotations

import glob
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfpipe.config import CROP_RATIO, CROP_SCALE

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class NaiveSpec:
    """The subset of a tfpipe config that the reference pipelines reproduce."""

    image_size: tuple[int, int] = (224, 224)
    channels: int = 3
    batch_size: int = 64
    drop_remainder: bool = True
    shuffle_buffer: int = 1000
    seed: int = 0
    scale: tuple[float, float] | None = CROP_SCALE     # None: no random-resized crop
    ratio: tuple[float, float] = CROP_RATIO
    flip_p: float = 0.5
    brightness: float | None = 0.4                     # max_delta on the [0,1] scale
    contrast: tuple[float, float] | None = (0.6, 1.4)
    saturation: tuple[float, float] | None = None
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD
    output_dtype: str = "float32"                       # float32 normalized | uint8
    one_hot: bool = False
    num_classes: int | None = None
    not_reproduced: tuple[str, ...] = field(default=())  # config ops the baseline skips
    masks: bool = False                                 # segmentation: carry the mask

    @classmethod
    def from_config(cls, cfg: Any, split: str = "train") -> NaiveSpec:
        """The fields of a tfpipe config (Config model or plain nested dict)."""
        from tfpipe.pipeline import settings, task_of

        s = settings(cfg)
        train = split == "train"
        geometry = {op.name: op for op in s.active("geometry")} if train else {}
        pixel = {op.name: op for op in s.active("pixel")} if train else {}
        batch_ops = {op.name: op for op in s.active("batch")} if train else {}
        rrc = geometry.pop("random_resized_crop", None)
        flip = geometry.pop("flip", None)
        bright = pixel.pop("brightness", None)
        contrast = pixel.pop("contrast", None)
        sat = pixel.pop("saturation", None)
        skipped = tuple(list(geometry) + list(pixel) + list(batch_ops))
        flip_h = flip is not None and bool(flip.params.get("horizontal", True))
        return cls(
            image_size=s.image_size, channels=s.channels, batch_size=s.batch_size,
            drop_remainder=s.drop_remainder if train else False,
            shuffle_buffer=s.shuffle_buffer if train else 0, seed=s.seed,
            scale=tuple(rrc.params.get("scale", CROP_SCALE)) if rrc else None,
            ratio=tuple(rrc.params.get("ratio", CROP_RATIO)) if rrc else CROP_RATIO,
            flip_p=flip.p if flip_h else 0.0,
            brightness=float(bright.params.get("max_delta", 0.4)) if bright else None,
            contrast=(float(contrast.params.get("lower", 0.6)),
                      float(contrast.params.get("upper", 1.4))) if contrast else None,
            saturation=(float(sat.params.get("lower", 0.6)),
                        float(sat.params.get("upper", 1.4))) if sat else None,
            mean=s.mean, std=s.std, output_dtype=s.output_dtype,
            one_hot=s.one_hot, num_classes=s.num_classes, not_reproduced=skipped,
            masks="mask" in task_of(s).targets(s, 1),  # (a class mask per image)
        )


# --------------------------------------------------------------------------- reading

def shard_files(path: str, split: str = "train") -> tuple[list[str], str | None]:
    """The shard files of `split` under a converted dataset dir (or a glob), and compression."""
    try:
        from tfpipe.records import open_source

        source = open_source(path, split=split)
        return list(source.files), source.compression
    except ImportError:  # records package not importable: plain glob
        pass
    pattern = os.path.join(path, f"{split}-*.tfrecord*") if os.path.isdir(path) else path
    files = sorted(glob.glob(pattern))
    if not files:
        raise FileNotFoundError(f"no shards match {pattern}")
    return files, "GZIP" if files[0].endswith(".gz") else None


def read_records(files: Sequence[str], *, compression: str | None = None,
                 shuffle_buffer: int = 0, seed: int = 0, masks: bool = False) -> Any:
    """(encoded image bytes, int64 label) pairs, the plain tf.data way; `masks`:
    (encoded image bytes, encoded mask PNG bytes)."""
    import tensorflow as tf

    comp = {None: "", "gzip": "GZIP", "GZIP": "GZIP"}.get(compression, compression)
    ds = tf.data.TFRecordDataset(list(files), compression_type=comp)
    if shuffle_buffer > 1:
        ds = ds.shuffle(shuffle_buffer, seed=seed)
    second = ("image/segmentation/class/encoded" if masks else "image/class/label")
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            second: (tf.io.FixedLenFeature([], tf.string) if masks else
                     tf.io.FixedLenFeature([], tf.int64, default_value=-1))}

    def parse(record: Any) -> tuple[Any, Any]:
        ex = tf.io.parse_single_example(record, spec)
        return ex["image/encoded"], ex[second]

    return ds.map(parse)


# --------------------------------------------------------------------------- NumPy augmentation

def rrc_window(rng: np.random.Generator, h: int, w: int, scale: Sequence[float],
               ratio: Sequence[float]) -> tuple[int, int, int, int]:
    """Random-resized-crop window (y, x, ch, cw), the torchvision algorithm."""
    area = h * w
    log_r = np.log(ratio[0]), np.log(ratio[1])
    for _ in range(10):
        target = area * rng.uniform(scale[0], scale[1])
        aspect = np.exp(rng.uniform(*log_r))
        cw = int(round(np.sqrt(target * aspect)))
        ch = int(round(np.sqrt(target / aspect)))
        if 0 < cw <= w and 0 < ch <= h:
            return int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1)), ch, cw
    # fallback: central crop at the clamped aspect
    in_ratio = w / h
    if in_ratio < ratio[0]:
        cw, ch = w, int(round(w / ratio[0]))
    elif in_ratio > ratio[1]:
        ch, cw = h, int(round(h * ratio[1]))
    else:
        cw, ch = w, h
    return (h - ch) // 2, (w - cw) // 2, ch, cw


def _resize(crop: np.ndarray, size: tuple[int, int], backend: str, nearest: bool = False
            ) -> np.ndarray:
    out_h, out_w = size
    if backend == "cv2":
        import cv2

        img = cv2.resize(crop, (out_w, out_h),
                         interpolation=cv2.INTER_NEAREST if nearest else cv2.INTER_LINEAR)
    else:
        from PIL import Image

        pil = Image.fromarray(crop.squeeze(-1) if crop.shape[-1] == 1 else crop)
        img = np.asarray(pil.resize((out_w, out_h),
                                    Image.NEAREST if nearest else Image.BILINEAR))
    return img[..., None] if img.ndim == 2 else img


def numpy_augment(image: np.ndarray, spec: NaiveSpec, rng: np.random.Generator,
                  backend: str = "cv2", mask: np.ndarray | None = None) -> Any:
    """uint8 HxWxC -> augmented float32 (normalized) or uint8 image of spec.image_size;
    with `mask` ([H, W, 1] classes): (image, uint8 mask with the same crop, resized
    nearest, and flip)."""
    h, w = image.shape[:2]
    if spec.scale is not None:
        y, x, ch, cw = rrc_window(rng, h, w, spec.scale, spec.ratio)
    else:
        y, x, ch, cw = 0, 0, h, w
    img = _resize(image[y:y + ch, x:x + cw], spec.image_size, backend)
    if mask is not None:
        mask = _resize(mask[y:y + ch, x:x + cw], spec.image_size, backend, nearest=True)
    if spec.flip_p > 0 and rng.random() < spec.flip_p:
        img = img[:, ::-1]
        mask = mask[:, ::-1] if mask is not None else None
    x01 = img.astype(np.float32) / 255.0
    if spec.brightness is not None:
        x01 = x01 + rng.uniform(-spec.brightness, spec.brightness)
    if spec.contrast is not None:
        f = rng.uniform(*spec.contrast)
        m = x01.mean(axis=(0, 1), keepdims=True)
        x01 = (x01 - m) * f + m
    if spec.saturation is not None and x01.shape[-1] == 3:
        f = rng.uniform(*spec.saturation)
        gray = x01 @ np.array([0.299, 0.587, 0.114], np.float32)
        x01 = gray[..., None] + (x01 - gray[..., None]) * f
    x01 = np.clip(x01, 0.0, 1.0)
    if spec.output_dtype == "uint8":
        out = np.round(x01 * 255.0).astype(np.uint8)
    else:
        mean = np.asarray(spec.mean, np.float32)
        std = np.asarray(spec.std, np.float32)
        out = ((x01 - mean) / std).astype(np.float32)
    return out if mask is None else (out, np.ascontiguousarray(mask))


def decode_numpy(data: bytes, channels: int = 3, backend: str = "cv2") -> np.ndarray:
    if backend == "cv2":
        import cv2

        flag = cv2.IMREAD_COLOR if channels == 3 else cv2.IMREAD_GRAYSCALE
        img = cv2.imdecode(np.frombuffer(data, np.uint8), flag)
        if img is None:
            raise ValueError("cv2.imdecode could not decode the image bytes")
        if channels == 3:
            img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        return img if img.ndim == 3 else img[..., None]
    from PIL import Image

    pil = Image.open(io.BytesIO(data)).convert("RGB" if channels == 3 else "L")
    img = np.asarray(pil)
    return img if img.ndim == 3 else img[..., None]


# --------------------------------------------------------------------------- pipelines

def _finish(ds: Any, spec: NaiveSpec) -> Any:
    import tensorflow as tf

    if spec.one_hot:
        if not spec.num_classes:
            raise ValueError("one-hot labels need num_classes")
        n = spec.num_classes
        ds = ds.map(lambda im, y: (im, tf.one_hot(y, n, dtype=tf.float32)))
    ds = ds.batch(spec.batch_size, drop_remainder=spec.drop_remainder)
    second = "mask" if spec.masks else "label"
    return ds.map(lambda im, y: {"image": im, second: y}).prefetch(tf.data.AUTOTUNE)


def naive_pipeline(files: Sequence[str], spec: NaiveSpec, *, compression: str | None = None,
                   backend: str = "cv2", num_parallel_calls: int = 8) -> Any:
    """Decode + augment in Python (OpenCV or PIL) inside `tf.py_function`.

    The way many training scripts do it. Each sample's random draws come from
    `np.random.default_rng((seed, index))`, so the baseline is repeatable too.
    """
    import tensorflow as tf

    h, w = spec.image_size
    out_dtype = tf.uint8 if spec.output_dtype == "uint8" else tf.float32

    def py_augment(index: Any, data: Any) -> np.ndarray:
        rng = np.random.default_rng((spec.seed, int(index.numpy())))
        img = decode_numpy(data.numpy(), spec.channels, backend)
        return numpy_augment(img, spec, rng, backend)

    def py_augment_mask(index: Any, data: Any, mask: Any) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng((spec.seed, int(index.numpy())))
        img = decode_numpy(data.numpy(), spec.channels, backend)
        return numpy_augment(img, spec, rng, backend, decode_numpy(mask.numpy(), 1, backend))

    def mapper(index: Any, pair: Any) -> tuple[Any, Any]:
        data, label = pair
        if spec.masks:  # `label` is the encoded mask: it follows the image's crop and flip
            image, mask = tf.py_function(py_augment_mask, [index, data, label],
                                         (out_dtype, tf.uint8))
            image.set_shape([h, w, spec.channels])
            mask.set_shape([h, w, 1])
            return image, tf.cast(mask, tf.int32)
        image = tf.py_function(py_augment, [index, data], out_dtype)
        image.set_shape([h, w, spec.channels])
        return image, label

    ds = read_records(files, compression=compression, shuffle_buffer=spec.shuffle_buffer,
                      seed=spec.seed, masks=spec.masks).enumerate()
    ds = ds.map(mapper, num_parallel_calls=num_parallel_calls)
    return _finish(ds, spec)


def naive_from_config(config: Any, overrides: Sequence[str] = (), split: str = "train",
                      backend: str = "cv2") -> tuple[Any, NaiveSpec]:
    """The `--baseline naive` pipeline for a tfpipe config, reading the same shards."""
    from tfpipe.bench._build import resolve_config

    cfg = resolve_config(config, overrides)
    files, compression = shard_files(_data_path(cfg), split)
    spec = NaiveSpec.from_config(cfg, split)
    if spec.one_hot and not spec.num_classes:
        spec = _with_num_classes(spec, cfg, split)
    return naive_pipeline(files, spec, compression=compression, backend=backend), spec


def _data_path(cfg: Any) -> str:
    from tfpipe.pipeline import settings

    path = settings(cfg).data_path
    if not path:
        raise ValueError("data.path is not set: give the converted dataset, e.g. --set data.path=DIR")
    return path


def _with_num_classes(spec: NaiveSpec, cfg: Any, split: str) -> NaiveSpec:
    import dataclasses

    from tfpipe.records import open_source

    manifest = open_source(_data_path(cfg), split=split).manifest
    n = len(getattr(manifest, "class_names", None) or []) if manifest is not None else 0
    if not n:
        raise ValueError("one-hot labels need data.num_classes (no class names in the manifest)")
    return dataclasses.replace(spec, num_classes=n)


# --------------------------------------------------------------------------- side-by-side variants
# Used by benchmarks/pipeline_bench.py: each takes the shard files and returns a
# dataset of batches (the decode-only variants: batches of small summaries, so
# that what is timed is the decode itself).

def _imagenet_spec(batch_size: int, size: int, seed: int) -> NaiveSpec:
    return NaiveSpec(image_size=(size, size), batch_size=batch_size, seed=seed,
                     shuffle_buffer=0)


def cv2_py_function(files: Sequence[str], batch_size: int = 64, size: int = 224, seed: int = 0,
                    num_parallel_calls: int = 8) -> Any:
    return naive_pipeline(files, _imagenet_spec(batch_size, size, seed), backend="cv2",
                          num_parallel_calls=num_parallel_calls)


def albumentations_numpy_function(files: Sequence[str], batch_size: int = 64, size: int = 224,
                                  seed: int = 0, num_parallel_calls: int = 8) -> Any:
    import albumentations as A
    import tensorflow as tf

    transform = A.Compose([
        A.RandomResizedCrop(size=(size, size), scale=CROP_SCALE, ratio=CROP_RATIO),
        A.HorizontalFlip(p=0.5),
        A.RandomBrightnessContrast(brightness_limit=0.4, contrast_limit=0.4, p=1.0),
        A.Normalize(mean=IMAGENET_MEAN, std=IMAGENET_STD),
    ], seed=seed)

    def np_augment(data: bytes) -> np.ndarray:
        img = decode_numpy(data, 3, "cv2")
        return transform(image=img)["image"].astype(np.float32)

    def mapper(data: Any, label: Any) -> tuple[Any, Any]:
        image = tf.numpy_function(np_augment, [data], tf.float32)
        image.set_shape([size, size, 3])
        return image, label

    ds = read_records(files).map(mapper, num_parallel_calls=num_parallel_calls)
    return _finish(ds, _imagenet_spec(batch_size, size, seed))


def _rrc_box(data: Any, seed: Any) -> tuple[Any, Any]:
    import tensorflow as tf

    shape = tf.image.extract_jpeg_shape(data)
    begin, crop_size, _ = tf.image.stateless_sample_distorted_bounding_box(
        shape, tf.zeros([1, 0, 4], tf.float32), seed=seed, area_range=CROP_SCALE,
        aspect_ratio_range=CROP_RATIO, min_object_covered=0.0, max_attempts=10,
        use_image_if_no_bounding_boxes=True)
    return begin, crop_size


def tf_image_per_sample(files: Sequence[str], batch_size: int = 64, size: int = 224,
                        seed: int = 0, num_parallel_calls: Any = None,
                        decode_and_crop: bool = False) -> Any:
    """The straightforward graph version: per-sample tf.image ops (stateless)."""
    import tensorflow as tf

    npc = num_parallel_calls or tf.data.AUTOTUNE
    mean = tf.constant(IMAGENET_MEAN, tf.float32)
    std = tf.constant(IMAGENET_STD, tf.float32)

    def mapper(index: Any, pair: Any) -> tuple[Any, Any]:
        data, label = pair
        s = tf.stack([tf.cast(seed, tf.int64), index])
        seeds = tf.random.experimental.stateless_split(s, 4)
        begin, crop_size = _rrc_box(data, seeds[0])
        if decode_and_crop:
            window = tf.stack([begin[0], begin[1], crop_size[0], crop_size[1]])
            img = tf.io.decode_and_crop_jpeg(data, window, channels=3)
        else:
            img = tf.slice(tf.io.decode_jpeg(data, channels=3), begin, crop_size)
        img = tf.image.resize(img, [size, size]) / 255.0
        img = tf.image.stateless_random_flip_left_right(img, seeds[1])
        img = tf.image.stateless_random_brightness(img, 0.4, seeds[2])
        img = tf.image.stateless_random_contrast(img, 0.6, 1.4, seeds[3])
        img = (tf.clip_by_value(img, 0.0, 1.0) - mean) / std
        return img, label

    ds = read_records(files).enumerate().map(mapper, num_parallel_calls=npc)
    return _finish(ds, _imagenet_spec(batch_size, size, seed))


def keras_layers(files: Sequence[str], batch_size: int = 64, size: int = 224, seed: int = 0,
                 num_parallel_calls: Any = None) -> Any:
    """Keras preprocessing layers per sample. Keras has no random-resized-crop layer:
    resize to 1.15x the output, then RandomCrop (the usual substitute)."""
    import keras
    import tensorflow as tf

    npc = num_parallel_calls or tf.data.AUTOTUNE
    big = int(round(size * 1.15))
    layers = keras.Sequential([
        keras.layers.Resizing(big, big),
        keras.layers.RandomCrop(size, size, seed=seed),
        keras.layers.Rescaling(1.0 / 255),
        keras.layers.RandomFlip("horizontal", seed=seed),
        keras.layers.RandomBrightness(0.4, value_range=(0.0, 1.0), seed=seed),
        keras.layers.RandomContrast(0.4, seed=seed),
        keras.layers.Normalization(mean=list(IMAGENET_MEAN),
                                   variance=[s * s for s in IMAGENET_STD]),
    ])

    def mapper(data: Any, label: Any) -> tuple[Any, Any]:
        img = tf.cast(tf.io.decode_jpeg(data, channels=3), tf.float32)
        return layers(img, training=True), label

    ds = read_records(files).map(mapper, num_parallel_calls=npc)
    return _finish(ds, _imagenet_spec(batch_size, size, seed))


def decode_only(files: Sequence[str], batch_size: int = 64, size: int = 224, seed: int = 0,
                num_parallel_calls: Any = None, crop: bool = False, *, records: Any = None,
                deterministic: bool | None = None, options: Any = None,
                prefetch: Any = None) -> Any:
    """Full `decode_jpeg` (or `decode_and_crop_jpeg` of an RRC window) and nothing else.

    Decoded images differ in size, so each map emits a tiny summary (shape and a
    sum over a strided sample of pixels: a full sum would add a pass over the
    image). The summary depends on the decoded pixels, so the decode cannot be
    pruned away.

    `records` (a dataset of serialized Examples) replaces the plain sequential
    read of `files`; they are then parsed inside the parallel map, as tfpipe
    does. `deterministic`, `options` (`tf.data.Options`) and `prefetch` set the
    map's ordering, the dataset's threading and the prefetch depth:
    `decode_only_like` passes tfpipe's own.
    """
    import tensorflow as tf

    npc = num_parallel_calls or tf.data.AUTOTUNE

    def mapper(index: Any, pair: Any) -> tuple[Any, Any]:
        data, label = pair
        if crop:
            begin, crop_size = _rrc_box(data, tf.stack([tf.cast(seed, tf.int64), index]))
            window = tf.stack([begin[0], begin[1], crop_size[0], crop_size[1]])
            img = tf.io.decode_and_crop_jpeg(data, window, channels=3)
        else:
            img = tf.io.decode_jpeg(data, channels=3)
        summary = tf.reduce_sum(tf.cast(img[::16, ::16], tf.int32))
        return tf.concat([tf.shape(img), [summary]], 0), label

    if records is None:
        ds = read_records(files).enumerate().map(mapper, num_parallel_calls=npc,
                                                 deterministic=deterministic)
    else:
        spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
                "image/class/label": tf.io.FixedLenFeature([], tf.int64, default_value=-1)}

        def parse_and_decode(index: Any, record: Any) -> tuple[Any, Any]:
            ex = tf.io.parse_single_example(record, spec)
            return mapper(index, (ex["image/encoded"], ex["image/class/label"]))

        ds = records.enumerate().map(parse_and_decode, num_parallel_calls=npc,
                                     deterministic=deterministic)
    ds = ds.batch(batch_size, drop_remainder=True).map(lambda s, y: {"image": s, "label": y})
    if options is not None:
        ds = ds.with_options(options)
    return ds.prefetch(tf.data.AUTOTUNE if prefetch is None else prefetch)


def tfpipe_records(config: Any, split: str = "train") -> Any:
    """Serialized records exactly as tfpipe's pipeline reads them: the `read` stage of
    `tfpipe.pipeline.build_stages` (the same shards, worker split and interleave),
    reduced to the serialized string of each element."""
    import tensorflow as tf

    from tfpipe.pipeline import build_stages

    read = dict(build_stages(config, split=split, until="read"))["read"]

    def serialized(*element: Any) -> Any:
        strings = [t for t in tf.nest.flatten(element) if t.dtype == tf.string]
        return strings[-1]

    return read.map(serialized)


def decode_only_like(config: Any, num_parallel_calls: int, *, crop: bool = False,
                     split: str = "train") -> Any:
    """The decode-only ceiling with tfpipe's parallelism and threading: tfpipe's own
    read stage (`tfpipe_records`), parse + decode in one map with
    `num_parallel_calls` (pass the pipeline's per-sample map parallelism) and the
    config's `deterministic`, the pipeline's `tf.data.Options`
    (`tfpipe.pipeline.options`: private thread pool, autotune RAM budget) and its
    prefetch depth. Batches of `pipeline.batch_size`; no shuffle, no augmentation."""
    import tensorflow as tf

    from tfpipe.pipeline import options, settings

    s = settings(config)
    prefetch = tf.data.AUTOTUNE if s.prefetch < 0 else s.prefetch
    return decode_only([], s.batch_size, s.image_size[0], s.seed, num_parallel_calls, crop,
                       records=tfpipe_records(config, split), deterministic=s.deterministic,
                       options=options(s), prefetch=prefetch)
