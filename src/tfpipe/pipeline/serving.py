"""The eval pipeline's preprocessing as plain graph functions, for graphs outside
`tf.data` (the serving signatures of `tfpipe.export`).

`EvalPreprocessing.image` is the very function the eval split's L1 traces
(classification: `_classify.eval_image`, centre-crop window, decoded alone for
JPEG, bilinear resize to uint8; segmentation: `_segment.eval_letterbox`, the
whole image decoded, scaled to fit and padded with 0, as `Segment` renders it) and `finish` is what its batch step
does after that (`pipeline.fast.normalizer` for float32 output, nothing for
uint8). Segmentation also gives each image's decoded size (`letterbox`) and its
`augment.letterbox_window`, from which serving maps the model's per-pixel answer
back to the request image. Detection: the whole image decoded and resized to
`data.image_size` (`resized`: `_detect_geometry.BoxGeometry.image` without draws,
what `Detect.process` runs on the eval split) and its decoded size, by which
serving scales the model's normalized boxes and keypoints to request pixels. With
`stock_ops=True` (the default) both are traced under `tfpipe.native.pure_tf()`,
so the graph holds only stock TensorFlow ops -- a SavedModel that TF Serving or
a process without tfpipe can load -- and, the native kernels being bit-identical
to their pure-TF twins, the same bits as the eval pipeline (tests/export: the
skew test compares them in a fresh process).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from tfpipe import augment, native
from tfpipe.errors import ConfigError
from tfpipe.pipeline import _classify, _segment
from tfpipe.pipeline._decode import decode_full
from tfpipe.pipeline._detect_geometry import BoxGeometry
from tfpipe.pipeline._settings import Settings, settings
from tfpipe.pipeline._tasks import TASKS, task_of
from tfpipe.pipeline.fast import normalizer


@dataclass(frozen=True)
class EvalPreprocessing:
    """Eval preprocessing of one config (classification, segmentation or detection)."""

    settings: Settings
    stock_ops: bool = True

    @property
    def image_size(self) -> tuple[int, int]:
        return self.settings.image_size

    @property
    def channels(self) -> int:
        return self.settings.channels

    @property
    def task(self) -> str:
        return self.settings.task

    @property
    def per_pixel(self) -> bool:
        """The task serves a class per pixel (segmentation: `letterbox`, export's
        class map) rather than one class distribution per image."""
        return self.serves == "class_map"

    @property
    def serves(self) -> str:
        """What export serves for the task (`_tasks.Task.serving`): "classes",
        "class_map" or "detections"."""
        return str(task_of(self.settings).serving)

    @property
    def dtype(self) -> tf.DType:
        """The model input's dtype: float32 (normalized) or uint8."""
        return tf.float32 if self.settings.output_dtype == "float32" else tf.uint8

    def _scope(self) -> Any:
        return native.pure_tf() if self.stock_ops else contextlib.nullcontext()

    def image(self, encoded: tf.Tensor, *, crop_in_decoder: bool = True) -> tf.Tensor:
        """One encoded image (scalar tf.string) -> uint8 [H, W, channels]: eval L1.

        `crop_in_decoder=False`: JPEGs decoded fully, then the same window sliced
        (graphs for TFLite, which cannot read a JPEG header); differs from the eval
        pipeline at the window's edges when chroma is subsampled."""
        if self.per_pixel:
            return self.letterbox(encoded)[0]
        if self.serves == "detections":
            return self.resized(encoded)[0]
        with self._scope():
            return _classify.eval_image(self.settings, encoded, crop_in_decoder)

    def letterbox(self, encoded: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Segmentation: one encoded image -> (uint8 [H, W, channels] letterboxed as the
        eval pipeline renders it, int32 [2] its decoded (height, width))."""
        with self._scope():
            return _segment.eval_letterbox(self.settings, encoded)

    def resized(self, encoded: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Detection: one encoded image -> (uint8 [H, W, channels], the whole image
        resized as the eval pipeline renders it, int32 [2] its decoded (height, width))."""
        with self._scope():
            decoded = decode_full(encoded, self.channels)
            # the eval split's own call (`Detect.process`: no draws -> the plain resize)
            image, _, size = BoxGeometry(self.settings, []).image(decoded, None)
            return image, tf.cast(size, tf.int32)

    def window(self, size: tf.Tensor) -> tf.Tensor:
        """int32 [4] (top, left, height, width): where an image of `size` lies in the
        model input (`augment.letterbox_window`, the window of `letterbox_matrix`)."""
        return augment.letterbox_window(size, self.image_size)

    def finish(self, images: tf.Tensor) -> tf.Tensor:
        """uint8 batch [B, H, W, C] from `image` -> the model input the eval pipeline
        yields (float32 normalized by data.normalize, or the uint8 batch itself)."""
        if self.settings.output_dtype != "float32":
            return images
        with self._scope():
            return normalizer(self.settings.mean, self.settings.std)(images)


def eval_preprocessing(config: Any, *, stock_ops: bool = True) -> EvalPreprocessing:
    """The eval preprocessing of `config` (anything `build_pipeline` accepts)."""
    s = settings(config)
    if not task_of(s).serving:
        served = " or ".join(f"'{t.name}'" for t in TASKS.values() if t.serving)
        raise ConfigError(f"data.task: serving preprocessing is built for {served} "
                          f"only, got {s.task!r}")
    return EvalPreprocessing(s, stock_ops)


def class_names(config: Any) -> list[str]:
    """Class names from the manifest of `data.path` (index order; a TFDS-prepared
    directory's ClassLabel names); [] when the path is neither or lists none."""
    s = settings(config)
    if not s.data_path or not os.path.isdir(s.data_path):
        return []
    from tfpipe.records import MANIFEST_NAME, is_tfds_dir, load_manifest

    if not os.path.exists(os.path.join(s.data_path, MANIFEST_NAME)) \
            and not is_tfds_dir(s.data_path):
        return []
    return list(load_manifest(s.data_path).class_names)
