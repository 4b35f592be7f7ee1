"""What each `data.task` allows in a config: one declarative row per task.

The config layer cannot import the pipeline (docs/architecture.md, the import
table), so the task rules that validation needs are data here; the pipeline's
task registry (`tfpipe.pipeline.TASKS`) points at these rows (`Task.rules`) and
asks them too, so a rule is written once. Adding a task adds a row here and an
entry there (docs/architecture.md, "Adding a task").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class TaskRules:
    """The config-level rules of one task.

    - `allows`: ops restricted to some tasks (`RESTRICTED_OPS`) that this task takes;
    - `refuses`: op ("section.name") -> why it is refused for this task;
    - `one_matrix`: every target follows the geometry through one 3x3 matrix, so a
      geometric op without a matrix (`OpConfig.affine` False: elastic) is refused;
    - `device_pixel_stage`: `augment.pixel_stage: device` is supported;
    - `soft_labels`: an active mixup/cutmix turns its image-level labels one-hot;
    - `data_keys`: `data` keys only this task reads, kept in `Config.to_dict()` only
      for it (the other tasks' dicts, and so their hashes, stay as they were);
    - `takes`: `data` keys that, when set (not null), need this task (`data_key_problems`).
    """

    name: str
    allows: frozenset[str] = frozenset()
    refuses: Mapping[str, str] = field(default_factory=dict)
    one_matrix: bool = False
    device_pixel_stage: bool = False
    soft_labels: bool = False
    data_keys: tuple[str, ...] = ()
    takes: tuple[str, ...] = ()


#: Ops only some tasks take ("section.name"): each task lists the ones it takes in `allows`.
RESTRICTED_OPS = ("batch.mosaic",)

#: data.task -> its rules, in the order the values are listed to users.
TASK_RULES: dict[str, TaskRules] = {r.name: r for r in (
    TaskRules("classification", device_pixel_stage=True, soft_labels=True),
    TaskRules("detection", allows=frozenset({"batch.mosaic"}), one_matrix=True,
              takes=("instance_masks", "keypoints")),
    TaskRules("segmentation", allows=frozenset({"batch.mosaic"}), one_matrix=True,
              refuses={"batch.mixup": "a blend of two images has no single class per pixel "
                                      "(use cutmix, which pastes the mask with the image)"},
              data_keys=("ignore_label",)),
)}

#: The values `data.task` takes.
TASKS = tuple(TASK_RULES)


def _quoted(names: list[str]) -> str:
    return " or ".join(f"'{n}'" for n in names)


def task_problems(task: str, active: Mapping[str, list[object]], pixel_stage: str,
                  fmt: object) -> list[str]:
    """The config errors of `task` with the `active` ops (section -> op models),
    in the order validation reports them. `fmt`: how a value is shown."""
    rules = TASK_RULES[task]
    show = fmt if callable(fmt) else repr
    problems: list[str] = []
    for op in active.get("batch", []):
        key = f"batch.{op.name}"  # type: ignore[attr-defined]
        if key in RESTRICTED_OPS and key not in rules.allows:
            takers = [r.name for r in TASK_RULES.values() if key in r.allows]
            problems.append(f"augment.{key}: needs data.task {_quoted(takers)}, got {show(task)}")
        if key in rules.refuses:
            problems.append(f"augment.{key}: not allowed with data.task '{task}': "
                            f"{rules.refuses[key]}")
    for op in active.get("geometry", []):
        if rules.one_matrix and not getattr(op, "affine", True):
            problems.append(f"augment.geometry.{op.name}: a non-affine warp cannot move the "  # type: ignore[attr-defined]
                            f"targets through one matrix; not allowed with data.task "
                            f"{show(task)}")
    if pixel_stage == "device" and not rules.device_pixel_stage:
        takers = [r.name for r in TASK_RULES.values() if r.device_pixel_stage]
        problems.append(f"augment.pixel_stage: 'device' needs data.task {_quoted(takers)}, "
                        f"got {show(task)} (detection runs L3 on the host: use 'host')")
    return problems


def data_key_problems(task: str, values: Mapping[str, object], fmt: object) -> list[str]:
    """The config errors of `data` keys set (not None) under a task that does not take
    them (`TaskRules.takes`); `values`: key -> its value."""
    show = fmt if callable(fmt) else repr
    problems = []
    for key, value in values.items():
        takers = [r.name for r in TASK_RULES.values() if key in r.takes]
        if value is not None and takers and key not in TASK_RULES[task].takes:
            problems.append(f"data.{key}: needs data.task {_quoted(takers)}, got {show(task)} "
                            f"(set it to null or remove it)")
    return problems
