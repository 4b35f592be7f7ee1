"""Building the tabular pipeline (docs/tabular.md, "Pipeline" and "Packed layout"):
`build` (the tabular task's `pipeline`), the row or packed `Tabular` chosen from
the manifest (`make_tabular`), and `raw_rows` (export's warm-up requests). Apart
from `_tabular` so that the packed layout (`_tabular_pack`) can build on it."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe.pipeline._epochs import TRAIN_SPLITS
from tfpipe.pipeline._options import options
from tfpipe.pipeline._settings import AUTOTUNE, Settings
from tfpipe.pipeline import _tabular
from tfpipe.pipeline._tabular import Tabular, float64_bits_as_float32


def make_tabular(s: Settings, split: str, worker: tuple[int, int]) -> Tabular:
    """`Tabular`, or `PackedTabular` when the manifest's schema is the packed layout's."""
    t = _tabular.Tabular(s, split, worker)  # by module: benchmarks swap it
    if not t.packed:
        return t
    from tfpipe.pipeline._tabular_pack import PackedTabular

    return PackedTabular(s, split, worker, t.transforms)


def _cache(ds: tf.data.Dataset, s: Settings, t: Tabular, what: str) -> tf.data.Dataset:
    if s.cache == "none":
        return ds
    if s.cache == "memory":
        return ds.cache()
    from tfpipe.pipeline._caching import cache_path as _cache_path

    # the transforms' statistics hash and the config's columns key a transformed cache
    tag = f"{t.transforms.stats_sha256 or 'nostats'}-{hash_features(s)}"[:40]
    return ds.cache(_cache_path(s, t.split, t.my_files, t.worker, f"tabular-{what}-{tag}"))


def hash_features(s: Settings) -> str:
    import hashlib
    import json

    blob = json.dumps(s.features.to_dict(), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def build(s: Settings, split: str, epoch: int, worker: tuple[int, int], step: int
          ) -> tf.data.Dataset:
    """`build_pipeline` for a config with a `features:` section (see module doc)."""
    from tfpipe.pipeline._cardinality import declare as _declare
    from tfpipe.pipeline._cardinality import pass_report as _pass_report
    from tfpipe.pipeline._epochs import epochs_from
    from tfpipe.pipeline._errors import new_iteration

    t = make_tabular(s, split, worker)
    records = t.records()
    n = None if step else t.batches()
    if split not in TRAIN_SPLITS:
        what = tf.constant(f"{split} pass")

        @tf.autograph.experimental.do_not_convert
        def eval_pass(_: tf.Tensor) -> tf.data.Dataset:
            it = new_iteration()
            return _pass_report(t.one_pass(records, epoch, iteration=it), n, s, what,
                                t.my_files, it)
        ds = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).flat_map(eval_pass)
        # parsed + transformed is what pays to cache: eval passes repeat it unchanged
        out = _declare(_cache(ds, s, t, "transformed"), n, s)
        counter = None
    else:
        records = _cache(records, s, t, "keyed-records")
        first = tf.constant(epoch, tf.int64)

        def one(e: tf.Tensor) -> tf.data.Dataset:
            at = tf.where(tf.equal(e, first), tf.constant(step, tf.int64), 0) if step else 0
            what = tf.strings.join(["train epoch ", tf.strings.as_string(e)])
            it = new_iteration()
            return _pass_report(t.one_pass(records, e, at, it), n, s, what, t.my_files, it)

        epochs = epochs_from(epoch, one)
        counter = epochs._tfpipe_epoch_counter  # noqa: SLF001 - set by epochs_from
        out = _declare(epochs, n, s)
    out = out.with_options(options(s))
    out = out.prefetch(s.prefetch if s.prefetch != AUTOTUNE else tf.data.AUTOTUNE)
    if counter is not None:
        out._tfpipe_epochs = (counter, epoch)  # noqa: SLF001 - read by set_epoch
    out._tfpipe_transforms = t.transforms  # noqa: SLF001 - read by tabular_transforms
    return out


def raw_rows(config: Any, n: int, split: str = "train") -> dict[str, Any]:
    """The first `n` records of `split` in serving-input form: NumPy arrays per raw
    column the transforms read, plus `<column>__missing` for the nullable ones
    (export's warm-up requests)."""
    import numpy as np

    from tfpipe.features import MISSING_SUFFIX
    from tfpipe.pipeline._settings import settings

    t = make_tabular(settings(config), split, (0, 1))
    spec = {k: v for k, v in t.spec.items() if k in t.transforms.raw_spec}
    # the first n records: n rows, or n blocks of at least one row each (packed)
    serialized = next(iter(tf.data.TFRecordDataset(t.files, t.compression or "").batch(n)))
    if t.packed:  # the first n rows of those blocks
        raw = t.raw_group(serialized, None)  # type: ignore[attr-defined]
        parsed = {c: (tf.sparse.slice(v, [0, 0], [n, 1]) if isinstance(v, tf.SparseTensor)
                      else v[:n]) for c, v in raw.items() if c in spec}
    else:
        parsed = tf.io.parse_example(serialized, spec)
    out: dict[str, Any] = {}
    for c, v in parsed.items():
        if c in t.float64_bits:  # served as the float32 the transforms take
            v = float64_bits_as_float32(v)
        if isinstance(v, tf.SparseTensor):
            ragged = tf.RaggedTensor.from_sparse(v)
            fill = "" if v.dtype == tf.string else 0
            out[c] = ragged.to_tensor(default_value=fill, shape=[None, 1])[:, 0].numpy()
            out[c + MISSING_SUFFIX] = (ragged.row_lengths() == 0).numpy()
        else:
            out[c] = v.numpy()
    for c in t.transforms.nullable:  # nullable, but stored fixed in this split
        out.setdefault(c + MISSING_SUFFIX, np.zeros(len(out[c]), bool))
    return out
