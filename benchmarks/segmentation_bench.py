"""Side by side: the tfpipe `segmentation` preset (flip, affine rotation 5 / scale
0.5-2 / translate 0.25, brightness/contrast/saturation, float32) on image + mask,
the same preset with the masks dropped, and the same recipe in albumentations +
OpenCV on image + mask.

    .venv/bin/python benchmarks/segmentation_bench.py --images 200 --rounds 3 --seconds 3

Size: the preset's 512x1024 output at 2 cores is a slow crawl for a side-by-side,
so `--size` (default 256x512, the preset's 2:1 aspect) overrides data.image_size;
everything else is the preset as shipped (batch 8).

Data: `--images` photos with painted shapes (`tfpipe.sample_data`'s segmentation
generator: JPEG q90 photos, longer side 300-500 px, and their class masks) converted
by `tfpipe.convert.convert(..., masks=...)` into 4 shards. Reuse with --data DIR.

Rows, measured in alternating rounds (images/s; ratios are taken within a round):
- tfpipe: `build_pipeline(load_config("segmentation", size), "train")`: image and mask
  through one matrix (image bilinear, mask nearest, fill 255);
- tfpipe, masks dropped: the same build with the builder's mask path off: the record
  is parsed for its image only, no PNG decode, no mask warp (a 1x1 placeholder rides
  along). `Segment` has no switch for this, so the benchmark swaps in a subclass
  (`MasklessSegment`) for the duration of that build: the same graph minus the mask;
- peer: a thread pool of `--threads` (default: the CPUs; OpenCV and albumentations
  release the GIL in their kernels) in this one process runs, per sample,
  `cv2.imdecode` of image (RGB) and mask -> `cv2.resize` to the output size (image
  linear, mask nearest) -> albumentations `HorizontalFlip` + `Affine(rotate 5, scale
  0.5-2, translate 0.25, linear, mask_interpolation nearest, fill 0, fill_mask 255)`
  + `RandomBrightnessContrast` + `ColorJitter(saturation)` on image and mask; then
  the ImageNet normalize to float32 and the masks to int32. The peer reads its bytes
  from memory (loaded once before timing), which favours it; its resize-then-warp is
  two resamples where tfpipe does one (cheaper per sample, also in its favour).

Targets (issue #23): tfpipe >= 1.5x the peer in every round, and >= 0.7x of the
masks-dropped build (the mask must not double the cost).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # noqa: E402 - benchmarks/_harness.py

BATCH = 8
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def make_data(root: Path, images: int, seed: int = 0) -> Path:
    """The segmentation generator's images + masks -> converted shards under root/data."""
    from tfpipe.convert import convert
    from tfpipe.sample_data import make_segmentation_folder

    data = root / "data"
    if (data / "manifest.json").exists():
        return data
    src = make_segmentation_folder(root / "src", num_images=images, seed=seed,
                                   size_range=(300, 500), png_fraction=0.0)
    total = sum(f.stat().st_size for f in (src / "images").rglob("*") if f.is_file())
    convert(src / "images", data, masks=src / "masks", classes=src / "classes.txt",
            shard_size=total // 4 + 1, seed=seed)
    return data


def load_records(data: Path) -> list[tuple[bytes, bytes]]:
    """(image bytes, mask PNG bytes) of every train record, read once for the peer."""
    import tensorflow as tf

    from tfpipe.bench import baselines as B
    from tfpipe.records import MASK_KEY

    files, compression = B.shard_files(str(data), "train")
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            MASK_KEY: tf.io.FixedLenFeature([], tf.string)}
    out = []
    for rec in tf.data.TFRecordDataset(files, compression_type=compression or ""):
        ex = tf.io.parse_single_example(rec, spec)
        out.append((ex["image/encoded"].numpy(), ex[MASK_KEY].numpy()))
    return out


