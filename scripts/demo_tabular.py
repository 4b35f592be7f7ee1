"""`make demo`, tabular step: train a tiny Keras model on the converted CTR table
through build_pipeline, export it, and serve it from a fresh process.

    python scripts/demo_tabular.py DATASET_DIR EXPORT_DIR
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

# Keras' data adapter warns on every tf.data input ("shuffle=True ... ignored"):
# tfpipe shuffles per epoch itself (the same filter as scripts/demo_train.py).
warnings.filterwarnings("ignore", message=r".*shuffle=True.*")
import keras  # noqa: E402

from tfpipe.config import load_config
from tfpipe.export import export_serving
from tfpipe.pipeline import build_pipeline, tabular_transforms

COLUMNS = {
    "price": "log1p", "category": "vocabulary", "device": "vocabulary",
    "user": {"transform": "embedding_id", "column": "user_id", "top_k": 500, "embedding_dim": 8},
    "item": {"transform": "hash", "column": "item_id", "num_bins": 1024},
    "age": {"transform": "normalize", "column": "user_age", "missing_indicator": True},
    "hour": {"transform": "time", "column": "timestamp", "part": "hour_cyclic"},
    "position": {"transform": "normalize"},
}


def main(data: str, out: str) -> None:
    cfg = load_config({"data": {"path": data},
                       "pipeline": {"batch_size": 256, "shuffle_buffer": 4000},
                       "features": {"label": "label", "columns": COLUMNS}})
    transforms = tabular_transforms(cfg)
    inputs, parts = {}, []
    for name, info in transforms.output_info.items():
        inputs[name] = x = keras.Input(shape=info.shape, dtype=info.dtype, name=name)
        if info.cardinality:
            dim = info.embedding_dim or 4
            parts.append(keras.layers.Flatten()(keras.layers.Embedding(info.cardinality, dim)(x)))
        else:
            parts.append(keras.layers.Reshape((-1,))(x))
    h = keras.layers.Dense(16, activation="relu")(keras.layers.Concatenate()(parts))
    model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(h))
    model.compile("adam", "binary_crossentropy")
    hist = model.fit(build_pipeline(cfg), validation_data=build_pipeline(cfg, "val"),
                     epochs=3, verbose=0)
    print(f"trained 3 epochs: val loss {hist.history['val_loss'][-1]:.3f} "
          f"(features: {', '.join(transforms.output_info)})")
    res = export_serving(cfg, model, out, 1, overwrite=True)
    print(f"exported {res.version_dir}; serving_default takes "
          f"{', '.join(res.signatures['serving_default']['inputs'])}")
    # a fresh process, TensorFlow only: raw columns in, a null as <column>__missing
    script = textwrap.dedent(f"""
        import tensorflow as tf
        m = tf.saved_model.load({res.version_dir!r})
        req = {{"price": tf.constant([19.9, 450.0]), "category": tf.constant([b"books", b"new"]),
               "device": tf.constant([b"mobile", b""]), "device__missing": tf.constant([False, True]),
               "user_id": tf.constant([17, 10**12], tf.int64), "item_id": tf.constant([5, 6], tf.int64),
               "user_age": tf.constant([31, 0], tf.int64), "user_age__missing": tf.constant([False, True]),
               "timestamp": tf.constant([1_767_650_000, 1_767_700_000], tf.int64),
               "position": tf.constant([1, 9], tf.int64)}}
        req = {{k: v for k, v in req.items()
               if k in m.signatures["serving_default"].structured_input_signature[1]}}
        p = m.signatures["serving_default"](**req)["outputs"].numpy()[:, 0]
        print("fresh process: click probability", [round(float(x), 3) for x in p])
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
