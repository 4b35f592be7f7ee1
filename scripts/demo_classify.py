"""Demo step: a fresh process, no tfpipe, loads the exported SavedModel and classifies
a raw JPEG through `serving_default`; then the same JPEG as the JSON body of TF
Serving's REST predict API, decoded as the server does, gives the same answer.

Usage: python scripts/demo_classify.py VERSION_DIR IMAGE [IMAGE ...]
"""

from __future__ import annotations

import sys


def main() -> None:
    version_dir, images = sys.argv[1], sys.argv[2:]
    import tensorflow as tf

    model = tf.saved_model.load(version_dir)  # stock TF only: what TF Serving loads
    assert not [m for m in sys.modules if m.startswith("tfpipe")], "tfpipe was imported"
    data = [open(p, "rb").read() for p in images]
    out = model.signatures["serving_default"](image_bytes=tf.constant(data))
    direct = []
    for path, classes, scores in zip(images, out["classes"].numpy(), out["scores"].numpy()):
        names = [c.decode() for c in classes]
        direct.append(names)
        folder, name = path.split("/")[-2:]
        mark = "ok  " if names[0] == folder else "miss"
        rest = ", ".join(f"{c} {s:.2f}" for c, s in zip(names[1:3], scores[1:3]))
        print(f"  {mark} {folder}/{name} ({len(data[len(direct) - 1]):,} bytes) -> "
              f"{names[0]} {scores[0]:.2f}   (then {rest})")

    # the REST path: JSON body -> (server) base64 decode -> the same signature
    from tfpipe.export import rest_predict, rest_predict_body

    body = rest_predict_body(data)
    answer = rest_predict(model, body)
    import numpy as np

    same = [p["classes"] for p in answer["predictions"]] == direct and all(
        np.array_equal(np.float32(p["scores"]), s)
        for p, s in zip(answer["predictions"], out["scores"].numpy()))
    print(f"  REST body ({len(body):,} bytes of JSON, {len(data)} instances): "
          f"{'same classes and scores as serving_default' if same else 'DIFFERENT ANSWER'}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
