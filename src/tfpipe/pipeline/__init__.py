"""`build_pipeline`: config -> reproducible, fast `tf.data.Dataset` (docs/pipeline.md)."""

from tfpipe.pipeline._build import STAGES, batches_per_pass, build_stages
from tfpipe.pipeline._pipeline import build_pipeline, one_epoch_view, set_epoch, stream_offset
from tfpipe.pipeline._classify import device_spec, device_stage
from tfpipe.pipeline._cluster import ClusterWorker, tf_config_worker, worker_shares
from tfpipe.pipeline._labels import fix_text as label_fix_text
from tfpipe.pipeline._errors import framing_losses, reset_skipped_counts, skipped_counts
from tfpipe.pipeline._materialize import MARKER as MATERIALIZED_MARKER
from tfpipe.pipeline._materialize import config_hash, hashed_settings, materialize
from tfpipe.pipeline._options import batch_parallelism, map_parallelism, options
from tfpipe.pipeline._settings import Settings, settings
from tfpipe.pipeline._tabular import raw_parse_spec, tabular_transforms, transform_specs
from tfpipe.pipeline._tabular_build import raw_rows
from tfpipe.pipeline._tabular_info import TabularSource, tabular_source
from tfpipe.pipeline._tasks import TABULAR, TASKS, Builder, Task, task_of

__all__ = [
    "MATERIALIZED_MARKER",
    "ClusterWorker",
    "STAGES",
    "Settings",
    "TABULAR",
    "TASKS",
    "Builder",
    "Task",
    "TabularSource",
    "task_of",
    "build_pipeline",
    "batch_parallelism",
    "batches_per_pass",
    "build_stages",
    "config_hash",
    "device_spec",
    "device_stage",
    "map_parallelism",
    "materialize",
    "one_epoch_view",
    "options",
    "raw_parse_spec",
    "raw_rows",
    "framing_losses",
    "hashed_settings",
    "label_fix_text",
    "reset_skipped_counts",
    "set_epoch",
    "settings",
    "skipped_counts",
    "stream_offset",
    "tabular_source",
    "tabular_transforms",
    "tf_config_worker",
    "transform_specs",
    "worker_shares",
]
