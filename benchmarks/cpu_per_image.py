"""Process CPU time per image of the imagenet train pipeline's variants, side by side.

On a shared machine images/s follow the scheduler's share more than the work
(pipeline_bench.py's ratios swing 2x between rounds when other processes run);
the process's CPU seconds per image are steadier. Each variant: a fresh
pipeline (`.repeat()`: the next epochs), 5 warm-up batches, then `--steps`
batches timed with `time.process_time` (every thread of this process), in
alternating order over `--rounds`. Same data and configs as pipeline_bench.py.

    PYTHONPATH=src .venv/bin/python benchmarks/cpu_per_image.py --work /tmp/pb --steps 50 --rounds 2

Variants: f32 (the block path: the op's write-out), f32-compose (write-out off:
uint8 blocks, L3 + normalize in compose), u8, u8-compose, ref (full decode_jpeg,
tfpipe threading: pipeline_bench's reference), crop (decode-and-crop only),
f32-unaligned (f32 built inside `jpeg.unaligned_crop()`: the fused decode asks
for the window itself, so TF realigns every decoded row with a memcpy; not in the
default --only).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, required=True, help="pipeline_bench's --work dir")
    p.add_argument("--images", type=int, default=1500)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--only", default="f32,f32-compose,u8,u8-compose,ref,crop")
    args = p.parse_args(argv)

    import pipeline_bench as pb
    from tfpipe import build_pipeline, load_config
    from tfpipe.bench import baselines as B
    from tfpipe.config import parse_set_options

    data = pb.make_data(args.work, args.images)

    def cfg(*extra: str):
        return load_config("imagenet", parse_set_options([
            f"data.path={data}", "pipeline.batch_size=64",
            "augment.pixel.saturation.enabled=false", *extra]))

    c, c8 = cfg(), cfg("data.output_dtype=uint8")
    npc = pb.pipeline_map_parallelism(c)
    variants = {
        "f32": lambda: build_pipeline(c, "train"),
        "f32-compose": lambda: pb.write_out_off(build_pipeline, c),
        "u8": lambda: build_pipeline(c8, "train"),
        "u8-compose": lambda: pb.write_out_off(build_pipeline, c8),
        "ref": lambda: B.decode_only_like(c, npc),
        "crop": lambda: B.decode_only_like(c, npc, crop=True),
        "f32-unaligned": lambda: _unaligned(build_pipeline, c),
    }
    names = args.only.split(",")
    for rnd in range(args.rounds):
        for name in names if rnd % 2 == 0 else names[::-1]:
            it = iter(variants[name]().repeat())
            for _ in range(5):
                next(it)
            t0, c0, n = time.time(), time.process_time(), 0
            for _ in range(args.steps):
                b = next(it)
                x = b["image"] if isinstance(b, dict) else b[0] if isinstance(b, tuple) else b
                n += int(x.shape[0])
            dt, dc = time.time() - t0, time.process_time() - c0
            print(f"round {rnd + 1}: {name:12s} {n / dt:7.0f} img/s  {1000 * dc / n:.3f} "
                  f"CPU-ms/img  (load {os.getloadavg()[0]:.1f})", flush=True)
            del it
    return 0


def _unaligned(build, cfg):
    """The pipeline built inside `jpeg.unaligned_crop()` (the fused ops' attr is set
    when they are traced, here)."""
    from tfpipe.native import jpeg

    with jpeg.unaligned_crop():
        return build(cfg, "train")


if __name__ == "__main__":
    sys.exit(main())
