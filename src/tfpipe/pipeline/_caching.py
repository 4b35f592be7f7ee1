"""`pipeline.cache`: the cache file names (keyed by every setting that shapes the
stream and by the data's identity) and the cache stages (docs/pipeline.md, "Cache")."""

from __future__ import annotations

import hashlib
import os

import tensorflow as tf

from tfpipe.errors import ConfigError
from tfpipe.pipeline._settings import Settings
from tfpipe.pipeline._source import effective_cycle, shards_identity
from tfpipe.pipeline._tasks import task_of


def _cache_path(s: Settings, split: str, files: list[str], worker: tuple[int, int],
                what: str) -> str:
    """A cache file name that changes whenever what is cached would change: every
    setting that shapes the cached stream (which records, in which order, decoded
    how) and the identity of the data (`shards_identity`: the manifest's sha256 and
    each file's size and mtime), so a changed setting or data re-converted in place
    under the same names is read anew, never served stale (docs/pipeline.md, "Cache")."""
    from tfpipe import native

    # on_error: a cache filled under skip would hide from raise what it skipped
    keys = ("data_path", "task", "channels", "on_error")
    if what == "decoded":
        keys += ("image_size", "eval_crop_fraction", "max_boxes", "dct_scaling")
        keys += task_of(s).cache_keys  # (none for the first tasks: their names as before)
        if getattr(s, "keypoints", None) is not None:  # off: the names as before
            keys += ("keypoints",)
    if s.keys is not None:  # a mapping changes what is parsed; without one, the names as before
        keys += ("keys",)
    tag = s.fingerprint(*keys)
    stream = {
        # the record order: the interleave width as the reader resolves it
        "cycle": effective_cycle(s.interleave_cycle, len(files)),
        # with several workers, batch_size decides file vs element sharding
        "sharding_batch": s.batch_size if worker[1] > 1 else None,
        # the native library reads past framing damage (and decodes), the fallback not
        "native": native.available(),
    }
    import json

    key = "\n".join(files) + "\n" + json.dumps(stream, sort_keys=True) + "\n" + \
        shards_identity(files)
    files_hash = hashlib.sha256(key.encode()).hexdigest()[:16]
    try:  # fail at build time, not silently inside the iterator
        os.makedirs(s.cache, exist_ok=True)
        probe = os.path.join(s.cache, ".tfpipe-write-test")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        raise ConfigError(f"pipeline.cache: cannot write to {s.cache!r} ({e}); use 'none', "
                          "'memory' or a writable directory") from None
    return os.path.join(s.cache, f"{split}-{what}-{tag}-{files_hash}-w{worker[0]}of{worker[1]}")


def _cache(ds: tf.data.Dataset, s: Settings, split: str, files: list[str],
           worker: tuple[int, int], what: str) -> tf.data.Dataset:
    if s.cache == "none":
        return ds
    if s.cache == "memory":
        return ds.cache()
    return ds.cache(_cache_path(s, split, files, worker, what))


def _cache_batches(ds: tf.data.Dataset, s: Settings, split: str, files: list[str],
                   worker: tuple[int, int]) -> tf.data.Dataset:
    """eval's `pipeline.cache`: the decoded uint8 batches (named as the decoded
    cache, plus the batch size)."""
    if s.cache == "none":
        return ds
    if s.cache == "memory":
        return ds.cache()
    return ds.cache(_cache_path(s, split, files, worker, "decoded") + f"-batches{s.batch_size}")


cache_path, cache, cache_batches = _cache_path, _cache, _cache_batches
