"""Peers that sidestep the GIL: Grain (threads, worker processes), OpenCV with the
colour chain fused into one `cv2.LUT` pass, a `multiprocessing.Pool` -- all doing the
same work as the tfpipe imagenet train row of benchmarks/pipeline_bench.py:

    decode (full) -> random-resized crop (torchvision window, scale [0.08, 1],
    ratio [3/4, 4/3]) -> bilinear resize to 224 -> horizontal flip (p 0.5) ->
    brightness (+-0.4) and contrast ([0.6, 1.4], per-channel mean) -> clip ->
    ImageNet normalize -> float32 batches of 64x224x224x3.

The colour chain is per-channel monotone once the image's channel means are known
(an exact integer sum), so brightness + contrast + clip + normalize is ONE
256-entry float32 table per channel, applied by `cv2.LUT` (a single pass that
releases the GIL). Decode, crop and resize are OpenCV's (they release the GIL
too), so threads scale; worker processes pay for sending float32 batches back.

Imported by pipeline_bench.py (`variants`) and preset_bench.py (`Loader`,
`read_records`). Every loader yields `{"image": tf.Tensor, "label": tf.Tensor}`
batches -- what a Keras train step consumes -- and has `repeat()`, so
`tfpipe.bench.measure` times it exactly like a `tf.data.Dataset`. Encoded records
are read from the shards once, before timing (the peers do no I/O while timed;
tfpipe reads its page-cached shards inside the timed loop).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float64)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float64)
WORKERS = 2  # the machine's cores (PERF-NOTES: 2 vCPU)


# ----------------------------------------------------------------------------- data

def read_records(data: str | Path, split: str = "train") -> list[tuple[bytes, int]]:
    """(encoded image, label) of every record of a converted dataset, read once."""
    import tensorflow as tf

    from tfpipe.bench.baselines import read_records as tf_records, shard_files

    files, compression = shard_files(str(data), split)
    return [(bytes(e.numpy()), int(y.numpy())) for e, y in tf_records(files, compression=compression)]


def rrc_window(rng: np.random.Generator, h: int, w: int, scale: Sequence[float] = (0.08, 1.0),
               ratio: Sequence[float] = (3 / 4, 4 / 3)) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop window (y, x, ch, cw): 10 tries, then centre."""
    from tfpipe.bench.baselines import rrc_window as window

    return window(rng, h, w, scale, ratio)


# ----------------------------------------------------------------------------- imagenet sample

def colour_lut(means: np.ndarray, delta: float, factor: float,
               mean: np.ndarray = IMAGENET_MEAN, std: np.ndarray = IMAGENET_STD) -> np.ndarray:
    """float32 [256, 1, C]: level v -> normalize(clip(contrast(clip(v/255 + delta)))).

    `means` are the image's channel means on the 0..255 scale; contrast uses the
    mean after brightness (clip(m/255 + delta): exact unless the shift clips)."""
    v = np.arange(256, dtype=np.float64)[:, None] / 255.0
    b = np.clip(v + delta, 0.0, 1.0)
    m = np.clip(np.asarray(means, np.float64)[None] / 255.0 + delta, 0.0, 1.0)
    c = np.clip((b - m) * factor + m, 0.0, 1.0)
    return ((c - mean[None]) / std[None]).astype(np.float32)[:, None, :]


def imagenet_sample(data: bytes, index: int, seed: int = 0, size: int = 224) -> np.ndarray:
    """One sample of the imagenet train recipe with OpenCV + one fused LUT pass."""
    import cv2

    rng = np.random.default_rng((seed, index))
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR_RGB)
    h, w = img.shape[:2]
    y, x, ch, cw = rrc_window(rng, h, w)
    out = cv2.resize(img[y:y + ch, x:x + cw], (size, size), interpolation=cv2.INTER_LINEAR)
    if rng.random() < 0.5:
        out = cv2.flip(out, 1)
    delta, factor = rng.uniform(-0.4, 0.4), rng.uniform(0.6, 1.4)
    means = np.asarray(cv2.mean(out)[:3])  # cv2.mean: exact integer sums / N
    return cv2.LUT(out, colour_lut(means, delta, factor))


# ----------------------------------------------------------------------------- loaders

