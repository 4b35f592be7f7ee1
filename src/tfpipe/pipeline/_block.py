"""The block path: a whole block of records becomes a batch in one map.

The per-element path (`_errors.guarded_map`) runs ~11 tf.data steps per sample
(plan blocks, unbatch, the guarded map, ignore_errors, batch, the settling
scan, ...). For the pipelines whose per-sample work is exactly one native
decode-crop-resize-flip of a JPEG, this path takes `batch_size` records at a
time instead and never makes a per-sample tensor (docs/pipeline.md, "Block
path"):

    enumerate -> [skip] -> batch(batch_size) of (local, (shard, record, serialized))
      -> per block, isolated: only parse_example (image, label) (`_parsed`; the
         one step bad input can make fail: the op reports bad rows in its
         status); a block it rejects is parsed row by row, each row isolated
      -> one parallel map over blocks (its function instantiated once per iterator):
           Classify.plan(local) (the same draws)
           -> mode / flip per row -> ONE decode_crop_resize_block call
           -> rows the op does not decode (status 1: PNG, GIF, BMP) through
              `Classify.process`, each isolated, scattered back (only when a
              block has such rows: tf.cond)
      -> report (sequential: the count is a read-modify-write): rows that
         failed are logged and counted (skip) or fail the pipeline (raise),
         with the message the per-element path gives, and are removed
      -> rebatch(batch_size): batches formed from the surviving samples in
         order, as the per-element path forms them
      -> (the caller) enumerate batches -> Classify.compose, unchanged.

Every row's bytes are the per-element path's (the op's contract: row i equals
`decode_crop_resize` / `eval_image` of that row; tests/pipeline/
test_block_path.py compares whole pipelines), so the path needs no config
switch. Benchmarks and tests compare the variants in one process, with no
environment variable: `forced(False)` keeps the per-element path,
`structure("isolated")` the structure before (the whole block function isolated
per block), `write_out(False)` the uint8 block with L3 + normalize in compose.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator, Sequence

import tensorflow as tf

from tfpipe import augment
from tfpipe.pipeline._errors import log_and_count_skipped
from tfpipe.pipeline._source import IMAGE_KEY, LABEL_KEY
from tfpipe.pipeline._tasks import task_of

_FORCED: list[bool] = []  # innermost `forced(...)` wins (benchmarks, tests)
_WRITE_OUT: list[bool] = []  # innermost `write_out(...)` wins (benchmarks, tests)

# modes and statuses of `native.jpeg.decode_crop_resize_block`
RRC, WHOLE, EVAL = 0, 1, 2
OK, NOT_JPEG = 0, 1


@contextlib.contextmanager
def _pushed(stack: list[Any], value: Any) -> Iterator[None]:
    """`value` on top of `stack` within the block: the innermost choice wins."""
    stack.append(value)
    try:
        yield
    finally:
        stack.pop()


@contextlib.contextmanager
def forced(on: bool) -> Iterator[None]:
    """Pipelines built inside take (`on`) or do not take the block path where
    eligible; the choice is made when the pipeline is built (traced)."""
    with _pushed(_FORCED, bool(on)):
        yield


def enabled() -> bool:
    return _FORCED[-1] if _FORCED else True


@contextlib.contextmanager
def write_out(on: bool) -> Iterator[None]:
    """Block-path pipelines built inside do (`on`, the default) or do not run the
    batch stage's colour chain + normalize inside the block kernel; without it the
    block stays uint8 and compose runs them. The same bytes (for comparisons)."""
    with _pushed(_WRITE_OUT, bool(on)):
        yield


def _write_out_on() -> bool:
    return _WRITE_OUT[-1] if _WRITE_OUT else True


# Structures: "map" (the default) isolates only parse_example per block and
# decodes in one parallel map; "isolated" (the structure before) isolates the
# whole block function per block. Same bytes.
STRUCTURES = ("map", "isolated")
_STRUCTURE: list[str] = []


@contextlib.contextmanager
def structure(name: str) -> Iterator[None]:
    """Block-path pipelines built inside use structure `name` (one of
    `STRUCTURES`; for benchmarks and tests comparing them in one process)."""
    if name not in STRUCTURES:
        raise ValueError(f"block structure: one of {STRUCTURES}, got {name!r}")
    with _pushed(_STRUCTURE, name):
        yield


def _structure() -> str:
    return _STRUCTURE[-1] if _STRUCTURE else "map"


def _op_available() -> bool:
    from tfpipe.native import jpeg as native_jpeg

    return native_jpeg.has_decode_crop_resize_block()


def _spec(spec_of: Callable[..., dict[str, Any]] | None) -> dict[str, Any] | None:
    """`tf.io.parse_example` features for (image, label) from the source's
    `parse_spec`; None when there is none or a feature is not fixed-length (then
    the per-element path runs)."""
    if spec_of is None:
        return None
    try:
        spec = spec_of((IMAGE_KEY, LABEL_KEY))
    except Exception:  # noqa: BLE001 - e.g. no label feature: the per-element path decides
        return None
    if not all(isinstance(f, tf.io.FixedLenFeature) for f in spec.values()):
        return None
    return spec


# Mean encoded bytes per record from which the per-element path is the default
# (docs/pipeline.md, "Block path"): such records take milliseconds each to decode,
# so the per-element machinery the block path saves (~0.1 ms a sample) is a few
# percent, while a block of them is tens of MB of parsed strings (fresh pages
# every block: +7% CPU per image measured at 570 KB) and a coarse unit of work
# (an epoch's last blocks leave a core idle: 1.80 vs 1.93 cores busy). Measured
# at photo size (1.5-3 MP, 570 KB): per-element 1.41-1.51x decode-only, block
# path 1.27-1.38x; at ImageNet size (26 KB) the block path wins (1.10x vs 0.86x).
LARGE_RECORD_BYTES = 256 * 1024


def mean_record_bytes(files: Sequence[str]) -> float | None:
    """Mean size of one record of `files` (the manifest's shard bytes / record
    counts; nothing is read but the manifest), or None without an entry for every
    shard."""
    from tfpipe.records import shard_sizes

    files = list(files)
    sizes = shard_sizes(files)
    if not files or any(f not in sizes for f in files):
        return None
    records = sum(sizes[f][0] for f in files)
    if records == 0:
        return None
    return sum(sizes[f][1] for f in files) / records


def eligible(builder: Any, parse_spec: Callable[..., Any] | None, train: bool,
             files: Sequence[str] = ()) -> bool:
    """Whether the block path computes exactly what `builder.process` does per
    sample: classification; train geometry exactly [random_resized_crop
    (bilinear), optional horizontal-only flip] on the fused kernel (or no
    augmentation at all, or an eval split: the centre crop); the block op built.
    Unless `forced`, records of `files` averaging `LARGE_RECORD_BYTES` or more
    keep the per-element path (faster there, same bytes)."""
    s = builder.s
    if not enabled() or not task_of(s).block_path or not _op_available():
        return False
    if not _FORCED and files:
        mean = mean_record_bytes(files)
        if mean is not None and mean >= LARGE_RECORD_BYTES:
            return False
    if _spec(parse_spec) is None:
        return False
    if train and builder.augmenting:
        geometry = s.active("geometry")
        return bool(builder.fast_crop and builder.fused_l1
                    and len(geometry) == 1 + int(builder.fast_flip))
    return True  # every row is the eval rendering (`Classify.eval_image`)


def _ratio(op: Any) -> tuple[float, float]:
    v = op.params.get("ratio", augment.CROP_RATIO)  # the default `Classify` uses
    return float(v[0]), float(v[1])


WRITTEN = "_written"  # a block whose rows the op's write-out finished (compose skips L3)


def write_out_spec(builder: Any, train: bool) -> Any:
    """What `compose` would still do to each row of a block, when the block op can
    do it in its write-out instead (native `WriteOut`: the colour chain + normalize
    of each decoded row while it is in cache): a train pipeline on the host
    (`pixel_stage: host`), no L4 op (mixup / cutmix mix rows), and an L3 chain
    `TfpipePixelChain` runs (brightness, contrast, saturation) or none; with uint8
    output and no L3 there is nothing to write out. None: the block stays uint8;
    else a `native.jpeg.WriteOut` without its per-block tensors (enabled rows run
    L3 where it has ops)."""
    from tfpipe.native import jpeg as native_jpeg

    s = builder.s
    if not train or builder.device or builder.batch_ops:
        return None
    float_out = s.output_dtype == "float32"
    stage = builder.l3_stage
    if stage.ops:
        if stage.fused is None or not stage.fused.native():
            return None
        ops = tuple(op.name for op in stage.fused.ops)
        gated = tuple(op.p < 1.0 for op in stage.fused.ops)
    elif float_out:
        ops, gated = (), ()
    else:
        return None
    return native_jpeg.WriteOut(ops=ops, gated=gated, float_out=float_out,
                                mean=tuple(float(v) for v in s.mean),
                                std=tuple(float(v) for v in s.std))


def _row_inputs(builder: Any, spec: Any, local: tf.Tensor,
                row: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(params, apply, enabled) of a block's rows for the write-out: the L3 draws
    `BatchStage.pixel_inputs` makes from the same local indices, and which rows run
    the chain -- `augment_batch`'s choice: all of them without an enable gate, the
    `_enabled` ones with it, none without L3 (then every row is the plain
    rendering, `normalize` of the levels)."""
    n = tf.shape(local)[0]
    k = len(spec.ops)
    if not spec.ops:
        return tf.zeros([n, 0], tf.float32), tf.zeros([n, 0], tf.bool), tf.zeros([n], tf.bool)
    inputs = builder.batch_stage.pixel_inputs({"_local": local})
    params = tf.reshape(inputs["_pparams"], [n, k])
    apply = tf.reshape(inputs["_papply"], [n, k])
    gate = builder.s.enable_rate < 1.0  # as BatchStage.augment gates (L3 present)
    enabled = row["_enabled"] if gate else tf.ones([n], tf.bool)
    return params, apply, enabled


