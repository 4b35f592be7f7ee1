"""Side by side: the tfpipe imagenet train pipeline vs the common ways to write it.

One process, the same shards, batch 64 of 224x224x3 float32, the same
augmentation (random-resized crop, horizontal flip, brightness/contrast,
normalize; the imagenet preset with saturation turned off to match). Variants
are measured in alternating rounds; each figure is images/s and its ratio to
the decode-only reference measured in the same round.

The reference is a fair ceiling: full `decode_jpeg` of every record with
tfpipe's own parallelism and threading (`tfpipe.bench.baselines.decode_only_like`):
the same interleave of the same shards (the pipeline's `read` stage), parse +
decode in one map with the pipeline's per-sample map parallelism and
`deterministic`, the pipeline's `tf.data.Options` (`tfpipe.pipeline.options`:
private thread pool, autotune budget) and prefetch. The plain tf.data
decode-only (sequential read and parse, default threading: the old reference)
is kept as a row for comparison. The peers (OpenCV, albumentations, tf.image,
Keras layers) run in the same rounds, each written its own common way.
The first ratio column divides by the FASTER of the two decode-only rows in
each round: that is the figure docs/performance.md quotes.

    .venv/bin/python benchmarks/pipeline_bench.py --images 1500 --rounds 4 --seconds 3

Data: JPEGs (q90, about 460x390) cut from the photos bundled with scikit-image /
scikit-learn (`tfpipe.sample_data`), converted with `tfpipe.convert.convert`
into 4 shards. Reuse with --data DIR (a converted dataset).

`--photo-size`: photo-sized pictures instead (1.5-3 MP): each is a grid of
3x3 to 4x4 tiles, every tile an unscaled crop of one of those photos (no
upscaling: an upscaled picture compresses too well to be a fair photo), JPEG
q90. Adds the row of the same pipeline with `data.dct_scaling=false`, so what
the DCT-scaled decode buys is measured in the same rounds.

    .venv/bin/python benchmarks/pipeline_bench.py --photo-size --images 300 --rounds 3 --seconds 3

Rows live in `variants` (name -> builder); another module can add its own
(`extra_variants`, e.g. benchmarks/peers.py) without touching the harness.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # noqa: E402 - benchmarks/_harness.py


def make_data(root: Path, images: int, seed: int = 0) -> Path:
    """Image folder -> converted shards (train split only) under root/data."""
    from tfpipe.sample_data import make_image_folder

    data = root / "data"
    if (data / "manifest.json").exists():
        return data
    classes = 10
    folder = make_image_folder(root / "raw", num_classes=classes,
                               per_class=-(-images // classes), seed=seed,
                               png_fraction=0.0, gray_fraction=0.0)
    from tfpipe.convert import convert

    total = sum(f.stat().st_size for f in folder.rglob("*.jpg"))
    convert(str(folder), str(data), shard_size=total // 4 + 1, seed=seed)
    return data


def photo_tile_image(photos: list, rng, min_mp: float = 1.5, max_mp: float = 3.0):
    """One photo-sized picture: a grid of unscaled crops of the real photos."""
    import numpy as np

    while True:
        rows, cols = int(rng.integers(3, 5)), int(rng.integers(3, 5))
        th, tw = int(rng.integers(300, 440)), int(rng.integers(300, 520))
        if min_mp * 1e6 <= rows * th * cols * tw <= max_mp * 1e6:
            break
    big = [p for p in photos if p.shape[0] >= th and p.shape[1] >= tw]
    canvas = np.zeros((rows * th, cols * tw, 3), np.uint8)
    for r in range(rows):
        for c in range(cols):
            p = big[int(rng.integers(len(big)))]
            y, x = int(rng.integers(p.shape[0] - th + 1)), int(rng.integers(p.shape[1] - tw + 1))
            canvas[r * th:(r + 1) * th, c * tw:(c + 1) * tw] = p[y:y + th, x:x + tw]
    return canvas


def make_photo_data(root: Path, images: int, seed: int = 0) -> Path:
    """Photo-sized JPEGs (q90, `photo_tile_image`) in class folders -> 4 shards."""
    import numpy as np

    from tfpipe.sample_data import encode, source_photos

    data = root / "data"
    if (data / "manifest.json").exists():
        return data
    photos = list(source_photos().values())
    rng = np.random.default_rng(seed)
    folder, classes = root / "raw", 10
    total = 0
    for i in range(images):
        d = folder / f"class_{i % classes}"
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"img_{i:05d}.jpg"
        path.write_bytes(encode(photo_tile_image(photos, rng), "jpeg", 90))
        total += path.stat().st_size
    from tfpipe.convert import convert

    convert(str(folder), str(data), shard_size=total // 4 + 1, seed=seed)
    return data


def composed_l1(build, cfg):
    """`build(cfg, "train")` with the train L1 as separate ops (extract_jpeg_shape,
    window, strict decode, resize+flip) instead of `TfpipeDecodeCropResize`: what
    the fused kernel buys. The choice is made when the pipeline is traced."""
    from tfpipe.pipeline import _classify

    saved = _classify._has_fused_l1
    _classify._has_fused_l1 = lambda: False
    try:
        return build(cfg, "train")
    finally:
        _classify._has_fused_l1 = saved


def block_forced(build, cfg):
    """`build(cfg, "train")` on the block path even where its record-size rule
    (`_block.LARGE_RECORD_BYTES`: photo-size records) picks the per-element path."""
    from tfpipe.pipeline import _block

    with _block.forced(True):
        return build(cfg, "train")


def per_element(build, cfg):
    """`build(cfg, "train")` on the per-element path (one guarded map per sample,
    then batch) instead of the block path (pipeline/_block.py): what the block
    path buys. The choice is made when the pipeline is built."""
    from tfpipe.pipeline import _block

    with _block.forced(False):
        return build(cfg, "train")


def whole_block_isolated(build, cfg):
    """`build(cfg, "train")` on the block path as it was before issue #12's
    blocksched step: the whole block function isolated per block (a one-element
    dataset per block) instead of only `parse_example` (`_block.structure`)."""
    from tfpipe.pipeline import _block

    with _block.forced(True), _block.structure("isolated"):  # (past the record-size rule)
        return build(cfg, "train")


def write_out_off(build, cfg):
    """`build(cfg, "train")` on the block path with the block op's write-out off:
    uint8 blocks, then L3 + normalize in compose (`TfpipePixelChain` over the
    batch) -- what fusing them into the op's per-row write-out buys."""
    from tfpipe.pipeline import _block

    # the block path even past the record-size rule
    with _block.write_out(False), _block.forced(True):
        return build(cfg, "train")


