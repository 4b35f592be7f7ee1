"""tfpipe.records: TFRecord framing, example codec and schema, atomic sharded
writer, manifest, tf.data source, verify and salvage.

TensorFlow is imported only by the functions that need it.
"""

from __future__ import annotations

from tfpipe.errors import ManifestError, RecordError, SchemaError
from tfpipe.records.adopt import AdoptReport, adopt
from tfpipe.records.codec import decode_example, encode_example, schema_from_example
from tfpipe.records.framing import (
    FINDING_KINDS,
    Finding,
    count_records,
    encode_frame,
    iter_frames,
    masked_crc32c,
    scan,
    scan_file,
)
from tfpipe.records.imagecheck import is_jpeg, jpeg_damage
from tfpipe.records.manifest import (
    MANIFEST_NAME,
    Manifest,
    ShardEntry,
    SkippedInput,
    SplitInfo,
)
from tfpipe.records.salvage import DatasetSalvageReport, SalvageReport, salvage, salvage_dataset
from tfpipe.records.schema import (
    AREA_KEY,
    INSTANCE_MASK_KEY,
    IS_CROWD_KEY,
    KEYPOINT_VISIBILITY_KEY,
    KEYPOINT_X_KEY,
    KEYPOINT_Y_KEY,
    MASK_FORMAT_KEY,
    MASK_KEY,
    SCHEMA_VERSION,
    VERSION_KEY,
    FeatureSpec,
    Schema,
    classification_schema,
    detection_schema,
    infer_schema,
    known_feature,
    segmentation_schema,
)
from tfpipe.records.source import (
    RecordSource,
    describe_shard,
    open_source,
    shard_entries,
    shard_problems,
    shard_record_counts,
    shard_sizes,
)
from tfpipe.records.summary import record_summary, summarize
from tfpipe.records.tfds_dir import is_tfds_dir, load_manifest, tfds_manifest
from tfpipe.records.verify import VerifyReport, verify
from tfpipe.records.writer import (
    DEFAULT_SHARD_SIZE,
    ShardedWriter,
    ShardInfo,
    parse_size,
    shard_name,
    write_shard,
    write_shard_frames,
)
from tfpipe.records.columnar import ColumnarEncoder

__all__ = [
    "AdoptReport", "adopt", "DEFAULT_SHARD_SIZE", "DatasetSalvageReport", "FINDING_KINDS", "MANIFEST_NAME", "SCHEMA_VERSION", "VERSION_KEY",
    "FeatureSpec", "Finding", "RecordSource", "SalvageReport", "VerifyReport", "Manifest", "ManifestError", "RecordError", "Schema",
    "SchemaError", "ShardEntry", "ShardInfo", "ShardedWriter", "SkippedInput", "SplitInfo",
    "classification_schema", "count_records", "decode_example", "describe_shard", "detection_schema",
    "encode_example", "encode_frame", "infer_schema", "is_jpeg", "is_tfds_dir", "jpeg_damage", "known_feature", "iter_frames", "load_manifest", "masked_crc32c",
    "open_source", "parse_size", "record_summary", "salvage", "salvage_dataset", "summarize",
    "verify", "scan", "scan_file", "schema_from_example", "shard_name", "shard_entries", "shard_problems",
    "shard_record_counts", "shard_sizes", "tfds_manifest", "write_shard", "write_shard_frames",
    "ColumnarEncoder", "AREA_KEY", "INSTANCE_MASK_KEY", "IS_CROWD_KEY",
    "KEYPOINT_VISIBILITY_KEY", "KEYPOINT_X_KEY", "KEYPOINT_Y_KEY", "MASK_FORMAT_KEY", "MASK_KEY", "segmentation_schema",
]
