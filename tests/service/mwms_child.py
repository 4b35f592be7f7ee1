"""One worker of a MultiWorkerMirroredStrategy run (TF_CONFIG in the environment).

argv: CONFIG_JSON OUT_JSON. Trains one epoch of a linear model on
`strategy.distribute_datasets_from_function(lambda ctx: build_pipeline(cfg,
worker=ctx))` with all-reduced gradients, and writes per step this worker's
sample indices and image digests, and the final weights' digest.
"""

from __future__ import annotations

import hashlib
import json
import sys


def main() -> None:
    import tensorflow as tf

    from tfpipe.pipeline import build_pipeline

    cfg, out_path = json.loads(sys.argv[1]), sys.argv[2]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    h, w = cfg["data"]["image_size"]
    classes = cfg["data"]["num_classes"]
    with strategy.scope():
        weights = tf.Variable(tf.zeros([h * w * 3, classes]))

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        return build_pipeline(cfg, worker=ctx, keep_index=True)

    dist = strategy.distribute_datasets_from_function(dataset_fn)

    @tf.function
    def step(batch):
        def replica(b):
            x = tf.reshape(tf.cast(b["image"], tf.float32), [tf.shape(b["image"])[0], -1])
            with tf.GradientTape() as tape:
                logits = x @ weights
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    b["label"], logits))
            grad = tape.gradient(loss, weights)
            grad = tf.distribute.get_replica_context().all_reduce("mean", grad)
            weights.assign_sub(0.01 * grad)
            return loss
        return strategy.run(replica, args=(batch,))

    steps = []
    for batch in dist:  # one epoch
        step(batch)
        idx = strategy.experimental_local_results(batch["index"])[0].numpy()
        images = strategy.experimental_local_results(batch["image"])[0].numpy()
        steps.append({"index": [int(i) for i in idx],
                      "digest": [hashlib.sha256(im.tobytes()).hexdigest()[:16]
                                 for im in images]})
    out = {"steps": steps,
           "weights": hashlib.sha256(weights.numpy().tobytes()).hexdigest()[:16]}
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
