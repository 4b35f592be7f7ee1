"""What DCT-scaled decoding does to pixels: PSNR against an area-resize oracle.

For real photos (the scikit-image / scikit-learn ones, and photo-sized tiles of
them), JPEG q90, each window is rendered to the output size two ways by
tfpipe's eval L1 (`tfpipe.pipeline.serving.eval_preprocessing`, stock ops):
`data.dct_scaling=false` (full-size decode of the window, bilinear resize) and
`true` (decode at 1/r in the DCT domain, then bilinear). The oracle is OpenCV's
INTER_AREA (a box filter: every source pixel weighted by its overlap) of the
same window of the full-size decode, and PIL's BOX resize as a second one.

    .venv/bin/python benchmarks/dct_quality.py
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def psnr(a, b) -> float:
    import numpy as np

    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255.0 ** 2 / mse) if mse else float("inf")


def main() -> int:
    import cv2
    import numpy as np
    import tensorflow as tf
    from PIL import Image

    sys.path.insert(0, os.path.dirname(__file__))
    from pipeline_bench import photo_tile_image
    from tfpipe import augment, load_config
    from tfpipe.pipeline._decode import dct_ratio
    from tfpipe.pipeline.serving import eval_preprocessing
    from tfpipe.sample_data import encode, source_photos

    photos = source_photos()
    rng = np.random.default_rng(0)
    pictures = {name: photos[name] for name in ("retina", "hubble_deep_field", "astronaut",
                                                 "china", "coffee")}
    for k in range(3):
        pictures[f"tile {k}"] = photo_tile_image(list(photos.values()), rng)
    print("| picture | size | output | ratio r | PSNR full-size + bilinear | "
          "PSNR DCT 1/r + bilinear | (vs PIL BOX: full / DCT) |")
    print("|---|---|---|---|---|---|---|")
    for size in ((224, 224), (112, 112)):
        pres = {flag: eval_preprocessing(load_config("imagenet", {
            "data.image_size": list(size), "data.dct_scaling": flag, "data.eval_crop_fraction": 1.0}))
            for flag in (False, True)}
        for name, img in pictures.items():
            enc = encode(img, "jpeg", 90)
            full = tf.io.decode_jpeg(enc, channels=3).numpy()
            h, w = full.shape[:2]
            oy, ox, ch, cw = (int(v) for v in augment.center_crop_window(h, w, size, 1.0))
            win = full[oy:oy + ch, ox:ox + cw]
            r = int(dct_ratio(ch, cw, size))
            area = cv2.resize(win, (size[1], size[0]), interpolation=cv2.INTER_AREA)
            box = np.asarray(Image.fromarray(win).resize((size[1], size[0]), Image.BOX))
            got = {flag: pre.image(tf.constant(enc)).numpy() for flag, pre in pres.items()}
            print(f"| {name} | {w}x{h} | {size[1]}x{size[0]} | {r} | "
                  f"{psnr(got[False], area):.1f} dB | {psnr(got[True], area):.1f} dB | "
                  f"{psnr(got[False], box):.1f} / {psnr(got[True], box):.1f} dB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
