"""`tfpipe bench` for a tabular config (a `features:` section).

Stages of the tabular pipeline (docs/tabular.md, "Pipeline"), each a prefix:
read + batch (the shards' serialized records, batched, still serialized) -> parse
(`tf.io.parse_example` of the raw columns the transforms read, and the label) ->
transforms (the `FeatureTransforms` layer the pipeline applies). End to end is
`build_pipeline` itself. The read prefix uses a plain interleaved
`TFRecordDataset` over the same shards (the pipeline's own reader adds the
CRC-checked walk), so the figures place the costs, as for images.

The naive baseline is the common slow way to feed a table from records: one
`parse_single_example` per record in a sequential map, then batch, then the same
transforms.
"""

from __future__ import annotations

from typing import Any

LABEL_NAIVE = "naive: parse_single_example per record"


def _files(cfg: Any, split: str) -> tuple[list[str], str]:
    from tfpipe.pipeline import settings
    from tfpipe.records import open_source

    s = settings(cfg)
    src = open_source(s.data_path, split=split)
    return list(src.files), (src.tf_compression or "")


def _parse_and_transform(cfg: Any) -> tuple[dict[str, Any], str, Any]:
    from tfpipe.pipeline import raw_parse_spec, settings, tabular_transforms

    return raw_parse_spec(cfg), settings(cfg).features.label, tabular_transforms(cfg)


def stages(cfg: Any, split: str = "train") -> list[tuple[str, Any]]:
    """(name, dataset) prefixes: read + batch, parse, transforms. The records are
    measured batched from the first prefix: a table's records are small, so one
    measuring step per record would time the measurement, not the read."""
    import tensorflow as tf

    from tfpipe.pipeline import options, settings

    s = settings(cfg)
    files, compression = _files(cfg, split)
    spec, label, layer = _parse_and_transform(cfg)
    read = tf.data.TFRecordDataset(files, compression, num_parallel_reads=min(4, len(files)))
    batch = read.batch(s.batch_size, drop_remainder=True)
    parse = batch.map(lambda b: tf.io.parse_example(b, spec),
                      num_parallel_calls=tf.data.AUTOTUNE)

    def transform(parsed: dict[str, Any]) -> Any:
        y = parsed[label]
        return layer({k: v for k, v in parsed.items() if k != label}), y

    out = parse.map(transform, num_parallel_calls=tf.data.AUTOTUNE)
    opts = options(s)
    return [(n, d.with_options(opts)) for n, d in
            (("batch: read + batch", batch), ("parse", parse), ("transforms", out))]


def naive(cfg: Any, split: str = "train") -> Any:
    """Per-record parse in a sequential map, batch, the same transforms; repeated."""
    import tensorflow as tf

    from tfpipe.pipeline import settings

    s = settings(cfg)
    files, compression = _files(cfg, split)
    spec, label, layer = _parse_and_transform(cfg)
    single = {k: (tf.io.FixedLenFeature([1], v.dtype, default_value=None)
                  if isinstance(v, tf.io.FixedLenFeature) else v) for k, v in spec.items()}

    def one(record: Any) -> Any:
        return tf.io.parse_single_example(record, single)

    def transform(parsed: dict[str, Any]) -> Any:
        flat = {k: (tf.sparse.reshape(v, [-1, v.dense_shape[-1]])
                    if isinstance(v, tf.SparseTensor) else tf.reshape(v, [-1]))
                for k, v in parsed.items()}
        y = flat.pop(label)
        return layer(flat), y

    ds = tf.data.TFRecordDataset(files, compression).map(one)
    return ds.batch(s.batch_size, drop_remainder=True).map(transform).repeat()