def _finish_rows(builder: Any, images: tf.Tensor, label: tf.Tensor, local: tf.Tensor,
                 enabled: tf.Tensor | None) -> tf.Tensor:
    """uint8 rows (from the per-sample fallback) -> what the write-out makes of
    them: the batch stage's own L3 + normalize of these rows (per row, so any
    subset of a block gives each row's bytes)."""
    batch = {"_local": local}
    if enabled is not None:
        batch["_enabled"] = enabled
    x, _ = builder.batch_stage.augment(batch, images, label, tf.constant(0, tf.int64))
    return x


def _or_else(args: tuple[Any, ...], f: Callable[..., Any], fallback: Callable[..., Any]
             ) -> tf.data.Dataset:
    """A one-element dataset: `f(*args)`, or `fallback(*args)` where `f` raises
    (the isolation `_errors.isolate` uses: ignore_errors drops the failed element)."""
    good = tf.data.Dataset.from_tensors(args).map(f).ignore_errors()
    return good.concatenate(tf.data.Dataset.from_tensors(args).map(fallback)).take(1)


def _each_row(elems: tuple[Any, ...], f: Callable[..., Any], fallback: Callable[..., Any]
              ) -> Any:
    """`f` of each row of `elems` (a tuple of [n, ...] structures), each row isolated
    by `_or_else` -> the rows stacked."""
    n = tf.cast(tf.shape(tf.nest.flatten(elems)[0])[0], tf.int64)
    one = tf.autograph.experimental.do_not_convert(lambda *e: _or_else(e, f, fallback))
    return tf.data.Dataset.from_tensor_slices(elems).flat_map(one).batch(n).get_single_element()


