"""`build_pipeline`: config -> reproducible, fast `tf.data.Dataset` (docs/pipeline.md)."""

from tfpipe.pipeline._build import STAGES, build_pipeline, build_stages, one_epoch_view
from tfpipe.pipeline._cluster import ClusterWorker, tf_config_worker, worker_shares
from tfpipe.pipeline._errors import framing_losses, reset_skipped_counts, skipped_counts
from tfpipe.pipeline._materialize import MARKER as MATERIALIZED_MARKER
from tfpipe.pipeline._materialize import materialize
from tfpipe.pipeline._options import map_parallelism, options
from tfpipe.pipeline._settings import Settings, settings

__all__ = [
    "MATERIALIZED_MARKER",
    "ClusterWorker",
    "STAGES",
    "Settings",
    "build_pipeline",
    "build_stages",
    "map_parallelism",
    "materialize",
    "one_epoch_view",
    "options",
    "framing_losses",
    "reset_skipped_counts",
    "settings",
    "skipped_counts",
    "tf_config_worker",
    "worker_shares",
]
