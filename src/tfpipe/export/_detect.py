"""Serving signatures of a detection model (docs/serving.md "Detection models").

    serving_default(image_bytes: tf.string [None])
        -> boxes float32 [None, N, 4]: yxyx in each REQUEST image's pixels,
           normalized_boxes float32 [None, N, 4]: the model's own (yxyx in [0, 1]),
           classes int64 [None, N], class_names string [None, N],
           scores float32 [None, N], num_detections int32 [None],
           image_size int32 [None, 2]: each request image's decoded (height, width),
           keypoints float32 [None, N, K, 3]: (y, x) in request pixels, the model's
                third value as is, and normalized_keypoints, the model's own (when
                the model returns keypoints),
           instance_masks float32 [None, N, S, S]: box-relative, as the model gives
                them (when it returns them; S x S or Sh x Sw as data.instance_masks'
                size); `paste_instance_masks` (export/_masks.py) pastes them
    preprocess(image_bytes) -> image (the model input), image_size
    predict_preprocessed(image) -> the model-frame outputs: normalized_boxes,
        classes, class_names, scores, num_detections[, normalized_keypoints,
        instance_masks]

The model input is the eval pipeline's (`pipeline.serving.EvalPreprocessing.resized`:
the whole image decoded and resized to data.image_size, no aspect kept, nothing
cut). That resize maps normalized coordinates to themselves (its matrix,
`augment.resize_matrix`, takes the image's edges to the output's edges), so a
normalized point (y, x) of the model input is (y * h, x * w) in the request image
of size (h, w): one float32 product per coordinate, no clipping (a box the model
puts past the edge stays past it).

Model contract: the Keras model takes the pipeline's image batch and returns a dict
with `boxes` [B, N, 4] (normalized yxyx), `classes` [B, N] (the pipeline's class
ids: record label - data.label_offset; float classes are rounded), `scores` [B, N],
optionally `num_detections` [B], `keypoints` [B, N, K, 3] (normalized y, x, score or
visibility) and `instance_masks` [B, N, S, S] (box-relative, as the OD API's
`detection_masks`); or a (boxes, classes, scores) tuple.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe.export import _inputs
from tfpipe.pipeline.serving import EvalPreprocessing

INPUT_BYTES = "image_bytes"
INPUT_IMAGE = "image"
REQUIRED = ("boxes", "classes", "scores")
OPTIONAL = ("num_detections", "keypoints", "instance_masks")
# rank and fixed last dimension of each output of the contract (None: any)
_SHAPES: dict[str, tuple[int, int | None, str]] = {
    "boxes": (3, 4, "[batch, N, 4] normalized yxyx"),
    "classes": (2, None, "[batch, N]"),
    "scores": (2, None, "[batch, N]"),
    "num_detections": (1, None, "[batch]"),
    "keypoints": (4, 3, "[batch, N, K, 3] normalized (y, x, score)"),
    "instance_masks": (4, None, "[batch, N, S, S] box-relative"),  # (or Sh x Sw)
}
CONTRACT = ("a detection model must return a dict with boxes [batch, N, 4] (normalized "
            "yxyx), classes [batch, N], scores [batch, N] (optional: num_detections "
            "[batch], keypoints [batch, N, K, 3], instance_masks [batch, N, S, S]), or a "
            "(boxes, classes, scores) tuple")


def _describe(t: Any) -> str:
    if isinstance(t, (tf.Tensor, tf.TensorSpec)):
        return f"{t.dtype.name} {t.shape}"
    return type(t).__name__


def _as_dict(y: Any) -> dict[str, Any] | str:
    """The model's traced output as {name: tensor}, or the reason it is not one."""
    if isinstance(y, dict):
        return dict(y)
    if isinstance(y, (list, tuple)):
        if len(y) == 3:
            return dict(zip(REQUIRED, y))
        return (f"{CONTRACT}; got a {type(y).__name__} of {len(y)}: "
                + ", ".join(_describe(t) for t in y))
    return f"{CONTRACT}; got one tensor {_describe(y)}"


def output_problem(model: Any, pre: EvalPreprocessing) -> str | None:
    """Why `model` cannot serve detection at `pre`'s size (None: it can): the output
    contract above, checked on the traced model (not run). The message names what is
    missing or wrong and what the model returns."""
    h, w = pre.image_size
    spec = tf.TensorSpec([None, h, w, pre.channels], pre.dtype)
    y = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec)
    out = _as_dict(y.structured_outputs)
    if isinstance(out, str):
        return out
    found = ", ".join(f"{k}: {_describe(v)}" for k, v in sorted(out.items()))
    missing = [k for k in REQUIRED if k not in out]
    if missing:
        return f"{CONTRACT}; missing: {', '.join(missing)}; found: {found}"
    n = None
    for name in (*REQUIRED, *OPTIONAL):
        if name not in out:
            continue
        t = out[name]
        rank, last, shape = _SHAPES[name]
        if not isinstance(t, tf.Tensor) or t.shape.rank != rank or (
                last is not None and t.shape[-1] != last):
            return f"{name}: must be {shape}, got {_describe(t)} ({CONTRACT})"
        if name == "scores" and not t.dtype.is_floating:
            return f"scores: must be a float tensor, got {_describe(t)}"
        if name != "num_detections":
            if not (t.dtype.is_floating or t.dtype.is_integer):
                return f"{name}: must be numeric, got {_describe(t)}"
            m = t.shape[1]
            if n is not None and m is not None and m != n:
                return (f"{name}: {m} detections per image, boxes has {n}; every output "
                        f"holds the same N detections ({found})")
            n = n if n is not None else m
    return None