def _per_row(builder: Any, elems: tuple[Any, ...]) -> dict[str, tf.Tensor]:
    """`builder.process` of each row of `elems` ((shard, record, local,
    serialized[, plan rows]) vectors), each row isolated as `_errors.isolate`
    does it: a row that fails gives the sentinel with ok=False. -> stacked."""
    process = tf.autograph.experimental.do_not_convert(builder.process)
    sentinel = tf.autograph.experimental.do_not_convert(builder.sentinel)
    return _each_row(elems, lambda *x: {**process(*x), "ok": tf.constant(True)},
                     lambda *x: {**sentinel(*x), "ok": tf.constant(False)})


def _parse_block(serialized: tf.Tensor, spec: dict[str, Any]) -> tuple[tf.Tensor, tf.Tensor]:
    """(encoded [n] string, label [n] int64) of a block of serialized records: one
    `parse_example` (fails as a whole if any record is rejected)."""
    n = tf.shape(serialized)[0]
    feats = tf.io.parse_example(serialized, spec)
    # `_spec` lists (image, label) in that order: the record's own keys under data.keys
    image_key, label_key = spec
    return (tf.reshape(feats[image_key], [n]),
            tf.cast(tf.reshape(feats[label_key], [n]), tf.int64))


def _parse_rows(serialized: tf.Tensor, spec: dict[str, Any]
                ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`_parse_block` of a block it failed on, row by row, each row isolated (as
    `_errors.isolate` does it): (encoded, label, parsed); a rejected row is ("",
    -1, False)."""

    @tf.autograph.experimental.do_not_convert
    def parse_one(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        encoded, label = _parse_block(tf.reshape(x, [1]), spec)
        return encoded[0], label[0], tf.constant(True)

    @tf.autograph.experimental.do_not_convert
    def rejected(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        return tf.constant(""), tf.constant(-1, tf.int64), tf.constant(False)

    return _each_row((serialized,), parse_one, rejected)


def _decode_block(builder: Any, spec: dict[str, Any], plan: Callable[..., Any] | None,
                  train: bool, wspec: Any = None
                  ) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """(fast, slow, decoded) block functions of (local, shard, record, serialized)
    vectors -> {image, label, _local, _shard, _record, ok[, _enabled][, _written]}.
    `slow` is every row through `_per_row` (for a block `fast` failed on, e.g. a
    record parse_example rejects; the "isolated" structure); `decoded` is `fast`
    after the parse, of (..., encoded, label, parsed) (the "map" structure).
    With `wspec` (`write_out_spec`) the images are the finished rows (the op's
    write-out; fallback rows through `_finish_rows`)."""
    from tfpipe.native import jpeg as native_jpeg

    s = builder.s
    h, w = s.image_size
    size = (int(h), int(w))
    geometry = s.active("geometry") if train else []
    ratio = _ratio(geometry[0]) if geometry else augment.CROP_RATIO
    crop_fraction = float(s.eval_crop_fraction)

    def rows_of(local: tf.Tensor, shard: tf.Tensor, rec: tf.Tensor, serialized: tf.Tensor
                ) -> tuple[tuple[Any, ...], dict[str, tf.Tensor]]:
        row = plan(local) if plan is not None else None
        elems = (shard, rec, local, serialized) + ((row,) if row is not None else ())
        return elems, row or {}

    def finish(local: tf.Tensor, shard: tf.Tensor, rec: tf.Tensor, image: tf.Tensor,
               label: tf.Tensor, ok: tf.Tensor, row: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        out = {"image": tf.ensure_shape(image, [None, size[0], size[1], s.channels]),
               "label": tf.ensure_shape(label, [None]), "_local": local, "_shard": shard,
               "_record": rec, "ok": ok}
        if "_enabled" in row:  # as `process` carries it (enable_rate < 1)
            out["_enabled"] = row["_enabled"]
        if wspec is not None:
            out[WRITTEN] = tf.zeros(tf.shape(local), tf.bool)
        return out

    def finished(images: tf.Tensor, label: tf.Tensor, local: tf.Tensor,
                 row: dict[str, tf.Tensor]) -> tf.Tensor:
        if wspec is None:
            return images
        return _finish_rows(builder, images, label, local, row.get("_enabled"))

    @tf.autograph.experimental.do_not_convert
    def fast(local: tf.Tensor, shard: tf.Tensor, rec: tf.Tensor, serialized: tf.Tensor
             ) -> dict[str, tf.Tensor]:
        encoded, label = _parse_block(serialized, spec)
        return decoded(local, shard, rec, serialized, encoded, label, None)

    @tf.autograph.experimental.do_not_convert
    def decoded(local: tf.Tensor, shard: tf.Tensor, rec: tf.Tensor, serialized: tf.Tensor,
                encoded: tf.Tensor, label: tf.Tensor, parsed: tf.Tensor | None
                ) -> dict[str, tf.Tensor]:
        """The block from its parsed (encoded, label) rows; `parsed` (None: all):
        the rows parse_example accepted -- the others are failed rows, never decoded
        (their empty `encoded` would say "not a JPEG")."""
        n = tf.shape(local)[0]
        elems, row = rows_of(local, shard, rec, serialized)
        if train and builder.augmenting:
            mode = tf.fill([n], tf.constant(RRC, tf.int32))
            if "_crop_on" in row:  # the crop's p-coin said no: the whole image, resized
                mode = tf.where(row["_crop_on"], mode, WHOLE)
            flip = row["_flip"] if "_flip" in row else tf.zeros([n], tf.bool)
            if "_enabled" in row:  # not augmented: the eval rendering, never flipped
                mode = tf.where(row["_enabled"], mode, EVAL)
                flip = tf.logical_and(flip, row["_enabled"])
            draws = row["_crop"]
        else:
            mode = tf.fill([n], tf.constant(EVAL, tf.int32))
            flip = tf.zeros([n], tf.bool)
            draws = tf.zeros([n, 4, 1], tf.float32)  # ignored by mode 2
        write_out = None
        if wspec is not None:
            params, apply, enabled = _row_inputs(builder, wspec, local, row)
            write_out = dataclasses.replace(wspec, params=params, apply=apply,
                                            enabled=enabled)
        images, status, _ = native_jpeg.decode_crop_resize_block(
            encoded, draws, mode, flip, size, ratio, s.channels, s.dct_scaling, crop_fraction,
            write_out)
        good = tf.equal(status, OK)
        other = tf.equal(status, NOT_JPEG)
        if parsed is not None:
            good = tf.logical_and(good, parsed)
            other = tf.logical_and(other, parsed)

        def redo() -> tuple[tf.Tensor, ...]:
            """The rows that are no JPEG through the per-sample path, scattered back."""
            at = tf.where(other)[:, 0]
            got = _per_row(builder, tf.nest.map_structure(lambda t: tf.gather(t, at), elems))
            pos = at[:, None]
            sub = {k: tf.gather(v, at) for k, v in row.items()}
            fixed = finished(got["image"], got["label"], tf.gather(local, at), sub)
            return (tf.tensor_scatter_nd_update(images, pos, fixed),
                    tf.tensor_scatter_nd_update(label, pos, got["label"]),
                    tf.tensor_scatter_nd_update(good, pos, got["ok"]))

        image, label, ok = tf.cond(tf.reduce_any(other), redo,
                                   lambda: (images, label, good))
        return finish(local, shard, rec, image, label, ok, row)

    @tf.autograph.experimental.do_not_convert
    def slow(local: tf.Tensor, shard: tf.Tensor, rec: tf.Tensor, serialized: tf.Tensor
             ) -> dict[str, tf.Tensor]:
        elems, row = rows_of(local, shard, rec, serialized)
        got = _per_row(builder, elems)
        image = finished(got["image"], got["label"], local, row)
        return finish(local, shard, rec, image, got["label"], got["ok"], row)

    return fast, slow, decoded


def _report(files: list[str], policy: str, iteration: tf.Tensor | None = None,
            on_failed: Callable[[tf.Tensor], Any] | None = None
            ) -> Callable[[dict[str, tf.Tensor]], Any]:
    """Per block, sequential: the failed rows logged + counted (skip) or the
    pipeline failed (raise), as `_errors.isolate` words it; then removed.
    `iteration` / `on_failed`: as `_errors.guarded_map` takes them."""
    paths = tf.constant(files)

    @tf.autograph.experimental.do_not_convert
    def report(blk: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        ok = blk["ok"]
        bad = tf.logical_not(ok)

        def messages() -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
            where = tf.boolean_mask(blk["_shard"], bad)
            shard_paths = tf.gather(paths, where)
            msgs = tf.strings.join(
                ["tfpipe: bad record ", tf.strings.as_string(tf.boolean_mask(blk["_record"], bad)),
                 " in shard ", shard_paths, f" (pipeline.on_error={policy})"])
            return msgs, shard_paths, where

        if policy == "raise":
            def first() -> tf.Tensor:
                return messages()[0][0]
            msg = tf.cond(tf.reduce_all(ok), lambda: tf.constant(""), first)
            check = tf.debugging.Assert(tf.reduce_all(ok), [msg], summarize=1)
            with tf.control_dependencies([check]):
                ok = tf.identity(ok)
        else:
            def log_and_count() -> tf.Tensor:
                msgs, shard_paths, shard_ids = messages()
                logged = log_and_count_skipped(msgs, shard_paths, shard_ids, iteration)
                if on_failed is None:
                    return logged
                with tf.control_dependencies(
                        [logged, on_failed(tf.boolean_mask(blk["_local"], bad))]):
                    return tf.constant(True)

            reported = tf.cond(tf.reduce_any(bad), log_and_count, lambda: tf.constant(False))
            with tf.control_dependencies([reported]):
                ok = tf.identity(ok)
        keep = {k: v for k, v in blk.items() if k not in ("ok", "_shard", "_record")}
        # a block without failures passes its tensors through (no copy)
        return tf.cond(tf.reduce_all(ok), lambda: dict(keep),
                       lambda: {k: tf.boolean_mask(v, ok) for k, v in keep.items()})

    return report


def batches(ds: tf.data.Dataset, builder: Any, parse_spec: Callable[..., Any] | None,
            files: list[str],
            policy: str, parallel: int, deterministic: bool, train: bool, drop_remainder: bool,
            cache: Callable[[tf.data.Dataset], tf.data.Dataset] | None = None,
            write_out: bool = True, iteration: tf.Tensor | None = None,
            on_failed: Callable[[tf.Tensor], Any] | None = None) -> tf.data.Dataset:
    """`(local, (shard, record, serialized))` elements (after enumerate and the
    resume skip) -> uint8 batches {image, label, _local[, _enabled]}: what
    `guarded_map` + batch + after_batch give for the same records (`iteration`,
    `on_failed`: as `guarded_map` takes them). `cache` (eval) is applied to the
    reported blocks, before they are rebatched.
    `write_out` (where `write_out_spec` allows it): the images leave finished
    (L3 + normalize, float32 or uint8) with `_written`, which `compose` then
    skips; off where the batches are shipped before compose (tf.data service)."""
    s = builder.s
    spec = _spec(parse_spec)
    assert spec is not None, "block path taken for an ineligible pipeline"
    plan = builder.plan if train and builder.augmenting else None
    wspec = write_out_spec(builder, train) if write_out and _write_out_on() else None
    fast, slow, decoded = _decode_block(builder, spec, plan, train, wspec)
    blocks = ds.batch(s.batch_size)
    npar = parallel if parallel == -1 else max(1, parallel)
    cycle = max(1, abs(npar)) if npar > 0 else None
    if _structure() == "isolated":
        @tf.autograph.experimental.do_not_convert
        def isolated(local: tf.Tensor, elem: tuple[tf.Tensor, ...]) -> tf.data.Dataset:
            # A block `fast` fails on (a record parse_example rejects, ...) goes row by
            # row: only the bad record is lost (`slow` isolates each row).
            return _or_else((local, *elem), fast, slow)

        out = blocks.interleave(isolated, cycle_length=cycle, block_length=1,
                                num_parallel_calls=npar, deterministic=deterministic)
    else:
        out = _parsed(blocks, spec, cycle, npar, deterministic).map(
            decoded, num_parallel_calls=npar, deterministic=deterministic)
    report = _report(files, policy, iteration, on_failed)
    # A scan, like the per-element path's settling step: ordered and one block at a
    # time by construction (the count update is a read-modify-write), where a
    # stateful map would only be sequential because tf.data cannot rewrite it.
    out = out.scan(tf.constant(0, tf.int64),
                   tf.autograph.experimental.do_not_convert(lambda st, blk: (st, report(blk))))
    if cache is not None:
        out = cache(out)
    # Without a failed row every block already is the per-element path's batch;
    # rebatch re-forms batches from the surviving samples in order after one.
    return out.rebatch(s.batch_size, drop_remainder=drop_remainder)


def _parsed(blocks: tf.data.Dataset, spec: dict[str, Any], cycle: int | None, npar: int,
            deterministic: bool) -> tf.data.Dataset:
    """(local, (shard, record, serialized)) blocks -> (local, shard, record,
    serialized, encoded, label, parsed): only `parse_example` (the one step bad
    input can make fail: the block op reports a bad row in its status) is
    isolated per block; a block it rejects is parsed row by row (`_parse_rows`)."""

    @tf.autograph.experimental.do_not_convert
    def whole(local: tf.Tensor, shard: tf.Tensor, rec: tf.Tensor, serialized: tf.Tensor
              ) -> tuple[tf.Tensor, ...]:
        encoded, label = _parse_block(serialized, spec)
        return (local, shard, rec, serialized, encoded, label,
                tf.ones(tf.shape(local), tf.bool))

    @tf.autograph.experimental.do_not_convert
    def by_row(local: tf.Tensor, shard: tf.Tensor, rec: tf.Tensor, serialized: tf.Tensor
               ) -> tuple[tf.Tensor, ...]:
        return (local, shard, rec, serialized) + _parse_rows(serialized, spec)

    @tf.autograph.experimental.do_not_convert
    def isolated(local: tf.Tensor, elem: tuple[tf.Tensor, ...]) -> tf.data.Dataset:
        return _or_else((local, *elem), whole, by_row)

    return blocks.interleave(isolated, cycle_length=cycle, block_length=1,
                             num_parallel_calls=npar, deterministic=deterministic)


def cache_blocks(ds: tf.data.Dataset, mode: str, path: Callable[[], str]) -> tf.data.Dataset:
    """`pipeline.cache` for the eval blocks: a file of its own (the per-element
    path caches samples, not blocks, under the same key)."""
    if mode == "none":
        return ds
    if mode == "memory":
        return ds.cache()
    return ds.cache(path() + "-blocks")
