"""Serving signatures of a segmentation model (docs/serving.md "Segmentation").

    serving_default(image_bytes: tf.string [None])
        -> class_map int32 [None, h_max, w_max]: each request image's classes at its
                own size (the batch padded to its largest image with -1),
           image_size int32 [None, 2]: each image's (height, width): crop
                class_map[i, :height, :width],
           window int32 [None, 4]: (top, left, height, width) of the image inside
                the model input (`augment.letterbox_window`),
           scores float32 [None, H, W, K]: per-pixel class probabilities at the
                model's size (softmax of logits, or the model's own probabilities),
           model_class_map int32 [None, H, W]: argmax of the model's output there
    preprocess(image_bytes) -> image (the model input), image_size, window
    predict_preprocessed(image) -> scores, model_class_map

The model input is the eval pipeline's (`pipeline.serving.EvalPreprocessing`: the
letterbox of `_segment.Segment`, bit for bit). Mapping back: request pixel (i, j)
takes the model's class at the nearest model pixel of its centre under the
letterbox matrix M = `augment.letterbox_matrix(size, image_size)`, i.e. the argmax
map warped nearest through M^-1 -- how the eval pipeline renders a label mask,
run backwards. M only scales and shifts by the integer window (top, left, nh, nw),
so that nearest pixel is computed exactly in integers:
row = top + floor((2i + 1) nh / 2h), column = left + floor((2j + 1) nw / 2w)
(= round half up of M's (i + 0.5) nh / h - 0.5 + top); no float rounding decides a
pixel, and no [h, w, K] float buffer is made at the request's size.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe.export import _inputs
from tfpipe.pipeline.serving import EvalPreprocessing

INPUT_BYTES = "image_bytes"
INPUT_IMAGE = "image"
PAD_CLASS = -1  # class_map beyond an image's own size (not a class, not ignore_label)
OUTPUT_NAMES = ("class_map", "image_size", "window", "scores", "model_class_map")


def output_problem(model: Any, pre: EvalPreprocessing) -> str | None:
    """Why `model` cannot serve segmentation at `pre`'s size (None: it can): it must
    return one [batch, H, W, K] tensor, H, W = data.image_size, K >= 2 (and K =
    data.num_classes when set). Traced, not run."""
    h, w = pre.image_size
    spec = tf.TensorSpec([None, h, w, pre.channels], pre.dtype)
    y = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec)
    y = y.structured_outputs
    if isinstance(y, (dict, list, tuple)):
        return f"the model must return one [batch, {h}, {w}, num_classes] tensor, got " \
               f"{type(y).__name__}"
    shape = y.shape.as_list()
    if len(shape) != 4 or shape[1:3] != [h, w] or shape[3] is None:
        return (f"a segmentation model must return per-pixel scores [batch, {h}, {w}, "
                f"num_classes] at data.image_size, got {y.shape}; add the upsampling to "
                f"the model (e.g. a Resizing or UpSampling2D layer) before exporting")
    k, want = shape[3], pre.settings.num_classes
    if k < 2:
        return (f"the model returns {k} channel per pixel; serving takes the argmax of "
                f"num_classes >= 2 scores (end a binary model in 2 classes)")
    if want is not None and k != want:
        return f"the model returns {k} classes per pixel, data.num_classes is {want}"
    return None


def class_map_at_size(model_map: tf.Tensor, size: tf.Tensor, window: tf.Tensor,
                      out_size: tf.Tensor) -> tf.Tensor:
    """int32 [H, W] classes at the model's size -> [out_size] with the image of `size`
    (h, w) filled by its own classes (module docstring: nearest through the
    inverse letterbox), the rest PAD_CLASS."""
    size, window = tf.cast(size, tf.int64), tf.cast(window, tf.int64)

    def source(n: tf.Tensor, start: tf.Tensor, length: tf.Tensor) -> tf.Tensor:
        i = tf.range(n, dtype=tf.int64)
        return start + tf.math.floordiv((2 * i + 1) * length, 2 * n)

    rows = source(size[0], window[0], window[2])
    cols = source(size[1], window[1], window[3])
    out = tf.gather(tf.gather(model_map, rows, axis=0), cols, axis=1)
    pad = tf.cast(out_size, tf.int64) - size
    return tf.pad(out, [[0, pad[0]], [0, pad[1]]], constant_values=PAD_CLASS)


class SegmentServingModule(tf.Module):
    """The three segmentation signatures over one model (tf.saved_model.save)."""

    def __init__(self, model: Any, pre: EvalPreprocessing, outputs_are: str) -> None:
        super().__init__(name="tfpipe_segment_serving")
        self.model = model
        self._pre = pre
        h, w = pre.image_size
        self._image_spec = tf.TensorSpec([None, h, w, pre.channels], pre.dtype,
                                         name=INPUT_IMAGE)
        self._softmax = outputs_are == "logits"
        bytes_spec = tf.TensorSpec([None], tf.string, name=INPUT_BYTES)
        self.preprocess = tf.function(self._preprocess, input_signature=[bytes_spec])
        self.predict_preprocessed = tf.function(self._predict, input_signature=[self._image_spec])
        self.serving_default = tf.function(self._serve, input_signature=[bytes_spec])

    def _model_input(self, image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
        # on the CPU, as the classification signature (ServingModule._model_input):
        # the eval pipeline's kernels, the same bits
        pre = self._pre
        with tf.device("/device:CPU:0"):
            image, sizes = _inputs.render_requests(pre, image_bytes, pre.letterbox)
            windows = tf.map_fn(pre.window, sizes,
                                fn_output_signature=tf.TensorSpec([4], tf.int32))
            image = tf.ensure_shape(image, self._image_spec.shape)
        return {INPUT_IMAGE: image, "image_size": sizes, "window": windows}

    def _preprocess(self, image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._model_input(image_bytes)

    def _predict(self, image: tf.Tensor) -> dict[str, tf.Tensor]:
        y = tf.cast(self.model(image, training=False), tf.float32)
        scores = tf.nn.softmax(y, axis=-1) if self._softmax else y
        # the argmax of the model's own output (softmax could merge two near logits)
        return {"scores": scores, "model_class_map": tf.argmax(y, axis=-1,
                                                               output_type=tf.int32)}

    def _serve(self, image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
        inp = self._model_input(image_bytes)
        out = self._predict(inp[INPUT_IMAGE])
        sizes, windows = inp["image_size"], inp["window"]
        largest = tf.reduce_max(sizes, axis=0)
        out["class_map"] = tf.map_fn(
            lambda a: class_map_at_size(a[0], a[1], a[2], largest),
            (out["model_class_map"], sizes, windows),
            fn_output_signature=tf.TensorSpec([None, None], tf.int32))
        out["image_size"], out["window"] = sizes, windows
        return {k: out[k] for k in OUTPUT_NAMES}

    def signatures(self) -> dict[str, Any]:
        return {"serving_default": self.serving_default.get_concrete_function(),
                "preprocess": self.preprocess.get_concrete_function(),
                "predict_preprocessed": self.predict_preprocessed.get_concrete_function()}


def preprocessing_meta(pre: EvalPreprocessing) -> dict[str, Any]:
    """The manifest's "preprocessing" entry of a segmentation export."""
    s = pre.settings
    return {"kind": "segmentation", "image_size": list(pre.image_size),
            "channels": pre.channels, "output_dtype": s.output_dtype,
            "mean": list(s.mean), "std": list(s.std), "ignore_label": s.ignore_label,
            "decode": "decode_image (JPEG, PNG, GIF, BMP, WebP), the whole image",
            "resize": "letterbox: scaled to fit keeping aspect (augment.letterbox_window), "
                      "bilinear, half-pixel centres, rounded + saturated to uint8, padded "
                      "with 0",
            "class_map": "nearest model pixel of each request pixel centre under "
                         "augment.letterbox_matrix (exact integer arithmetic), padded "
                         f"with {PAD_CLASS} to the batch's largest image"}