class DetectServingModule(tf.Module):
    """The three detection signatures over one model (tf.saved_model.save)."""

    def __init__(self, model: Any, pre: EvalPreprocessing, names: list[str]) -> None:
        super().__init__(name="tfpipe_detect_serving")
        self.model = model
        self._pre = pre
        h, w = pre.image_size
        self._image_spec = tf.TensorSpec([None, h, w, pre.channels], pre.dtype,
                                         name=INPUT_IMAGE)
        self._names = list(names)
        self._offset = int(pre.settings.label_offset)
        bytes_spec = tf.TensorSpec([None], tf.string, name=INPUT_BYTES)
        self.preprocess = tf.function(self._preprocess, input_signature=[bytes_spec])
        self.predict_preprocessed = tf.function(self._predict, input_signature=[self._image_spec])
        self.serving_default = tf.function(self._serve, input_signature=[bytes_spec])

    def _model_input(self, image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
        # on the CPU, as the classification signature (ServingModule._model_input):
        # the eval pipeline's kernels, the same bits
        pre = self._pre
        with tf.device("/device:CPU:0"):
            image, sizes = _inputs.render_requests(pre, image_bytes, pre.resized)
            image = tf.ensure_shape(image, self._image_spec.shape)
        return {INPUT_IMAGE: image, "image_size": sizes}

    def _preprocess(self, image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._model_input(image_bytes)

    def _class_names(self, classes: tf.Tensor) -> tf.Tensor:
        """The manifest's name of each class id (record label = id + data.label_offset);
        the id as a string where there is no name (no manifest names, out of range)."""
        as_text = tf.strings.as_string(classes)
        if not self._names:
            return as_text
        idx = classes + self._offset
        known = (idx >= 0) & (idx < len(self._names))
        named = tf.gather(tf.constant(self._names), tf.clip_by_value(
            idx, 0, len(self._names) - 1))
        return tf.where(known, named, as_text)

    def _predict(self, image: tf.Tensor) -> dict[str, tf.Tensor]:
        y = _as_dict(self.model(image, training=False))
        assert not isinstance(y, str), y  # output_problem refused it before export
        boxes = tf.cast(y["boxes"], tf.float32)
        classes = y["classes"]
        if classes.dtype.is_floating:  # the OD API's float class ids
            classes = tf.round(classes)
        classes = tf.cast(classes, tf.int64)
        if "num_detections" in y:
            num = tf.cast(y["num_detections"], tf.int32)
        else:
            num = tf.fill(tf.shape(boxes)[:1], tf.shape(boxes)[1])
        out = {"normalized_boxes": boxes, "classes": classes,
               "class_names": self._class_names(classes),
               "scores": tf.cast(y["scores"], tf.float32), "num_detections": num}
        if "keypoints" in y:
            out["normalized_keypoints"] = tf.cast(y["keypoints"], tf.float32)
        if "instance_masks" in y:
            out["instance_masks"] = tf.cast(y["instance_masks"], tf.float32)
        return out

    def _serve(self, image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
        inp = self._model_input(image_bytes)
        out = self._predict(inp[INPUT_IMAGE])
        sizes = inp["image_size"]
        hw = tf.cast(sizes, tf.float32)  # exact: sides < 2^24
        out["boxes"] = out["normalized_boxes"] * tf.tile(hw, [1, 2])[:, None, :]
        if "normalized_keypoints" in out:
            kp = out["normalized_keypoints"]
            out["keypoints"] = tf.concat([kp[..., :2] * hw[:, None, None, :], kp[..., 2:]],
                                         axis=-1)
        out["image_size"] = sizes
        return out

    def signatures(self) -> dict[str, Any]:
        return {"serving_default": self.serving_default.get_concrete_function(),
                "preprocess": self.preprocess.get_concrete_function(),
                "predict_preprocessed": self.predict_preprocessed.get_concrete_function()}


def preprocessing_meta(pre: EvalPreprocessing) -> dict[str, Any]:
    """The manifest's "preprocessing" entry of a detection export."""
    s = pre.settings
    return {"kind": "detection", "image_size": list(pre.image_size),
            "channels": pre.channels, "output_dtype": s.output_dtype,
            "mean": list(s.mean), "std": list(s.std), "label_offset": s.label_offset,
            "decode": "decode_image (JPEG, PNG, GIF, BMP, WebP), the whole image",
            "resize": "the whole image to image_size (aspect not kept), bilinear, "
                      "half-pixel centres, rounded + saturated to uint8",
            "boxes": "normalized yxyx * (height, width, height, width) of each request "
                     "image (float32, not clipped); keypoints likewise (y, x), the third "
                     "value as the model gives it",
            "instance_masks": "box-relative [N, S, S] as the model gives them (paste each "
                              "into its pixel box to get an image-size mask)"}
