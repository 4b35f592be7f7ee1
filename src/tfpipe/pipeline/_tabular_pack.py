"""The tabular pipeline over the packed layout (docs/tabular.md, "Packed layout";
records of up to N rows each, `tfpipe.records.packed`):

    list shards -> shard per worker (whole shards, dealt by their ROW counts)
      -> read_serialized (blocks) [-> cache (train)] -> shuffle BLOCKS (epoch seed,
      buffer = pipeline.shuffle_buffer rows' worth of blocks) -> group G blocks
      -> enumerate groups [-> resume: skip step * batch_size rows]
      -> per group: parse_example once, flatten to rows, permute the group's rows
         (train: stateless, seeded by the epoch seed and the group's index),
         rebuild the row layout's inputs, transforms -> rebatch -> prefetch

Only the framing differs from the row layout (`_tabular.Tabular`): the
transforms take the same tensors (dense [rows] for fixed columns, SparseTensor
[rows, 0 or 1] of the present values for nullable ones), so the eval pass gives
the row layout's batches bit for bit. Train shuffle granularity: blocks move
across the shuffle buffer, a row moves only within its group of G blocks.
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

from tfpipe import seeds
from tfpipe.errors import InputError
from tfpipe.pipeline._epochs import TRAIN_SPLITS
from tfpipe.pipeline._settings import Settings
from tfpipe.pipeline._source import worker_files
from tfpipe.pipeline._tabular import Tabular, float64_bits_as_float32
from tfpipe.records.packed import MISSING_PREFIX, ROWS_KEY, missing_key, shard_rows

# "rows": the domain tag of the in-group row permutation (docs/seeds.md)
ROWS_TAG = 0x726F7773
# Rows parsed (and permuted) together, as the row layout's PARSE_ROWS. 32768 was
# measured too: less CPU a pass, but fewer rows/s (3.2x the Keras peer at 1 M rows
# against 5.2x, docs/performance.md "Tables"): coarser work for the two cores
GROUP_ROWS = 8192


def group_blocks(rows_per_record: int, batch_size: int) -> int:
    """Blocks parsed together (and whose rows are permuted together): at least
    GROUP_ROWS rows and one batch, so a group pays for its per-call overhead."""
    return max(1, -(-max(GROUP_ROWS, batch_size) // rows_per_record))


def group_seed(epoch_seed: Any, group: Any) -> tf.Tensor:
    """fold(fold(epoch_seed, ROWS_TAG), group): the permutation seed of a group."""
    return seeds.fold(seeds.fold(epoch_seed, ROWS_TAG), group)


class PackedTabular(Tabular):
    """`Tabular` for a packed dataset: the same transforms, label and schema checks
    (on the row schema), records that are blocks of rows."""

    def __init__(self, s: Settings, split: str, worker: tuple[int, int],
                 transforms: Any = None) -> None:
        super().__init__(s, split, worker, transforms)
        from tfpipe.records import Manifest

        base = os.path.dirname(self.files[0])
        manifest = Manifest.load(base)
        self.rows_per_record = int((manifest.source or {}).get("rows_per_record") or 1)
        rows = shard_rows(manifest, split)
        self.shard_rows = {os.path.join(base, k): v for k, v in rows.items()}
        if any(f not in self.shard_rows for f in self.files):
            raise InputError(f"{base}: the manifest does not list the rows of every "
                             f"{split!r} shard of the packed layout (settings.shard_stats); "
                             "reconvert with `tfpipe convert ... --rows-per-record N`")
        wi, wc = worker
        self.my_files, self.elem_shard = worker_files(
            self.files, wi, wc, [self.shard_rows[f] for f in self.files],
            batch_size=s.batch_size)
        self.group = group_blocks(self.rows_per_record, s.batch_size)
        self.nullable = [c for c, f in self.spec.items()
                         if isinstance(f, tf.io.VarLenFeature)]
        pspec: dict[str, Any] = {ROWS_KEY: tf.io.FixedLenFeature([], tf.int64)}
        for c, f in self.spec.items():
            pspec[c] = tf.io.VarLenFeature(f.dtype)
        for c in self.nullable:
            pspec[missing_key(c)] = tf.io.VarLenFeature(tf.int64)
        self.pspec = pspec
        self._group_fns: dict[bool, Any] = {}

    # ------------------------------------------------------------------ a group
    def raw_group(self, serialized: tf.Tensor, order_seed: tf.Tensor | None,
                  drop: Any = 0) -> dict[str, Any]:
        """Blocks -> the row layout's parsed inputs of their rows (label included):
        rows in block order, or permuted by `order_seed`; the first `drop` dropped.
        A block whose lists disagree with its `tfpipe/rows` fails (InvalidArgument)."""
        p = tf.io.parse_example(serialized, self.pspec)
        rows = p.pop(ROWS_KEY)
        nblocks = tf.shape(rows)[0]
        total = tf.reduce_sum(rows)
        starts = tf.cumsum(rows, exclusive=True)
        # one Assert for the whole group (an assert_* per column cost ~140 ms of
        # instantiation per pass, all columns together): every list holds its
        # block's tfpipe/rows values, every missing index lies inside its block
        ok = [tf.reduce_all(rows >= 0)]
        for c in self.spec:
            ok.append(tf.reduce_all(tf.equal(tf.math.bincount(
                tf.cast(p[c].indices[:, 0], tf.int32), minlength=nblocks, maxlength=nblocks,
                dtype=tf.int64), rows)))
        for c in self.nullable:
            m = p[missing_key(c)]
            ok.append(tf.reduce_all(tf.logical_and(m.values >= 0, m.values < tf.gather(
                rows, m.indices[:, 0]))))
        check = tf.debugging.Assert(tf.reduce_all(tf.stack(ok)), [
            "a block's value lists disagree with its tfpipe/rows (or a "
            f"{MISSING_PREFIX}<column> index lies outside its block)"])
        plain = order_seed is None and isinstance(drop, int) and drop == 0
        if order_seed is None:
            order = tf.range(tf.cast(drop, tf.int64), total)
        else:
            order = tf.random.experimental.stateless_shuffle(
                tf.range(total), order_seed, alg=seeds.ALG)[drop:]
        n = tf.shape(order, out_type=tf.int64)[0]
        out: dict[str, Any] = {}
        with tf.control_dependencies([check]):
            for c in self.spec:
                values = p[c].values if plain else tf.gather(p[c].values, order)
                if c in self.nullable:
                    m = p[missing_key(c)]
                    at = m.values + tf.gather(starts, m.indices[:, 0])
                    present = tf.equal(tf.scatter_nd(
                        at[:, None], tf.ones_like(at, tf.int8), tf.reshape(total, [1])), 0)
                    if not plain:
                        present = tf.gather(present, order)
                    where = tf.where(present)[:, 0]
                    width = tf.cast(tf.reduce_any(present), tf.int64)
                    values = tf.SparseTensor(
                        tf.stack([where, tf.zeros_like(where)], axis=1),
                        tf.boolean_mask(values, present), tf.stack([n, width]))
                out[c] = tf.identity(values) if not isinstance(values, tf.SparseTensor) \
                    else values
        return out

    def parse_group(self, serialized: tf.Tensor, order_seed: tf.Tensor | None,
                    drop: Any = 0) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        parsed = self.raw_group(serialized, order_seed, drop)
        label = parsed.pop(self.label)
        for c in self.float64_bits:
            parsed[c] = float64_bits_as_float32(parsed[c])
        return self.transforms(parsed), label

    def _group_function(self, permute: bool) -> Any:
        """`parse_group` traced once per ordering (permuted or not) and shared by the
        whole group's and the per-block parses."""
        if permute not in self._group_fns:
            def fn(serialized: tf.Tensor, seed: tf.Tensor, drop: tf.Tensor) -> Any:
                return self.parse_group(serialized, seed if permute else None, drop)

            self._group_fns[permute] = tf.function(
                tf.autograph.experimental.do_not_convert(fn), autograph=False,
                input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([2], tf.int64),
                                 tf.TensorSpec([], tf.int64)])
        return self._group_fns[permute]

    def guarded_group(self, keys: tf.Tensor, serialized: tf.Tensor, seed: tf.Tensor,
                      drop: tf.Tensor, permute: bool) -> tf.data.Dataset:
        """`Tabular.guarded` for a group of blocks: the whole group at once; only when
        that fails, each block alone to find the bad ones, then the rest."""
        parse = self._group_function(permute)
        none = tf.zeros([0], tf.int64)
        whole = tf.data.Dataset.from_tensors(serialized).map(
            lambda r: (*parse(r, seed, drop), none)).ignore_errors()

        @tf.autograph.experimental.do_not_convert
        def alone(record: tf.Tensor) -> tf.data.Dataset:
            def ok(r: tf.Tensor) -> tf.Tensor:
                with tf.control_dependencies(tf.nest.flatten(
                        parse(tf.reshape(r, [1]), seed, tf.constant(0, tf.int64)))):
                    return tf.constant(True)
            return tf.data.Dataset.from_tensors(record).map(ok).ignore_errors().concatenate(
                tf.data.Dataset.from_tensors(tf.constant(False))).take(1)

        @tf.autograph.experimental.do_not_convert
        def rest(good: tf.Tensor) -> tuple[Any, ...]:
            return (*parse(tf.boolean_mask(serialized, good), seed, drop),
                    tf.boolean_mask(keys, tf.logical_not(good)))

        per_block = tf.data.Dataset.from_tensor_slices(serialized).interleave(
            alone, cycle_length=1).batch(1 << 30).map(rest)
        return whole.concatenate(per_block).take(1)

    def _block_rows(self, serialized: tf.Tensor) -> tf.Tensor:
        """Rows of a group's readable blocks (`tfpipe/rows` only), for resuming."""
        spec = {ROWS_KEY: tf.io.FixedLenFeature([], tf.int64)}
        return tf.data.Dataset.from_tensor_slices(serialized).map(
            lambda r: tf.io.parse_single_example(r, spec)[ROWS_KEY]).ignore_errors().reduce(
            tf.constant(0, tf.int64), lambda a, b: a + b)

    def one_pass(self, records: tf.data.Dataset, epoch: Any, step: Any = 0,
                 iteration: tf.Tensor | None = None) -> tf.data.Dataset:
        from tfpipe.pipeline._epochs import shuffle as _shuffle

        s = self.s
        train = self.split in TRAIN_SPLITS
        permute = train and s.shuffle_buffer > 1
        eseed = seeds.epoch_seed(seeds.global_seed(s.seed), epoch)
        ds = records
        if permute:  # the buffer holds about shuffle_buffer rows, in blocks
            ds = _shuffle(ds, max(2, -(-s.shuffle_buffer // self.rows_per_record)), eseed)
        ds = ds.batch(self.group).enumerate()
        wi, wc = self.worker
        zero = tf.constant(0, tf.int64)

        @tf.autograph.experimental.do_not_convert
        def seeded(g: tf.Tensor, kr: Any) -> tuple[Any, ...]:
            return kr[0], kr[1], group_seed(eseed, seeds.global_index(g, wi, wc)), zero

        ds = ds.map(seeded)
        if not (isinstance(step, int) and step == 0):
            # skip step * batch_size rows: whole groups by their tfpipe/rows (never
            # parsed further), then the first rows of the group where the step falls
            @tf.autograph.experimental.do_not_convert
            def skip(left: tf.Tensor, e: Any) -> tuple[Any, Any]:
                keys, ser, seed, _ = e
                rows = tf.cond(left > 0, lambda: self._block_rows(ser), lambda: zero)
                drop = tf.minimum(left, rows)
                return left - drop, (keys, ser, seed, drop, rows)

            ds = ds.scan(tf.cast(step, tf.int64) * s.batch_size, skip).filter(
                tf.autograph.experimental.do_not_convert(
                    lambda k, r, sd, drop, rows: tf.logical_or(drop < rows, tf.equal(drop, 0)))
            ).map(tf.autograph.experimental.do_not_convert(
                lambda k, r, sd, drop, rows: (k, r, sd, drop)))
        return self.guarded_batches(
            ds, lambda k, r, sd, d: self.guarded_group(k, r, sd, d, permute), iteration,
            s.drop_remainder if train else False)

    def batches(self) -> int | None:
        """Batches of one pass from the manifest's ROW counts (None when blocks are
        dealt to workers one by one: their rows then depend on the read order)."""
        from tfpipe.pipeline._cardinality import batches_of

        if self.elem_shard:
            return None
        rows = sum(self.shard_rows[f] for f in self.my_files)
        return batches_of(self.s, self.split, rows, "rows", self.worker)
