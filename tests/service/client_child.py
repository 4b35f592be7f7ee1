"""A tf.data service client in its own process (a hang can be killed by the test).

argv: CONFIG_JSON SERVICE MODE [SECONDS_PER_BATCH] (a slow trainer). Prints one JSON line per batch: {"index": [...],
"digest": [...]} (sha256 of each sample's image bytes), then "DONE", flushed.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time


def main() -> None:
    from tfpipe.pipeline import build_pipeline

    config, service, mode = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    ds = build_pipeline(config, keep_index=True, service=service, processing_mode=mode)
    for batch in ds:
        images = batch["image"].numpy()
        print(json.dumps({"index": [int(i) for i in batch["index"].numpy()],
                          "digest": [hashlib.sha256(im.tobytes()).hexdigest()[:16]
                                     for im in images]}), flush=True)
        time.sleep(pause)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
