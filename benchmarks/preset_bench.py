"""Every classification preset's train pipeline vs its albumentations + OpenCV recipe, one run.

For each preset (cifar, imagenet, medical-ultrasound, remote-sensing), three rows
are timed in alternating rounds, all at the same batch size:

  tfpipe   `build_pipeline(load_config(preset), "train")`, the preset as shipped
  peer     the same recipe in albumentations + OpenCV on 2 threads
           (`peers.Loader`, a ThreadPoolExecutor; OpenCV's own threading off):
           cv2.imdecode, cv2.resize to the preset's image_size (imagenet: its
           random-resized crop instead), then the preset's ops with the same
           parameters, albumentations `Normalize` -> float32 batches
  decode   full `decode_jpeg` with tfpipe's threading (`decode_only_like`), the
           fair ceiling of benchmarks/pipeline_bench.py

and reported as images/s and the ratios tfpipe / peer and tfpipe / decode-only of
the same round (median and range over rounds), and the process CPU time per
image of tfpipe and of the peer (median over rounds; the timed steps only, all
threads). The machine is shared: trust the ratios, not the absolute rates; the
CPU time per image depends least on the other sessions' load.

    .venv/bin/python benchmarks/preset_bench.py --images 600 --rounds 2 --seconds 2

Peer recipes (albumentations 2.x):
  cifar            resize 32, PadIfNeeded(40, constant 0) + RandomCrop(32), HorizontalFlip
  imagenet         RandomResizedCrop(224, scale, ratio), HorizontalFlip,
                   RandomBrightnessContrast(0.4, 0.4), ColorJitter(saturation 0.4)
  medical-ultrasound  grayscale decode, resize 256, Affine(translate +-5%, constant 0),
                   speckle noise x * (1 + 0.1 n), n ~ N(0, 1) per pixel (cv2.randn;
                   albumentations has no Gaussian speckle), p 0.5
  remote-sensing   resize 256, RandomRotate90 (k uniform in 0..3 = the preset's
                   p 0.75 over k in 1..3), HorizontalFlip, VerticalFlip,
                   ElasticTransform(alpha 34, sigma 4, uniform noise, reflect, p 0.3), RandomBrightnessContrast(0.2, 0.2)
The detection preset has its own benchmark (boxes, mosaic): not here.

Data: the same JPEGs as pipeline_bench.py (q90 crops, ~460x390, of the photos
bundled with scikit-image / scikit-learn). The peer reads the encoded records
from memory (read once before timing); tfpipe reads its page-cached shards.
Without `--data` they are built (`pipeline_bench.make_data(WORK, --images)`) under
`--work` (default: a temp dir); `--data WORK/data` reuses them in a later run.
Sizes matter: at ~460x390 cifar's whole-image decode for 32x32 is DCT-scaled
(1/8, `data.dct_scaling`), the 256-pixel presets' is not (r = 1).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # noqa: E402 - benchmarks/_harness.py
import numpy as np  # noqa: E402

PRESETS = ("cifar", "imagenet", "medical-ultrasound", "remote-sensing")


def peer_transform(preset: str) -> Callable[[np.ndarray, np.random.Generator], np.ndarray]:
    """image (decoded, uint8 HxWxC) -> float32 normalized, the preset's recipe."""
    import albumentations as A
    import cv2

    from tfpipe import load_config

    cfg = load_config(preset)
    h, w = cfg.data.image_size
    norm = A.Normalize(mean=cfg.data.normalize.mean, std=cfg.data.normalize.std,
                       max_pixel_value=255.0, p=1.0)
    resize = A.Resize(h, w, interpolation=cv2.INTER_LINEAR, p=1.0)
    if preset == "cifar":
        ops = [resize, A.PadIfNeeded(h + 8, w + 8, border_mode=cv2.BORDER_CONSTANT, fill=0),
               A.RandomCrop(h, w), A.HorizontalFlip(p=0.5), norm]
    elif preset == "imagenet":
        ops = [A.RandomResizedCrop(size=(h, w), scale=(0.08, 1.0), ratio=(0.75, 4 / 3),
                                   interpolation=cv2.INTER_LINEAR),
               A.HorizontalFlip(p=0.5),
               A.RandomBrightnessContrast(brightness_limit=0.4, contrast_limit=0.4, p=1.0),
               A.ColorJitter(brightness=0, contrast=0, saturation=0.4, hue=0, p=1.0), norm]
    elif preset == "medical-ultrasound":
        ops = [resize, A.Affine(translate_percent={"x": (-0.05, 0.05), "y": (-0.05, 0.05)},
                                scale=1.0, rotate=0.0, shear=0.0, interpolation=cv2.INTER_LINEAR,
                                border_mode=cv2.BORDER_CONSTANT, fill=0, p=1.0)]
    elif preset == "remote-sensing":
        ops = [resize, A.RandomRotate90(p=1.0), A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.5),
               A.ElasticTransform(alpha=34.0, sigma=4.0, noise_distribution="uniform",
                                  border_mode=cv2.BORDER_REFLECT, p=0.3),
               A.RandomBrightnessContrast(brightness_limit=0.2, contrast_limit=0.2, p=1.0), norm]
    else:
        raise ValueError(f"no peer recipe for preset {preset!r}; allowed: {list(PRESETS)}")
    compose = A.Compose(ops, seed=None)
    if preset != "medical-ultrasound":
        return lambda image, rng: compose(image=image)["image"]

    def medical(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = compose(image=image)["image"].astype(np.float32) * (1.0 / 255.0)
        if rng.random() < 0.5:  # speckle, stddev 0.1
            n = np.empty_like(x)
            cv2.randn(n, 0.0, 0.1)
            x = np.clip(x + x * n, 0.0, 1.0)
        return (x - 0.5) / 0.5
    return medical


def peer_sample(preset: str, seed: int = 0) -> Callable[[bytes, int], np.ndarray]:
    import cv2

    transform = peer_transform(preset)
    from tfpipe import load_config

    gray = load_config(preset).data.channels == 1
    flag = cv2.IMREAD_GRAYSCALE if gray else cv2.IMREAD_COLOR_RGB

    def sample(data: bytes, index: int) -> np.ndarray:
        rng = np.random.default_rng((seed, index))
        image = cv2.imdecode(np.frombuffer(data, np.uint8), flag)
        out = transform(image, rng)
        return out[..., None] if out.ndim == 2 else out
    return sample


def variants(data: Path, batch: int, presets: list[str]) -> dict[str, dict[str, Callable[[], Any]]]:
    """preset -> {"tfpipe" | "peer" | "decode": builder of a fresh dataset/loader}."""
    import peers
    from tfpipe import build_pipeline, load_config
    from tfpipe.bench import baselines as B
    from tfpipe.config import parse_set_options
    from tfpipe.pipeline import map_parallelism, settings

    records = peers.read_records(data)
    out: dict[str, dict[str, Callable[[], Any]]] = {}
    for preset in presets:
        cfg = load_config(preset, parse_set_options([f"data.path={data}",
                                                      f"pipeline.batch_size={batch}"]))
        npc = int(map_parallelism(settings(cfg)))
        sample = peer_sample(preset)
        out[preset] = {
            "tfpipe": lambda cfg=cfg: build_pipeline(cfg, "train"),
            "peer": lambda sample=sample: peers.Loader(records, sample, batch, "threads"),
            "decode": lambda cfg=cfg, npc=npc: B.decode_only_like(cfg, npc),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=600)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=float, default=2.0, help="target timed seconds per row and round")
    p.add_argument("--steps", type=int, default=5, help="minimum timed batches per row and round")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--presets", nargs="+", default=list(PRESETS), choices=PRESETS)
    p.add_argument("--data", type=Path, help="an existing converted dataset dir")
    p.add_argument("--work", type=Path, help="where to build the sample data (default: a temp dir)")
    args = p.parse_args(argv)

    from pipeline_bench import make_data

    from tfpipe import native
    from tfpipe.bench import measure
    from tfpipe.system import available_cpus

    t0 = time.time()
    tmp = None
    if args.data is None:
        if args.work is None:
            tmp = tempfile.TemporaryDirectory(prefix="tfpipe-preset-bench-")
            args.work = Path(tmp.name)
        args.data = make_data(args.work, args.images)
    print(f"data: {args.data}  cpus: {available_cpus()}  native: {native.available()}", flush=True)
    builders = variants(args.data, args.batch, args.presets)
    rows = [(preset, kind) for preset in args.presets for kind in ("tfpipe", "peer", "decode")]

    def run(row: tuple[str, str], steps: int):
        return measure(builders[row[0]][row[1]](), warmup=args.warmup, steps=steps)

    # equal time per row, not equal steps (_harness.sized_steps, as pipeline_bench.py)
    steps = H.sized_steps(rows, run, args.seconds, args.steps, max_steps=10 * args.steps)
    # process CPU time per image over the timed steps (all threads): robust to a
    # shared machine's load, which slows the peer's Python threads more
    results = H.alternating_rounds(
        rows, args.rounds, lambda row: run(row, steps[row]),
        lambda rnd, row, r: (f"round {rnd + 1}: {row[0]:20s} {row[1]:7s} "
                             f"{r.elements_per_s:8.1f} images/s"))
    rates = {row: [this[row].elements_per_s for this in results] for row in rows}
    cpu_ms = {row: [H.cpu_ms_per_image(this[row]) for this in results] for row in rows}

    def med(v: list[float]) -> str:
        return H.med_range(v, ",.0f")

    ratio = H.med_range

    print()
    print(H.table_head("preset", "tfpipe images/s", "peer (albumentations + OpenCV, 2 threads)",
                       "decode-only", "tfpipe / peer", "tfpipe / decode-only",
                       "CPU ms/image tfpipe / peer",
                       after=f"  ({args.rounds} rounds, batch {args.batch})"))
    for preset in args.presets:
        t, pr, d = (rates[(preset, k)] for k in ("tfpipe", "peer", "decode"))
        ct, cp = (statistics.median(cpu_ms[(preset, k)]) for k in ("tfpipe", "peer"))
        print(f"| {preset} | {med(t)} | {med(pr)} | {med(d)} | "
              f"{ratio([a / b for a, b in zip(t, pr)])} | {ratio([a / b for a, b in zip(t, d)])} | "
              f"{ct:.2f} / {cp:.2f} |")
    print(f"\ntotal {time.time() - t0:.0f}s")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
