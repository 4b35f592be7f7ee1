"""A tf.data service client in its own process (a hang can be killed by the test).

argv: CONFIG_JSON SERVICE MODE [SECONDS_PER_BATCH] [SERVICE_TIMEOUT_S] (a slow
trainer; "none" for no timeout). Prints one JSON line per batch: {"index": [...],
"digest": [...]} (sha256 of each sample's image bytes), then "DONE", flushed; when the
iteration fails, "ERROR <message>" and exit status 3.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time


def main() -> None:
    import tensorflow as tf

    from tfpipe.errors import tf_error_text
    from tfpipe.pipeline import build_pipeline

    config, service, mode = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    kw = {}
    if len(sys.argv) > 5:
        kw["service_timeout_s"] = None if sys.argv[5] == "none" else float(sys.argv[5])
    ds = build_pipeline(config, keep_index=True, service=service, processing_mode=mode, **kw)
    try:
        for batch in ds:
            images = batch["image"].numpy()
            print(json.dumps({"index": [int(i) for i in batch["index"].numpy()],
                              "digest": [hashlib.sha256(im.tobytes()).hexdigest()[:16]
                                         for im in images]}), flush=True)
            time.sleep(pause)
    except tf.errors.OpError as exc:
        print(f"ERROR {tf_error_text(exc)}", flush=True)
        sys.exit(3)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
