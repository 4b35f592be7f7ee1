"""The fused decode's aligned crop request, alone: TfpipeDecodeCropResizeBlock's
process CPU time per image with it (default) and inside `jpeg.unaligned_crop()`
(the op's `aligned_crop: false` attr: the window itself, so TF realigns every
decoded row with a memcpy), alternating.

    PYTHONPATH=src .venv/bin/python benchmarks/aligned_crop.py --jpegs /tmp/pb/raw --rounds 10

`--jpegs`: an image folder (class/NNNNN.jpg, pipeline_bench.py's --work/raw). Blocks
of 64 JPEGs, random-resized-crop windows (scale 0.08-1), 224x224 uint8 rows, each
setting in a fresh tf.function (the attr is set when the op is built);
also checks both give the same bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jpegs", type=Path, required=True)
    p.add_argument("--images", type=int, default=512)
    p.add_argument("--rounds", type=int, default=10)
    args = p.parse_args(argv)

    import numpy as np
    import tensorflow as tf

    from tfpipe import augment
    from tfpipe.native import jpeg

    files = sorted(args.jpegs.glob("*/*.jpg"))[:args.images]
    blocks = [[f.read_bytes() for f in files[i:i + 64]] for i in range(0, len(files), 64)]
    blocks = [b for b in blocks if len(b) == 64]
    seeds = tf.constant([[3, i] for i in range(64)], tf.int64)
    draws = augment.crop_window_draws(seeds, (0.08, 1.0), (3 / 4, 4 / 3)).numpy()

    def make():
        @tf.function
        def f(c):
            return jpeg.decode_crop_resize_block(c, draws, tf.zeros([64], tf.int32),
                                                 tf.zeros([64], tf.bool), (224, 224),
                                                 (3 / 4, 4 / 3), 3)[0]
        return f

    res: dict[str, list[float]] = {"aligned": [], "unaligned": []}
    first: dict[str, np.ndarray] = {}
    for rnd in range(args.rounds):
        for name in ["aligned", "unaligned"][::1 if rnd % 2 == 0 else -1]:
            with (contextlib.nullcontext() if name == "aligned" else jpeg.unaligned_crop()):
                f = make()
            first[name] = f(tf.constant(blocks[0])).numpy()  # builds the kernels; warm-up
            c0, n = time.process_time(), 0
            for _ in range(3):
                for b in blocks:
                    f(tf.constant(b))
                    n += len(b)
            res[name].append(1000 * (time.process_time() - c0) / n)
    for k, v in res.items():
        print(f"{k:10s} CPU-ms/img: median {np.median(v):.3f} (range {min(v):.3f}-{max(v):.3f})")
    ratios = [u / a for u, a in zip(res["unaligned"], res["aligned"])]
    print(f"unaligned / aligned per round: median {np.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f})")
    print("same bytes:", bool(np.array_equal(first["aligned"], first["unaligned"])),
          f"  load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