def pipeline_map_parallelism(cfg) -> int:
    """The per-sample map parallelism tfpipe's pipeline uses for `cfg`."""
    import tfpipe.pipeline as P

    return int(P.map_parallelism(P.settings(cfg)))


REF = "decode only (full decode_jpeg, tfpipe threading)"
PLAIN = "decode only (plain tf.data: sequential read, default threading)"
# Both decode-only rows always run: the honest denominator is whichever is faster
# in that round (on 2 cores the plain one often is: PERF-NOTES.md).
REFERENCES = (REF, PLAIN)


# Other modules' rows: callables (data, batch) -> {name: builder}, merged into
# `variants` (e.g. benchmarks/peers.py registers its Grain/multiprocessing rows).
extra_variants: list = []


def variants(data: Path, batch: int, photo_size: bool = False):
    """name -> zero-argument builder of a fresh dataset, and a line on the reference."""
    from tfpipe import build_pipeline, load_config
    from tfpipe.bench import baselines as B
    from tfpipe.config import parse_set_options
    from tfpipe.pipeline import options, settings

    import peers  # benchmarks/peers.py (this script's directory is on sys.path)

    files, _ = B.shard_files(str(data), "train")
    # The imagenet preset minus saturation: the same ops as the other variants.
    cfg = load_config("imagenet", parse_set_options([f"data.path={data}",
                                                     f"pipeline.batch_size={batch}",
                                                     "augment.pixel.saturation.enabled=false"]))
    cfg_u8 = load_config("imagenet", parse_set_options([f"data.path={data}",
                                                        f"pipeline.batch_size={batch}",
                                                        "augment.pixel.saturation.enabled=false",
                                                        "data.output_dtype=uint8"]))
    cfg_full = load_config("imagenet", parse_set_options([f"data.path={data}",
                                                          f"pipeline.batch_size={batch}",
                                                          "augment.pixel.saturation.enabled=false",
                                                          "data.dct_scaling=false"]))
    cfg_dev = load_config("imagenet", parse_set_options([f"data.path={data}",
                                                         f"pipeline.batch_size={batch}",
                                                         "augment.pixel.saturation.enabled=false",
                                                         "augment.pixel_stage=device"]))
    npc = pipeline_map_parallelism(cfg)
    s = settings(cfg)
    about = (f"reference: tfpipe's read stage ({len(files)} shards, interleave_cycle "
             f"{s.interleave_cycle}), num_parallel_calls={npc}, deterministic={s.deterministic}, "
             f"private thread pool {options(s).threading.private_threadpool_size}, "
             f"prefetch {s.prefetch}")
    rows = {
        "tfpipe imagenet (build_pipeline)": lambda: build_pipeline(cfg, "train"),
        "tfpipe imagenet, uint8 output (normalize on the accelerator)":
            lambda: build_pipeline(cfg_u8, "train"),
        "tfpipe imagenet, pixel_stage device (uint8 + draws; L3/normalize in the step)":
            lambda: build_pipeline(cfg_dev, "train"),
        "tfpipe imagenet, block path, write-out off (L3 + normalize in compose)":
            lambda: write_out_off(build_pipeline, cfg),
        "tfpipe imagenet, uint8 output, write-out off (L3 in compose)":
            lambda: write_out_off(build_pipeline, cfg_u8),
        "tfpipe imagenet, per-element path (no block path)":
            lambda: per_element(build_pipeline, cfg),
        "tfpipe imagenet, whole block isolated (block path before blocksched)":
            lambda: whole_block_isolated(build_pipeline, cfg),
        "tfpipe imagenet, pixel_stage device, per-element path (no block path)":
            lambda: per_element(build_pipeline, cfg_dev),
        **({"tfpipe imagenet, data.dct_scaling=false (full-size window decode)":
            lambda: build_pipeline(cfg_full, "train"),
            "tfpipe imagenet, block path forced (past the record-size rule)":
            lambda: block_forced(build_pipeline, cfg)} if photo_size else {}),
        "tfpipe imagenet, composed L1 ops (no fused decode-crop-resize kernel)":
            lambda: composed_l1(build_pipeline, cfg),
        "cv2 in tf.py_function, npc=8": lambda: B.cv2_py_function(files, batch),
        "albumentations via tf.numpy_function, npc=8": lambda: B.albumentations_numpy_function(files, batch),
        "per-sample tf.image": lambda: B.tf_image_per_sample(files, batch),
        "Keras preprocessing layers (per sample)": lambda: B.keras_layers(files, batch),
        "decode-and-crop only (tfpipe threading)":
            lambda: B.decode_only_like(cfg, npc, crop=True),
        PLAIN: lambda: B.decode_only(files, batch),
        REF: lambda: B.decode_only_like(cfg, npc),
        **peers.imagenet_variants(data, batch),  # Grain, fused cv2.LUT, multiprocessing
    }
    for extra in extra_variants:
        rows.update(extra(data, batch))
    return rows, about


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=1500)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=10, help="minimum timed batches per variant and round")
    p.add_argument("--seconds", type=float, default=3.0,
                   help="target timed seconds per variant and round (sets the steps)")
    # The warmup must outlast the batches a pipeline's prefetch buffer and parallel
    # calls finish ahead of the first next(): timed steps drawn from that stock look
    # free (3 steps after 1 warmup batch measured tfpipe at 2.7x its steady rate).
    p.add_argument("--warmup", type=int, default=6)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--data", type=Path, help="an existing converted dataset dir")
    p.add_argument("--work", type=Path, help="where to build the sample data (default: a temp dir)")
    p.add_argument("--photo-size", action="store_true",
                   help="photo-sized pictures (1.5-3 MP tiles of the real photos, JPEG q90) "
                        "and the data.dct_scaling=false row")
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="run only the variants whose name contains TEXT (repeatable); "
                        "the two decode-only references always run")
    args = p.parse_args(argv)

    from tfpipe.bench import measure
    from tfpipe.system import available_cpus

    t0 = time.time()
    tmp = None
    if args.data is None:
        if args.work is None:
            tmp = tempfile.TemporaryDirectory(prefix="tfpipe-bench-")
            args.work = Path(tmp.name)
        args.data = (make_photo_data if args.photo_size else make_data)(args.work, args.images)
    print(f"data: {args.data}  cpus: {available_cpus()}  (data ready in {time.time() - t0:.0f}s)",
          flush=True)
    builders, about = variants(args.data, args.batch, args.photo_size)
    print(about, flush=True)
    ref = REF
    names = [n for n in builders
             if n in REFERENCES or not args.only or any(t in n for t in args.only)]

    def run(name: str, steps: int):
        return measure(builders[name](), warmup=args.warmup, steps=steps)

    # Equal time, not equal steps (_harness.sized_steps): a row whose 3-step probe asks
    # for more than 10 x --steps (steps drawn from the prefetch stock look free) is
    # probed again over that many.
    steps = H.sized_steps(names, run, args.seconds, args.steps, max_steps=10 * args.steps)
    print("steps per variant:", {n: steps[n] for n in names}, flush=True)
    # Process CPU time per image: steadier than images/s on a shared machine, but it
    # misses work done in child processes (the Grain-processes and Pool rows).
    rounds = H.alternating_rounds(
        names, args.rounds, lambda name: run(name, steps[name]),
        lambda rnd, name, r: (f"round {rnd + 1}: {name:62s} {r.elements_per_s:8.1f} images/s "
                              f"{H.cpu_ms_per_image(r):6.2f} CPU-ms/image"))

    print()
    print(H.table_head("variant", f"images/s: median (range), {args.rounds} rounds",
                       "x fastest decode-only: median (range)",
                       "x decode-only, tfpipe threading: median (range)",
                       "process CPU ms/image: median (range)"))
    for name in names:
        rates = [r[name].elements_per_s for r in rounds]
        fastest = [r[name].elements_per_s / max(r[x].elements_per_s for x in REFERENCES)
                   for r in rounds]
        ratios = [r[name].elements_per_s / r[ref].elements_per_s for r in rounds]
        cpu = [H.cpu_ms_per_image(r[name]) for r in rounds]
        child = " (+ child processes, not counted)" if _uses_processes(name) else ""
        print(f"| {name} | {H.med_range(rates, ',.0f')} | {H.med_range(fastest)} "
              f"| {H.med_range(ratios)} | {H.med_range(cpu)}{child} |")
    print(f"\ntotal {time.time() - t0:.0f}s")
    if tmp is not None:
        tmp.cleanup()
    return 0


def _uses_processes(name: str) -> bool:
    return "worker processes" in name or "Pool(" in name


if __name__ == "__main__":
    sys.exit(main())
