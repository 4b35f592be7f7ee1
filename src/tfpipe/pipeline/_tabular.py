"""The tabular pipeline (docs/tabular.md, "Pipeline"):

    list shards -> shard per worker -> read_serialized (interleave; stock reader
      for shards the native walk found intact, the tolerant reader for the rest)
      [-> cache (train: serialized records)] -> shuffle (epoch seed) [-> skip step * batch]
      -> batch (records still serialized) -> parse_example + transforms on the whole batch
      [-> cache (eval: parsed and transformed)] -> prefetch (last)

Elements are `(features: dict, label)` for `model.fit`. Batching before parsing
lets one `tf.io.parse_example` and one pass of each Keras preprocessing layer run
per batch instead of per record (docs/performance-history.md, "Tabular pipeline"). Nothing
here draws random numbers but the shuffle, seeded as in docs/seeds.md, so the
batches are bit-identical for any parallelism, and with `deterministic: false`
each batch still holds the same records (only the batch order may change).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from tfpipe import seeds
from tfpipe.errors import ConfigError, InputError, TfpipeError
from tfpipe.pipeline._epochs import TRAIN_SPLITS
from tfpipe.pipeline._options import batch_parallelism
from tfpipe.pipeline._settings import AUTOTUNE, Settings
from tfpipe.pipeline._source import Source, read_serialized, worker_files
from tfpipe.records import open_source

if TYPE_CHECKING:
    from tfpipe.features import FeatureTransforms, TransformSpec

# tfpipe.features (Keras, pyarrow) loads when a tabular config is built, so that
# `import tfpipe.pipeline` for images stays as light as it was
# Records parsed and transformed per call (a whole number of batches): each call
# opens a few datasets (the error guard: `Tabular.guarded`), ~3 ms a call on a
# loaded 2-core host, and parse_example / the lookups run more cheaply on more rows
PARSE_ROWS = 8192


def transform_specs(features: Any) -> list[TransformSpec]:
    """The config's `features.columns` (tfpipe.config.FeaturesConfig) as TransformSpecs."""
    from tfpipe.features import TransformSpec

    return [TransformSpec(name, c.transform, c.input_columns(name), c.params)
            for name, c in features.columns.items()]


def statistics_path(s: Settings) -> str:
    """features.statistics, else statistics.json beside the dataset's manifest."""
    from tfpipe.features import STATISTICS_FILE

    if s.features.statistics:
        return os.path.expanduser(s.features.statistics)
    path = s.data_path or ""
    base = path if os.path.isdir(path) else os.path.dirname(path)
    return os.path.join(base, STATISTICS_FILE)


