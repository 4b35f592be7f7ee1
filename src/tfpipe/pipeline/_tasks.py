"""The task registry: every place that varies by task asks the `Task` entry.

A task is one builder module (the per-sample / per-batch functions `_build`
drives, the `Builder` interface below) and one `Task` entry in `TASKS`; its
config-level rules are one row of `tfpipe.config.TASK_RULES` (the config layer
cannot import this module). docs/architecture.md, "Adding a task".

Builders are named as "module:Class" under `tfpipe.pipeline` and imported when
a pipeline is built: this module stays a leaf of the package (the source and the
stages ask it without importing every task's code).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

import tensorflow as tf

from tfpipe.config import TASK_RULES, TaskRules
from tfpipe.errors import ConfigError
from tfpipe.pipeline._keys import (BOX_KEYS, IMAGE_KEY, INSTANCE_MASK_KEY, KEYPOINT_KEYS,
                                   KEYPOINT_VISIBILITY_KEY, MASK_KEY)

Element = dict[str, tf.Tensor]


@runtime_checkable
class Builder(Protocol):
    """What `_build._assemble` (and the service's client side) drive, per task.

    Per sample (inside `map`, graph only): `process(shard, record, local,
    serialized[, row])` -> the element dict (uint8 `image` at `data.image_size`,
    the task's targets, `_`-prefixed bookkeeping); `sentinel(...)`: the same
    structure for a record that failed (dropped by `_errors.guarded_map`);
    `decode_only`: L1 alone (the stage report); `eval_image(encoded)`: the eval
    rendering. `plan`: per-block draws before decoding (`_plan.PlanStage.plan`), or
    None when the task draws per sample. Per batch: `batch(ds, drop)`;
    `pixel_stage(batch)`: batch + L3 alone (stage report); `compose(batch,
    global_batch, num_classes, keep_index)` -> the output element (L3, L4,
    normalize; keys without `_`).
    """

    s: Any
    geometry: list[Any]
    pixel: list[Any]
    batch_ops: list[Any]
    augmenting: bool
    plan: Callable[..., Element] | None

    def eval_image(self, encoded: tf.Tensor) -> tf.Tensor: ...

    def decode_only(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                    serialized: tf.Tensor) -> tf.Tensor: ...

    def process(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                serialized: tf.Tensor) -> Element: ...

    def sentinel(self, shard: tf.Tensor, rec: tf.Tensor, local: tf.Tensor,
                 serialized: tf.Tensor) -> Element: ...

    def batch(self, ds: tf.data.Dataset, drop_remainder: bool) -> tf.data.Dataset: ...

    def pixel_stage(self, batch: Element) -> Element: ...

    def compose(self, batch: Element, global_batch: tf.Tensor, num_classes: int | None,
                keep_index: bool) -> Element: ...


def _image_label(e: Element) -> tuple[Any, tf.Tensor]:
    if "augment_enabled" in e:
        # pixel_stage device, train: (features, label), the draws beside the image
        return {k: v for k, v in e.items() if k != "label"}, e["label"]
    return e["image"], e["label"]


def _image_targets(e: Element) -> tuple[tf.Tensor, Element]:
    return e["image"], {k: v for k, v in e.items() if k != "image"}


def _no_targets(s: Any, n: int) -> dict[str, list[int]]:
    return {}


def _box_targets(s: Any, n: int) -> dict[str, list[int]]:
    out = {"boxes": [n, s.max_boxes, 4], "classes": [n, s.max_boxes], "num_boxes": [n]}
    if getattr(s, "instance_masks", None):  # data.instance_masks: box crops per object
        out["instance_masks"] = [n, s.max_boxes, *s.instance_masks]
    if getattr(s, "keypoints", None) is not None:  # data.keypoints: K from names / manifest
        from tfpipe.pipeline._keypoints import keypoint_spec

        spec = keypoint_spec(s)
        assert spec is not None
        out["keypoints"] = [n, s.max_boxes, spec.k, 3]
    return out


def _no_needs(s: Any) -> dict[str, str]:
    return {}


def _detection_needs(s: Any) -> dict[str, str]:
    needs = {}
    if getattr(s, "instance_masks", None):
        needs[INSTANCE_MASK_KEY] = "data.instance_masks"
    if getattr(s, "keypoints", None) is not None:
        needs.update(dict.fromkeys((*KEYPOINT_KEYS, KEYPOINT_VISIBILITY_KEY), "data.keypoints"))
    return needs


def _image_mask(e: Element) -> tuple[tf.Tensor, tf.Tensor]:
    return e["image"], e["mask"]


def _mask_targets(s: Any, n: int) -> dict[str, list[int]]:
    return {"mask": [n, s.image_size[0], s.image_size[1], 1]}


@dataclass(frozen=True)
class Task:
    """One task: how its pipeline is built and what the rest of tfpipe may ask of it.

    - `builder`: "module:Class" under `tfpipe.pipeline`, a `Builder` made as
      `Class(settings, epoch_seed, worker, workers, parse, train)`; None for a task
      with its own whole pipeline (`pipeline`);
    - `pipeline`: "module:function" for such a task (tabular: `_tabular_build.build`);
    - `required_keys`: record keys the task's records must carry (checked against
      the manifest's schema when the source is opened);
    - `supervised`: element -> (inputs, targets) for `as_supervised=True`;
    - `labels`: the records carry one class label per image (the manifest's label
      range is checked at build time; `tfpipe check` scans them);
    - `targets(settings, batch)`: the target keys of an output batch and their
      shapes (`tfpipe check`), beside `image` (and `label` when `labels`);
    - `batch_ops`: the L4 ops its builder runs (the config rules refuse the others
      per task where they can; the builder names these when it meets another);
    - `block_path`: whole blocks of records may become batches (`_block`);
    - `serving`: what `pipeline.serving` / `tfpipe export` serve for it: None (no
      serving graph), "classes" (one class distribution per image), "class_map"
      (a class per pixel, at the request image's size: export/_segment.py) or
      "detections" (boxes etc. in the request image's pixels: export/_detect.py);
    - `cache_keys`: settings beyond the common ones that shape its decoded
      elements (named in a decoded cache's file name: `_caching`);
    - `rules`: its row of `tfpipe.config.TASK_RULES` (ops, pixel_stage device);
    - `needs(settings)`: record keys the settings switch on (record key -> the config
      key that asks), checked like `required_keys` when the source is opened.
    """

    name: str
    builder: str | None = None
    pipeline: str | None = None
    required_keys: tuple[str, ...] = (IMAGE_KEY,)
    supervised: Callable[[Element], tuple[Any, Any]] = _image_targets
    labels: bool = False
    targets: Callable[[Any, int], dict[str, list[int]]] = _no_targets
    batch_ops: tuple[str, ...] = ()
    block_path: bool = False
    serving: str | None = None
    cache_keys: tuple[str, ...] = ()
    rules: TaskRules = field(default_factory=lambda: TaskRules("tabular"))
    needs: Callable[[Any], dict[str, str]] = _no_needs

    def make(self, s: Any, epoch_seed: tf.Tensor, worker: tuple[int, int],
             parse: Callable[..., Element], train: bool) -> Builder:
        """This task's `Builder` for one epoch of one worker."""
        if self.builder is None:
            raise ConfigError(f"data.task {self.name!r}: builds its own pipeline "
                              f"({self.pipeline}), not per-sample stages")
        return _resolve(self.builder)(s, epoch_seed, worker[0], worker[1], parse, train)

    def build(self) -> Callable[..., tf.data.Dataset]:
        """The whole-pipeline function of a task that has one (`pipeline`)."""
        assert self.pipeline is not None
        return _resolve(self.pipeline)


def _resolve(name: str) -> Any:
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(f"tfpipe.pipeline.{module}"), attr)


#: data.task -> its entry (the image tasks); `task_of` also knows tabular.
TASKS: dict[str, Task] = {t.name: t for t in (
    Task("classification", builder="_classify:Classify", supervised=_image_label,
         labels=True, batch_ops=("mixup", "cutmix"), block_path=True, serving="classes",
         rules=TASK_RULES["classification"]),
    Task("detection", builder="_detect:Detect", required_keys=(IMAGE_KEY, *BOX_KEYS),
         serving="detections",  # export/_detect.py
         targets=_box_targets, batch_ops=("mosaic", "mixup"), rules=TASK_RULES["detection"],
         cache_keys=("instance_masks", "keypoints"), needs=_detection_needs),
    Task("segmentation", builder="_segment:Segment", required_keys=(IMAGE_KEY, MASK_KEY),
         supervised=_image_mask, targets=_mask_targets, batch_ops=("cutmix", "mosaic"),
         serving="class_map", cache_keys=("ignore_label",), rules=TASK_RULES["segmentation"]),
)}

#: A config with a `features:` section: tables, (features, label) batches (docs/tabular.md).
TABULAR = Task("tabular", pipeline="_tabular_build:build", required_keys=())


def task_of(s: Any) -> Task:
    """The task entry of `Settings` (or anything with `.task` and `.features`)."""
    if getattr(s, "features", None) is not None:
        return TABULAR
    return task_named(s.task)


def task_named(name: str) -> Task:
    """The image task `name` (`data.task`), or ConfigError naming the built ones."""
    try:
        return TASKS[name]
    except KeyError:
        raise ConfigError(f"data.task: {name!r} has no pipeline in this version; "
                          f"built: {', '.join(TASKS)}") from None


def device_refusal(task: str) -> str | None:
    """The ConfigError text for `augment.pixel_stage: device` with a `task` that runs
    L3 on the host (`TaskRules.device_pixel_stage`); None when the task supports it."""
    if TASK_RULES.get(task, TaskRules("")).device_pixel_stage:
        return None
    takers = " or ".join(f"'{r.name}'" for r in TASK_RULES.values() if r.device_pixel_stage)
    return (f"augment.pixel_stage: 'device' needs data.task {takers}, "
            f"got {task!r} (detection runs L3 on the host: use 'host')")
