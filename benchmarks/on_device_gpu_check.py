"""The device stage on the GPU vs on the CPU: how far apart, per output (run when a GPU is lent).

Builds `augment.pixel_stage: device` pipelines (imagenet at 224x224 with mixup +
cutmix + hue + gamma; imagenet uint8 output; medical-ultrasound: speckle noise
drawn from the seeds), takes a few batches on the host, and runs the SAME
`tfpipe.augment.DeviceStage` on the same batches under `tf.device("/CPU:0")` and
`tf.device("/GPU:0")`, plain and under `jit_compile=True`. Prints, per output:
the largest absolute difference, the largest difference in ulps (float32 bit
patterns as ordered integers), the fraction of elements that differ, and for
uint8 the largest number of levels off. Exits 2 when there is no GPU.

    .venv/bin/python benchmarks/on_device_gpu_check.py --batches 4
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def ulps(a, b):
    import numpy as np

    def ordered(x):
        i = np.ascontiguousarray(x, np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return int(np.max(np.abs(ordered(a) - ordered(b)))) if a.size else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--images", type=int, default=300)
    p.add_argument("--data", type=Path)
    p.add_argument("--device", default="/GPU:0",
                   help="the device to compare with the CPU (/CPU:0 checks the script itself)")
    args = p.parse_args(argv)

    import numpy as np
    import tensorflow as tf

    if args.device.upper().startswith("/GPU") and not tf.config.list_logical_devices("GPU"):
        print("no GPU here: nothing to compare (docs: not measured)")
        return 2
    sys.path.insert(0, str(Path(__file__).parent))
    from pipeline_bench import make_data

    import tfpipe
    from tfpipe.config import parse_set_options
    from tfpipe.pipeline import device_spec
    from tfpipe.augment import DeviceStage

    tmp = None
    if args.data is None:
        tmp = tempfile.TemporaryDirectory(prefix="tfpipe-gpucheck-")
        args.data = make_data(Path(tmp.name), args.images)
    common = [f"data.path={args.data}", f"pipeline.batch_size={args.batch}",
              "augment.pixel_stage=device", "data.num_classes=10"]
    mix = ["augment.batch.mixup.enabled=true", "augment.batch.cutmix.enabled=true",
           "augment.pixel.hue={max_delta: 0.1, p: 0.5}", "augment.pixel.gamma={lower: 0.7, upper: 1.4}"]
    cases = {"imagenet-224-mix-hue-gamma": ("imagenet", mix),
             "imagenet-uint8-mix": ("imagenet", mix + ["data.output_dtype=uint8"]),
             "medical-ultrasound": ("medical-ultrasound", [])}
    for case, (preset, extra) in cases.items():
        cfg = tfpipe.load_config(preset, parse_set_options(common + extra))
        stage = DeviceStage(device_spec(cfg))
        batches = list(tfpipe.build_pipeline(cfg, "train").take(args.batches))
        for jit in (False, True):
            fn = tf.function(lambda f, y: stage(f, y), jit_compile=jit)
            ref_fn = tf.function(lambda f, y: stage(f, y))
            worst = {}
            for b in batches:
                f = {k: v for k, v in b.items() if k != "label"}
                with tf.device("/CPU:0"):
                    ref = [t.numpy() for t in ref_fn(f, b["label"])]
                with tf.device(args.device):
                    got = [t.numpy() for t in fn(f, b["label"])]
                for name, r, g in zip(("image", "label"), ref, got):
                    w = worst.setdefault(name, [0.0, 0, 0, 0, 0])
                    w[4] += r.size
                    if r.dtype == np.uint8:
                        d = np.abs(r.astype(np.int32) - g.astype(np.int32))
                        w[0] = max(w[0], float(d.max()))
                        w[3] = max(w[3], int(d.max()))
                    else:
                        w[0] = max(w[0], float(np.max(np.abs(r - g))))
                        w[1] = max(w[1], ulps(r, g))
                    w[2] += int(np.count_nonzero(r != g))
            for name, (mx, ul, n, lv, total) in worst.items():
                print(f"{case:28s} jit={jit!s:5s} {name:5s} max|d|={mx:.3g} max ulps={ul} "
                      f"differing={n} ({n / max(total, 1):.2e} of the elements) max levels={lv}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