class Tabular:
    """What every pass needs: shards, parse spec, label, transforms (built once)."""

    def __init__(self, s: Settings, split: str, worker: tuple[int, int],
                 transforms: FeatureTransforms | None = None) -> None:
        if s.batch_size < 1:
            raise ConfigError(f"pipeline.batch_size: must be >= 1, got {s.batch_size}")
        if not s.data_path:
            raise ConfigError("data.path: not set; point it at a converted table "
                              "(tfpipe convert TABLE OUT --stats)")
        self.s, self.split, self.worker = s, split, worker
        src = open_source(s.data_path, split=split)
        self.files = list(src.files)
        if not self.files:
            raise InputError(f"no {split!r} shards under {s.data_path!r}")
        self.compression = src.tf_compression or None
        from tfpipe.records.packed import is_packed, row_schema

        self.packed = is_packed(src.schema)  # records of blocks of rows (_tabular_pack)
        schema = row_schema(src.schema)
        self.label = s.features.label
        if self.label not in schema:
            raise ConfigError(f"features.label: {self.label!r} is not a column of "
                              f"{s.data_path}; columns: {', '.join(sorted(self._columns(schema)))}")
        lab = schema[self.label]
        if lab.kind == "var" and lab.dtype != "string":
            # var-length scalar column: the table had nulls in it (docs/convert.md)
            raise ConfigError(
                f"features.label: column {self.label!r} has rows without a value (nulls in "
                f"the table, so it is stored var-length); a label needs one per row: "
                f"reconvert with `tfpipe convert TABLE OUT --label-column {self.label}`, "
                "which skips the rows whose label is null and lists them in the manifest")
        if lab.kind != "fixed" or lab.shape or lab.dtype == "string":
            raise ConfigError(f"features.label: column {self.label!r} must hold one int64 or "
                              f"float32 value per row (it is {lab.dtype}, {lab.kind}"
                              f"{', shape ' + str(lab.shape) if lab.shape else ''})")
        self.transforms = transforms or self._transforms(s, schema)
        self.spec: dict[str, Any] = {self.label: tf.io.FixedLenFeature([], lab.tf_dtype())}
        # float64 kept exactly by the converter (encoding float64_bits: int64 bit
        # patterns): parsed as int64, bitcast back, given to the transforms as floats
        self.float64_bits = [c for c in self.transforms.raw_spec
                             if schema[c].encoding == "float64_bits"]
        for col in self.transforms.raw_spec:
            f = schema[col]
            self.spec[col] = (tf.io.VarLenFeature(f.tf_dtype()) if f.kind == "var"
                              else tf.io.FixedLenFeature([], f.tf_dtype()))
        wi, wc = worker
        self.my_files, self.elem_shard = worker_files(self.files, wi, wc,
                                                      batch_size=s.batch_size)

    @staticmethod
    def _columns(schema: Any) -> list[str]:
        return [n for n in schema if not n.startswith("tfpipe/")]

    def _transforms(self, s: Settings, schema: Any) -> FeatureTransforms:
        from tfpipe.features import build_transforms, read_statistics

        specs = transform_specs(s.features)
        for spec in specs:  # `time` reads epoch seconds: a finer stored unit would be wrong
            enc = schema[spec.columns[0]].encoding if spec.columns[0] in schema else None
            if spec.kind == "time" and enc and enc != "timestamp_s":
                raise ConfigError(f"features.{spec.name}: transform 'time' reads epoch seconds, "
                                  f"but column {spec.columns[0]!r} holds {enc}; reconvert "
                                  "with --time-unit s (the default)")
        path = statistics_path(s)
        try:
            stats = read_statistics(path)
        except InputError as e:
            raise ConfigError(f"features: {e} (or set features.statistics)") from None
        cols = self._columns(schema)
        dtypes = {n: "float32" if schema[n].encoding == "float64_bits" else schema[n].dtype
                  for n in cols if not schema[n].shape}
        nullable = [n for n in cols if schema[n].kind == "var"]
        return build_transforms(specs, stats, dtypes=dtypes,
                                nullable=nullable, where=path)

    # ------------------------------------------------------------------ stages
    def records(self) -> tf.data.Dataset:
        """(key, serialized) records (`read_serialized(keyed=True)`): the key names
        a record that fails to parse (shard id * KEY_SHIFT + index in its shard)."""
        s = self.s
        # local shards are read in line: for small records the parallel
        # interleave's per-record hand-off between threads cost more than it read
        local = all("://" not in f for f in self.my_files)
        parallel = 1 if s.read_parallel == 0 and local else s.read_parallel
        ds = read_serialized(self.my_files, self.compression, s.interleave_cycle,
                             skip_framing=s.on_error == "skip", parallel=parallel, keyed=True)
        if self.elem_shard:
            ds = ds.shard(self.worker[1], self.worker[0])
        return ds

    def parse(self, serialized: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        """A batch of serialized Examples -> (transformed features, label)."""
        parsed = tf.io.parse_example(serialized, self.spec)
        label = parsed.pop(self.label)
        for c in self.float64_bits:
            parsed[c] = float64_bits_as_float32(parsed[c])
        return self.transforms(parsed), label

    def _parse_function(self) -> Any:
        """`parse` as one traced function that the guard's three maps call (three
        inlined copies of the transforms made each pass's start ~2x slower)."""
        if getattr(self, "_parse_fn", None) is None:
            self._parse_fn = tf.function(
                tf.autograph.experimental.do_not_convert(self.parse),
                input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        return self._parse_fn

    def guarded(self, keys: tf.Tensor, serialized: tf.Tensor) -> tf.data.Dataset:
        """One batch -> one element `(features, label, bad keys)`: `parse` of the
        whole batch; only when that fails (a record that is no Example, a value
        of another dtype, a list where one value belongs), each record is parsed
        alone to find the bad ones, and the rest are parsed as one batch. Graph
        ops only: a failed map is dropped by `ignore_errors`, and the per-record
        pass runs only when it was (`take(1)` never opens what it does not need)."""
        parse = self._parse_function()
        none = tf.zeros([0], tf.int64)
        whole = tf.data.Dataset.from_tensors(serialized).map(
            lambda r: (*parse(r), none)).ignore_errors()

        @tf.autograph.experimental.do_not_convert
        def alone(record: tf.Tensor) -> tf.data.Dataset:
            def ok(r: tf.Tensor) -> tf.Tensor:
                with tf.control_dependencies(tf.nest.flatten(parse(tf.reshape(r, [1])))):
                    return tf.constant(True)
            return tf.data.Dataset.from_tensors(record).map(ok).ignore_errors().concatenate(
                tf.data.Dataset.from_tensors(tf.constant(False))).take(1)

        @tf.autograph.experimental.do_not_convert
        def rest(good: tf.Tensor) -> tuple[Any, ...]:
            return (*parse(tf.boolean_mask(serialized, good)),
                    tf.boolean_mask(keys, tf.logical_not(good)))

        per_record = tf.data.Dataset.from_tensor_slices(serialized).interleave(
            alone, cycle_length=1).batch(1 << 30).map(rest)
        return whole.concatenate(per_record).take(1)

    def report(self, features: Any, label: tf.Tensor, bad: tf.Tensor,
               iteration: tf.Tensor | None) -> tuple[Any, tf.Tensor]:
        """The bad records of a batch by shard and record: `raise` fails naming
        them; `skip` logs them and counts them in `skipped_counts()` (and the pass's
        own count). Sequential: the counts are a read-modify-write."""
        from tfpipe.pipeline._errors import log_and_count_skipped
        from tfpipe.pipeline._source import KEY_SHIFT

        policy = self.s.on_error
        shard_ids = tf.cast(bad // KEY_SHIFT, tf.int32)
        paths = tf.gather(tf.constant(self.my_files), shard_ids)
        msgs = tf.strings.join(["tfpipe: bad record ", tf.strings.as_string(bad % KEY_SHIFT),
                                " in shard ", paths, " (not a tf.train.Example of the "
                                "manifest's schema; pipeline.on_error=", policy, ")"])
        if policy == "raise":
            done = tf.debugging.Assert(tf.equal(tf.size(bad), 0), [tf.strings.reduce_join(
                msgs, separator="\n")], summarize=1)
        else:
            done = tf.cond(tf.size(bad) > 0,
                           lambda: log_and_count_skipped(msgs, paths, shard_ids, iteration),
                           lambda: tf.constant(False))
        with tf.control_dependencies([done]):
            return tf.nest.map_structure(tf.identity, features), tf.identity(label)

    def one_pass(self, records: tf.data.Dataset, epoch: Any, step: Any = 0,
                 iteration: tf.Tensor | None = None) -> tf.data.Dataset:
        s = self.s
        train = self.split in TRAIN_SPLITS
        ds = records
        if train and s.shuffle_buffer > 1:
            from tfpipe.pipeline._epochs import shuffle as _shuffle  # the image path's

            ds = _shuffle(ds, s.shuffle_buffer, seeds.epoch_seed(seeds.global_seed(s.seed), epoch))
        if not (isinstance(step, int) and step == 0):  # skipped records are never parsed
            ds = ds.skip(tf.cast(step, tf.int64) * s.batch_size)
        drop = s.drop_remainder if train else False
        # Parsed and transformed PARSE_ROWS records at a time (whole batches), then
        # cut into batches (rebatch): the same rows per batch as batching first,
        # since every transform is per row; a bad record skipped leaves its group
        # short, and rebatch still fills every batch but the last
        group = s.batch_size * max(1, PARSE_ROWS // s.batch_size)
        return self.guarded_batches(ds.batch(group), self.guarded, iteration, drop)

    def guarded_batches(self, groups: tf.data.Dataset, guard: Any,
                        iteration: tf.Tensor | None, drop_remainder: bool) -> tf.data.Dataset:
        """Groups -> `guard` (one guarded parse per group: an element `(features,
        label, bad keys)`, `num_parallel_calls` groups at a time) -> `report` of the
        bad records -> batches of `batch_size` rows."""
        s = self.s
        npc = batch_parallelism(s)
        ds = groups.interleave(tf.autograph.experimental.do_not_convert(guard),
                               cycle_length=max(npc, 1) if npc != AUTOTUNE else None,
                               block_length=1, **({} if npc == 1 else {
                                   "num_parallel_calls": npc, "deterministic": s.deterministic}))
        ds = ds.map(tf.autograph.experimental.do_not_convert(
            lambda f, y, bad: self.report(f, y, bad, iteration)))
        return ds.rebatch(s.batch_size, drop_remainder=drop_remainder)

    def batches(self) -> int | None:
        from tfpipe.pipeline._cardinality import batches as _batches

        src = Source(self.files, self.compression, None, None)  # type: ignore[arg-type]
        return _batches(self.s, self.split, src, self.my_files, self.worker)


def float64_bits_as_float32(x: Any) -> Any:
    """A parsed float64_bits column (dense or sparse int64) as the float32 the transforms
    take: bitcast to the exact float64, then rounded once."""
    def cast(v: tf.Tensor) -> tf.Tensor:
        return tf.cast(tf.bitcast(v, tf.float64), tf.float32)

    if isinstance(x, tf.SparseTensor):
        return tf.SparseTensor(x.indices, cast(x.values), x.dense_shape)
    return cast(x)


def tabular_transforms(config: Any) -> FeatureTransforms:
    """The `FeatureTransforms` a tabular config's pipeline applies (for export and
    for building a model's inputs): built from the same statistics and schema."""
    from tfpipe.pipeline._settings import settings

    s = settings(config)
    if s.features is None:
        raise TfpipeError("tabular_transforms: the config has no features: section")
    return Tabular(s, "train", (0, 1)).transforms


def raw_parse_spec(config: Any) -> dict[str, Any]:
    """`tf.io.parse_example` spec of the raw columns the transforms read (+ label)."""
    from tfpipe.pipeline._settings import settings

    return dict(Tabular(settings(config), "train", (0, 1)).spec)