class Peer:
    """The preset's recipe with OpenCV + albumentations on image and mask, in threads."""

    def __init__(self, records: list, threads: int, size: tuple[int, int], seed: int = 0
                 ) -> None:
        import albumentations as A
        import cv2

        self.cv2, self.records, self.size = cv2, records, size
        self.pool = concurrent.futures.ThreadPoolExecutor(threads)
        self.flag = getattr(cv2, "IMREAD_COLOR_RGB", None)
        self.transform = A.Compose([
            A.HorizontalFlip(p=0.5),
            A.Affine(rotate=(-5, 5), scale=(0.5, 2.0), translate_percent=(-0.25, 0.25),
                     interpolation=cv2.INTER_LINEAR, mask_interpolation=cv2.INTER_NEAREST,
                     border_mode=cv2.BORDER_CONSTANT, fill=0, fill_mask=255, p=1.0),
            A.RandomBrightnessContrast(brightness_limit=0.125, contrast_limit=0.25, p=1.0),
            A.ColorJitter(brightness=(1.0, 1.0), contrast=(1.0, 1.0), saturation=(0.75, 1.25),
                          hue=(0.0, 0.0), p=1.0),
        ], seed=seed)
        self.scale = (1.0 / (255.0 * STD)).astype(np.float32)
        self.shift = (MEAN / STD).astype(np.float32)

    def sample(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        cv2 = self.cv2
        data, mask_png = self.records[index]
        buf = np.frombuffer(data, np.uint8)
        if self.flag is not None:
            img = cv2.imdecode(buf, self.flag)
        else:
            img = cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        mask = cv2.imdecode(np.frombuffer(mask_png, np.uint8), cv2.IMREAD_UNCHANGED)
        h, w = self.size
        img = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)
        mask = cv2.resize(mask, (w, h), interpolation=cv2.INTER_NEAREST)
        out = self.transform(image=img, mask=mask)
        return out["image"], out["mask"]

    def batches(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        n, start = len(self.records), 0
        while True:
            idx = [(start + k) % n for k in range(BATCH)]
            start += BATCH
            out = list(self.pool.map(self.sample, idx))
            images = np.stack([o[0] for o in out]).astype(np.float32)
            images *= self.scale
            images -= self.shift
            yield images, np.stack([o[1] for o in out]).astype(np.int32)[..., None]


@contextlib.contextmanager
def masks_dropped() -> Iterator[None]:
    """Builds inside this block use `MasklessSegment`: the segmentation builder with its
    mask path off (parse the image only, no mask decode, no mask warp)."""
    import tensorflow as tf

    from tfpipe import augment
    from tfpipe.pipeline import _segment
    from tfpipe.pipeline._decode import decode_full
    from tfpipe.pipeline._source import IMAGE_KEY

    class MasklessSegment(_segment.Segment):
        def _decode(self, serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            image = decode_full(self.parse(serialized, (IMAGE_KEY,))[IMAGE_KEY],
                                self.s.channels)
            return image, tf.zeros([1, 1, 1], tf.uint8)

        def render(self, image: tf.Tensor, mask: tf.Tensor, m: tf.Tensor
                   ) -> tuple[tf.Tensor, tf.Tensor]:
            size = self.s.image_size
            out = augment.affine(image, m, size, self.interpolation, self.fill_mode,
                                 self.fill_value)
            return tf.ensure_shape(out, [size[0], size[1], self.s.channels]), mask

    original = _segment.Segment
    _segment.Segment = MasklessSegment
    try:
        yield
    finally:
        _segment.Segment = original


SEG = "tfpipe segmentation preset (image + mask)"
NO_MASK = "tfpipe segmentation preset, masks dropped"
PEER = "peer: albumentations + OpenCV on image + mask (thread pool)"


def variants(data: Path, threads: int, size: tuple[int, int]):
    from tfpipe import build_pipeline, load_config
    from tfpipe.config import parse_set_options

    cfg = load_config("segmentation", parse_set_options(
        [f"data.path={data}", f"data.image_size=[{size[0]},{size[1]}]"]))
    records = load_records(data)

    def without_masks():
        with masks_dropped():
            ds = build_pipeline(cfg, "train")
        # the swap worked: the batches carry the 1x1 placeholder, not a mask
        assert ds.element_spec["mask"].shape[1:3] == (1, 1), ds.element_spec
        return ds, True

    return {
        SEG: lambda: (build_pipeline(cfg, "train"), True),
        NO_MASK: without_masks,
        PEER: lambda: (Peer(records, threads, size).batches(), False),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=200)
    p.add_argument("--size", default="256,512", help="output height,width (data.image_size)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=5,
                   help="minimum timed batches per variant and round")
    p.add_argument("--seconds", type=float, default=3.0,
                   help="target timed seconds per variant and round (sets the steps)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=0, help="peer threads (default: the CPUs)")
    p.add_argument("--data", type=Path, help="an existing converted segmentation dataset dir")
    p.add_argument("--work", type=Path, help="where to build the sample data (default: temp)")
    args = p.parse_args(argv)
    size = tuple(int(v) for v in args.size.split(","))
    assert len(size) == 2, "--size is HEIGHT,WIDTH"

    from tfpipe.bench import measure
    from tfpipe.system import available_cpus

    t0 = time.time()
    tmp = None
    if args.data is None:
        if args.work is None:
            tmp = tempfile.TemporaryDirectory(prefix="tfpipe-seg-bench-")
            args.work = Path(tmp.name)
        args.data = make_data(args.work, args.images)
    cpus = available_cpus()
    threads = args.threads or max(1, int(cpus))
    print(f"data: {args.data}  cpus: {cpus}  peer threads: {threads}  output {size[0]}x{size[1]}"
          f"  (data ready in {time.time() - t0:.0f}s)", flush=True)
    builders = variants(args.data, threads, size)
    names = list(builders)

    def run(name: str, steps: int):
        ds, is_tf = builders[name]()
        # the peer yields NumPy arrays: bytes per element given, not counted
        nbytes = None if is_tf else size[0] * size[1] * (3 * 4 + 4)
        return measure(ds, warmup=args.warmup, steps=steps, repeat=is_tf, element_bytes=nbytes)

    rounds, cpu_ms = H.image_rounds(names, run, args.seconds, args.steps, args.rounds, 62)
    rng = H.med_range

    print()
    print(H.table_head("variant", f"images/s: median (range), {args.rounds} rounds",
                       "process CPU ms per image: median (range)"))
    for name in names:
        print(f"| {name} | {rng([r[name] for r in rounds], ',.0f')} | "
              f"{rng(cpu_ms[name], '.1f')} |")
    print()
    for i, r in enumerate(rounds):
        print(f"round {i + 1}: tfpipe / peer {r[SEG] / r[PEER]:.2f}x (target >= 1.5), "
              f"tfpipe / masks dropped {r[SEG] / r[NO_MASK]:.2f}x (target >= 0.7)")
    vs_peer = [r[SEG] / r[PEER] for r in rounds]
    vs_nomask = [r[SEG] / r[NO_MASK] for r in rounds]
    print(f"tfpipe / peer, per round: {rng(vs_peer)}; by CPU time: "
          f"{rng([b / a for a, b in zip(cpu_ms[SEG], cpu_ms[PEER])])}")
    print(f"tfpipe / masks dropped, per round: {rng(vs_nomask)}; by CPU time: "
          f"{rng([b / a for a, b in zip(cpu_ms[SEG], cpu_ms[NO_MASK])])}")
    met = min(vs_peer) >= 1.5 and min(vs_nomask) >= 0.7
    print(f"targets {'met' if met else 'NOT met'} in every round")
    print(f"\ntotal {time.time() - t0:.0f}s")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
