"""Detection's keypoints (`data.keypoints`): the records' points through the image's matrix.

Build time (`keypoint_spec`): the K names (the config's, else the manifest's
`source["keypoints"]["names"]`), the flip permutation (`flip_pairs: auto` pairs
`left_X` with `right_X` by name; explicit pairs checked against K), the skeleton
(the manifest's, for the preview) and the records' keypoint keys (ConfigError
naming the keys the records have when they lack them).

Per sample (`sample_keypoints`): the three keys parsed into ``[N, K, 3]``
(y, x, visibility), moved by `augment.transform_keypoints` through the SAME
composed matrix as the image and boxes (a mirror applies the permutation),
filtered with the boxes' `keep` and padded like them: ``[max_boxes, K, 3]``.
Per batch, mosaic and detection mixup carry them (`augment.mosaic_keypoints`,
`augment.mixup_keypoints`: the same draws, the boxes' order). Graph ops only.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from tfpipe import augment
from tfpipe.errors import ConfigError
from tfpipe.pipeline._keys import KEYPOINT_KEYS, KEYPOINT_VISIBILITY_KEY

#: The record keys (y, x, visibility), object-major: object i's points at [i*K, (i+1)*K).
KEYS = (*KEYPOINT_KEYS, KEYPOINT_VISIBILITY_KEY)


@dataclass(frozen=True)
class KeypointSpec:
    """The resolved `data.keypoints`: names, flip permutation, skeleton (0-based)."""

    names: tuple[str, ...]
    flip: tuple[int, ...]
    skeleton: tuple[tuple[int, int], ...] = ()

    @property
    def k(self) -> int:
        return len(self.names)


def _manifest(path: str | None) -> Any:
    """The dataset's manifest when `path` is a dataset directory (or its
    manifest.json) or a TFDS directory, else None (a glob of bare shards)."""
    from tfpipe.records import MANIFEST_NAME, is_tfds_dir, load_manifest

    if not path:
        return None
    if (os.path.isdir(path) and (os.path.isfile(os.path.join(path, MANIFEST_NAME))
                                 or is_tfds_dir(path))) or os.path.basename(path) == MANIFEST_NAME:
        return load_manifest(path)
    return None


def _stamp(path: str | None) -> float:
    from tfpipe.records import MANIFEST_NAME

    if not path:
        return 0.0
    p = os.path.join(path, MANIFEST_NAME) if os.path.isdir(path) else path
    return os.path.getmtime(p) if os.path.isfile(p) else 0.0


def keypoint_spec(s: Any) -> KeypointSpec | None:
    """The resolved keypoint settings of `Settings` `s`; None when `data.keypoints`
    is off (the pipeline then carries none: bit-identical to before)."""
    if getattr(s, "keypoints", None) is None:
        return None
    return _resolve(s.data_path, json.dumps(s.keypoints, sort_keys=True), _stamp(s.data_path))


@functools.lru_cache(maxsize=32)
def _resolve(path: str | None, cfg_json: str, stamp: float) -> KeypointSpec:
    cfg = json.loads(cfg_json)
    manifest = _manifest(path)
    source = manifest.source.get("keypoints") if manifest is not None else None
    source = source if isinstance(source, dict) else {}
    names = cfg.get("names") or source.get("names")
    if not names:
        where = ("its manifest has no source['keypoints']['names']" if manifest is not None
                 else "it has no manifest (a glob of shards)")
        raise ConfigError(f"data.keypoints.names: not given, and {path} cannot name the "
                          f"points ({where}); list the K point names, e.g. "
                          "data.keypoints.names: [nose, left_eye, right_eye, ...]")
    if cfg.get("names") and source.get("names") and len(cfg["names"]) != len(source["names"]):
        raise ConfigError(f"data.keypoints.names: {len(cfg['names'])} names, but the records "
                          f"of {path} carry {len(source['names'])} points per object "
                          f"({', '.join(source['names'])})")
    pairs = cfg.get("flip_pairs", "auto")
    try:
        flip = augment.keypoint_flip_permutation(names, None if pairs == "auto" else pairs)
    except ValueError as e:
        raise ConfigError(f"data.keypoints.flip_pairs: {e}; allowed: 'auto' or index "
                          f"pairs into the {len(names)} names") from None
    k = len(names)
    skeleton = tuple((int(a), int(b)) for a, b in source.get("skeleton") or ()
                     if 0 <= int(a) < k and 0 <= int(b) < k)
    return KeypointSpec(tuple(str(n) for n in names), tuple(flip), skeleton)


def parse_keypoints(feats: dict[str, tf.Tensor], k: int, num_objects: tf.Tensor) -> tf.Tensor:
    """The record's points as ``[N, K, 3]`` (y, x, visibility); a record whose point
    count is not N * K fails (InvalidArgument: `pipeline.on_error` reports it)."""
    missing = [key for key in KEYS if key not in feats]
    if missing:
        raise ConfigError(f"data.keypoints: the records have no {', '.join(missing)} "
                          f"(keypoints need {', '.join(KEYS)}); the parsed keys are: "
                          f"{', '.join(sorted(feats))} (data.keys cannot map keypoints yet)")
    cols = [tf.reshape(tf.cast(feats[key], tf.float32), [-1]) for key in KEYS]
    want = tf.cast(num_objects, tf.int32) * k
    check = tf.debugging.assert_equal(
        tf.stack([tf.size(c) for c in cols]), tf.fill([3], want), message=(
            f"{', '.join(KEYS)}: each needs {k} values per object (data.keypoints names "
            f"{k} points)"))
    with tf.control_dependencies([check]):
        return tf.reshape(tf.stack(cols, axis=-1), [-1, k, 3])


def sample_keypoints(feats: dict[str, tf.Tensor], spec: KeypointSpec, m: tf.Tensor,
                     hw: tf.Tensor, size: tuple[int, int], keep: tf.Tensor,
                     max_boxes: int) -> tf.Tensor:
    """``[max_boxes, K, 3]``: the record's points through `m` (`follow_keypoints`),
    the objects the boxes keep, in their order, zero padding."""
    from tfpipe.pipeline._geometry_ops import FOLLOW

    kp = parse_keypoints(feats, spec.k, tf.shape(keep)[0])
    kp = FOLLOW["keypoints"](kp, m, hw, size, spec.flip)
    return augment.pad_keypoints(tf.boolean_mask(kp, keep), max_boxes)


def batch_keypoints(op: Any, seed: tf.Tensor, kw: dict[str, Any], images: tf.Tensor,
                    keypoints: tf.Tensor, boxes: tf.Tensor, num_boxes: tf.Tensor) -> tf.Tensor:
    """The keypoints after the batch op `op` (mosaic / mixup) ran on `images`,
    `boxes`, `num_boxes` (the values BEFORE the op) with `seed` and `kw`."""
    if op.name == "mosaic":
        shape = tf.shape(images)
        mk = {k: v for k, v in kw.items()
              if k in ("scale", "center_range", "min_visibility", "min_area")}
        return augment.mosaic_keypoints(keypoints, boxes, num_boxes, seed,
                                        (shape[1], shape[2]), p=op.p, **mk)
    return augment.mixup_keypoints(keypoints, num_boxes, seed, p=op.p)