class Loader:
    """Batches of `sample(data, index) -> float32 image` over `records`, forever.

    mode: "threads" (a ThreadPoolExecutor of `workers`), "pool" (a
    `multiprocessing.Pool(workers)`, spawn: the parent runs TensorFlow), or "serial".
    Up to `ahead` batches are in flight, like a prefetch buffer.
    """

    def __init__(self, records: Sequence[tuple[bytes, int]], sample: Callable[[bytes, int], np.ndarray],
                 batch: int, mode: str = "threads", workers: int = WORKERS, ahead: int = 2) -> None:
        if mode not in ("threads", "pool", "serial"):
            raise ValueError(f"mode must be threads, pool or serial, got {mode!r}")
        self.records, self.sample, self.batch = list(records), sample, batch
        self.mode, self.workers, self.ahead = mode, workers, ahead

    def repeat(self) -> Loader:
        return self  # already endless

    def __iter__(self) -> Iterator[dict[str, Any]]:
        import tensorflow as tf

        n = len(self.records)
        labels = np.array([y for _, y in self.records], np.int64)
        chunks = (list(range(i, i + self.batch)) for i in itertools.count(0, self.batch))

        def batch_of(indices: list[int], images: list[np.ndarray]) -> dict[str, Any]:
            return {"image": tf.convert_to_tensor(np.stack(images)),
                    "label": tf.convert_to_tensor(labels[[i % n for i in indices]])}

        if self.mode == "serial":
            for idx in chunks:
                yield batch_of(idx, [self.sample(self.records[i % n][0], i) for i in idx])
        elif self.mode == "threads":
            _cv2_single_thread()
            with ThreadPoolExecutor(self.workers) as pool:
                pending: list[tuple[list[int], list[Any]]] = []
                for idx in chunks:
                    pending.append((idx, [pool.submit(self.sample, self.records[i % n][0], i)
                                          for i in idx]))
                    if len(pending) > self.ahead:
                        done_idx, futs = pending.pop(0)
                        yield batch_of(done_idx, [f.result() for f in futs])
        else:
            ctx = multiprocessing.get_context("spawn")
            with ctx.Pool(self.workers, initializer=_pool_init,
                          initargs=([d for d, _ in self.records], self.sample)) as pool:
                pending_p: list[tuple[list[int], Any]] = []
                for idx in chunks:
                    pending_p.append((idx, pool.map_async(_pool_sample, idx, chunksize=8)))
                    if len(pending_p) > self.ahead:
                        done_idx, res = pending_p.pop(0)
                        yield batch_of(done_idx, res.get())


def _cv2_single_thread() -> None:
    # each worker is one core: OpenCV's own parallel_for would oversubscribe
    import cv2

    cv2.setNumThreads(1)


_POOL: dict[str, Any] = {}


def _pool_init(encoded: list[bytes], sample: Callable[[bytes, int], np.ndarray]) -> None:
    _cv2_single_thread()
    _POOL["encoded"], _POOL["sample"] = encoded, sample


def _pool_sample(i: int) -> np.ndarray:
    enc = _POOL["encoded"]
    return _POOL["sample"](enc[i % len(enc)], i)


# ----------------------------------------------------------------------------- grain

class _GrainSample:
    """Picklable (encoded, label) -> (float32 image, label) for Grain's workers."""

    def __init__(self, sample: Callable[[bytes, int], np.ndarray]) -> None:
        self.sample = sample

    def __call__(self, index: int, element: tuple[bytes, int]) -> tuple[np.ndarray, np.int64]:
        return self.sample(element[0], index), np.int64(element[1])


class _GrainInit:
    def __call__(self, worker_index: int, worker_count: int) -> None:
        _cv2_single_thread()


class GrainLoader:
    """The same samples through Grain: `MapDataset.source(records).map_with_index(...)`,
    read by `workers` threads in-process (`processes=False`) or by `workers` worker
    processes (`mp_prefetch`, batches through shared memory)."""

    def __init__(self, records: Sequence[tuple[bytes, int]], sample: Callable[[bytes, int], np.ndarray],
                 batch: int, processes: bool, workers: int = WORKERS) -> None:
        self.records, self.sample, self.batch = list(records), sample, batch
        self.processes, self.workers = processes, workers

    def repeat(self) -> GrainLoader:
        return self

    def __iter__(self) -> Iterator[dict[str, Any]]:
        import grain
        import tensorflow as tf

        ds = grain.MapDataset.source(self.records).repeat().map_with_index(_GrainSample(self.sample))
        if self.processes:
            it = ds.batch(self.batch).to_iter_dataset(grain.ReadOptions(num_threads=1)).mp_prefetch(
                grain.MultiprocessingOptions(num_workers=self.workers, per_worker_buffer_size=2),
                worker_init_fn=_GrainInit())
        else:
            _cv2_single_thread()
            it = ds.to_iter_dataset(grain.ReadOptions(num_threads=self.workers,
                                                      prefetch_buffer_size=2 * self.batch)
                                    ).batch(self.batch)
        for images, labels in it:
            yield {"image": tf.convert_to_tensor(images), "label": tf.convert_to_tensor(labels)}


# ----------------------------------------------------------------------------- rows

def imagenet_variants(data: str | Path, batch: int) -> dict[str, Callable[[], Any]]:
    """The peer rows of pipeline_bench.py: name -> builder of a fresh loader."""
    records = read_records(data)
    return {
        f"Grain, {WORKERS} threads in-process (OpenCV + fused cv2.LUT)":
            lambda: GrainLoader(records, imagenet_sample, batch, processes=False),
        f"Grain, {WORKERS} worker processes (OpenCV + fused cv2.LUT)":
            lambda: GrainLoader(records, imagenet_sample, batch, processes=True),
        f"OpenCV + fused cv2.LUT, {WORKERS} threads":
            lambda: Loader(records, imagenet_sample, batch, "threads"),
        f"multiprocessing.Pool({WORKERS}) of OpenCV workers (fused cv2.LUT)":
            lambda: Loader(records, imagenet_sample, batch, "pool"),
    }


if __name__ == "__main__":  # a quick look: one batch from each peer
    import sys
    import time

    rows = imagenet_variants(sys.argv[1], 64)
    for name, build in rows.items():
        it = iter(build())
        t = time.perf_counter()
        b = next(it)
        print(f"{name}: {tuple(b['image'].shape)} {b['image'].dtype.name} "
              f"{time.perf_counter() - t:.2f}s", flush=True)
        it.close()  # stops the threads / worker processes
