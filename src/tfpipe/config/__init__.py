"""Validated tfpipe configs: YAML in, typed objects out (docs/config.md).

    cfg = load_config("imagenet", {"data.path": "out/", "pipeline.batch_size": 32})
    cfg.pipeline.batch_size, [op.name for op in cfg.augment.active("geometry")]
"""

from tfpipe.config.loader import (
    apply_overrides,
    deep_merge,
    list_presets,
    load_config,
    parse_set_options,
    parse_value,
    preset_names,
    validate,
)
from tfpipe.config.features import TRANSFORMS, FeatureColumn, FeaturesConfig
from tfpipe.config.models import (
    AUTO,
    AUTOTUNE,
    TF_AUTO,
    TF_AUTOTUNE,
    AugmentConfig,
    Config,
    DataConfig,
    InstanceMasksConfig,
    KeypointsConfig,
    KeysConfig,
    Normalize,
    PipelineConfig,
)
from tfpipe.config.ops import (BATCH_OPS, CROP_RATIO, CROP_SCALE, GEOMETRY_OPS, PIXEL_OPS,
                               SECTIONS, OpConfig)
from tfpipe.config.tasks import TASK_RULES, TaskRules

__all__ = [
    "AUTO",
    "AUTOTUNE",
    "BATCH_OPS",
    "CROP_RATIO",
    "CROP_SCALE",
    "GEOMETRY_OPS",
    "PIXEL_OPS",
    "SECTIONS",
    "TASK_RULES",
    "TF_AUTO",
    "TF_AUTOTUNE",
    "TRANSFORMS",
    "AugmentConfig",
    "Config",
    "DataConfig",
    "FeatureColumn",
    "FeaturesConfig",
    "InstanceMasksConfig",
    "KeypointsConfig",
    "KeysConfig",
    "Normalize",
    "OpConfig",
    "PipelineConfig",
    "TaskRules",
    "apply_overrides",
    "deep_merge",
    "list_presets",
    "load_config",
    "parse_set_options",
    "parse_value",
    "preset_names",
    "validate",
]
