"""Which split a shard belongs to, from its file name (globs and plain directories).

A glob or a directory of shards has no manifest to list its splits, but shard
names nearly always carry them: tfpipe and most writers use
``train-00000-of-00004.tfrecord``, TFDS ``NAME-train.tfrecord-00000-of-00004``.
The split is the first *word* of the file name (split on anything that is not a
letter or digit) that is a known split name; when the name has none, the
directory holding the file when its whole name is one (``data/val/part-0.tfrecord``;
not ``test_runs/``). ``val`` and ``validation`` are one split (aliases).

Decisions (docs/own-records.md, "Globs and plain directories"):
- files naming splits: a split reads exactly its own files; a split no file
  names is an error that lists the files found and their splits -- never the
  old silent fallback where "val" read the training shards;
- files naming no split at all: they are read for ``train`` only (what a glob of
  bare shards has always meant); any other split is an error, because reading
  them would evaluate on the training data without a word.
"""

from __future__ import annotations

import glob as globlib
import os
import re
from collections.abc import Iterable, Sequence

from tfpipe.errors import InputError

# canonical split -> the words in file names that mean it (the canonical first)
SPLIT_WORDS: dict[str, tuple[str, ...]] = {
    "train": ("train",),
    "val": ("val", "validation"),
    "test": ("test",),
    "eval": ("eval",),
}
_WORD_TO_SPLIT = {w: split for split, words in SPLIT_WORDS.items() for w in words}
_WORD_RE = re.compile(r"[A-Za-z0-9]+")
# what a plain directory's shards look like: tfpipe's and TFDS's names, and the
# common `.tfrec` spelling, plain or GZIP
_SHARD_RE = re.compile(r"\.(tfrecord|tfrec)(\.gz)?($|-\d+-of-\d+$)|\.(tfrecord|tfrec)-\d+")
_SHOWN = 8  # files named in an error before "... and N more"


def canonical_split(split: str) -> str:
    """The canonical name of a split word (``validation`` -> ``val``); other
    names unchanged."""
    return _WORD_TO_SPLIT.get(split.lower(), split)


def split_aliases(split: str) -> tuple[str, ...]:
    """Every name a split is known by (``val`` -> ``("val", "validation")``)."""
    return SPLIT_WORDS.get(canonical_split(split), (split,))


def split_of(path: str | os.PathLike[str]) -> str | None:
    """The canonical split a shard's file name names, else the split its
    directory's whole name is, else None. Words are case-insensitive runs of
    letters and digits, so ``train_0.tfrecord`` and
    ``mnist-train.tfrecord-00000-of-00001`` are ``train`` but
    ``training.tfrecord`` and ``pretrain-0.tfrecord`` are not."""
    p = os.fspath(path)
    for word in _WORD_RE.findall(os.path.basename(p)):
        split = _WORD_TO_SPLIT.get(word.lower())
        if split is not None:
            return split
    # only a directory named exactly for a split: `test_x0/` (pytest) or
    # `test_runs/` say nothing about the split of what they hold
    return _WORD_TO_SPLIT.get(os.path.basename(os.path.dirname(os.path.abspath(p))).lower())


def is_shard_name(name: str) -> bool:
    """Whether a file name looks like a TFRecord shard (``.tfrecord``,
    ``.tfrecord.gz``, ``.tfrec``, TFDS's ``.tfrecord-00000-of-00004``)."""
    return bool(_SHARD_RE.search(name))


def directory_shards(directory: str | os.PathLike[str]) -> list[str]:
    """The TFRecord shard files directly inside a directory, sorted (hidden
    files -- a writer's temporaries -- are left out)."""
    d = os.fspath(directory)
    return sorted(f for f in globlib.glob(os.path.join(d, "*"))
                  if os.path.isfile(f) and is_shard_name(os.path.basename(f)))


def _listing(files: Sequence[str]) -> str:
    shown = ", ".join(f"{os.path.basename(f)} ({split_of(f) or 'no split'})"
                      for f in files[:_SHOWN])
    more = f", ... and {len(files) - _SHOWN} more" if len(files) > _SHOWN else ""
    return shown + more


def select_split(files: Iterable[str], split: str, where: str) -> list[str]:
    """The files of ``split`` among the shards of a glob or directory ``where``.

    Files naming a split: those naming ``split`` (or an alias). Files naming
    none: all of them for ``train``. Anything else raises `InputError` naming
    the files found, their splits and the way on."""
    files = list(files)
    want = canonical_split(split)
    named = {f: split_of(f) for f in files}
    mine = [f for f in files if named[f] == want]
    if mine:
        return mine
    present = sorted({s for s in named.values() if s is not None})
    if not present and want == "train":
        return files  # bare shards with no split in their names: the training data
    words = " or ".join(repr(w) for w in split_aliases(split))
    if present:
        why = (f"no file names split {split!r} (a word {words} in the file name, or a "
               f"directory so named); the files name the splits {present}")
    else:
        why = (f"no file names any split, and such shards are read as the training "
               f"split only: reading them for {split!r} would evaluate on the training "
               "data")
    raise InputError(
        f"{where}: {why}. Files found: {_listing(files)}. Name the {split!r} shards so "
        f"(e.g. {want}-00000-of-00001.tfrecord, or NAME-{want}.tfrecord-00000-of-00001), "
        "put them in a directory of that name, or run `tfpipe adopt` to write a manifest "
        "that lists each split's shards")


def bare_shards(path: str, split: str) -> list[str]:
    """The shards of ``split`` in a glob or a plain directory without a manifest
    (its TFRecord files, `directory_shards`), by `select_split`. Raises
    `InputError` when nothing matches."""
    if os.path.isdir(path):
        files = directory_shards(path)
        if not files:
            raise InputError(f"{path}: no manifest.json and no TFRecord shards (*.tfrecord, "
                             "*.tfrecord.gz, *.tfrec, NAME-SPLIT.tfrecord-00000-of-00004); "
                             "pass a dataset directory written by `tfpipe convert`, a "
                             "directory of shards or a glob of them")
        return select_split(files, split, path)
    files = sorted(f for f in globlib.glob(path) if os.path.isfile(f))
    if not files:
        raise InputError(f"no files match {path!r}; pass a dataset directory with "
                         "manifest.json, a directory of shards or a glob of .tfrecord[.gz] "
                         "shards")
    return select_split(files, split, repr(path))


def default_split(path: str) -> str:
    """The split a tool shows when none is asked for, for a glob or a directory
    of shards: ``train`` when some file is train (or names no split), else the
    first split the files name (a glob of ``val-*`` shards: ``val``)."""
    if os.path.isdir(path):
        files = directory_shards(path)
    else:
        files = sorted(f for f in globlib.glob(path) if os.path.isfile(f))
    named = {split_of(f) for f in files}
    if not files or "train" in named or None in named:
        return "train"
    return sorted(s for s in named if s is not None)[0]
