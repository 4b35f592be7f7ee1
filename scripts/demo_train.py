"""Demo step: train a tiny CNN for two epochs on the converted sample data, fed by
tfpipe (`build_pipeline(..., as_supervised=True)` straight into `model.fit`).

Usage: python scripts/demo_train.py CONFIG OUT.keras [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("out")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--epochs", type=int, default=2)
    args = ap.parse_args()

    import warnings

    # Keras' data adapter warns on every tf.data input ("shuffle=True ... ignored",
    # and "ran out of data" at the end of an epoch of unknown length); tfpipe
    # shuffles per epoch itself and each iteration of `train` is one full epoch.
    warnings.filterwarnings("ignore", message=r".*(shuffle=True|ran out of data).*")
    import keras

    from tfpipe import build_pipeline
    from tfpipe.config import load_config, parse_set_options
    from tfpipe.pipeline.serving import class_names

    cfg = load_config(args.config, parse_set_options(args.sets))
    names = class_names(cfg)
    train = build_pipeline(cfg, split="train", as_supervised=True)
    val = build_pipeline(cfg, split="val", as_supervised=True)
    h, w = cfg.data.image_size
    keras.utils.set_random_seed(cfg.seed)
    model = keras.Sequential([
        keras.Input((h, w, cfg.data.channels)),
        keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
        keras.layers.Conv2D(32, 3, strides=2, activation="relu"),
        keras.layers.Conv2D(32, 3, strides=2, activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(len(names)),
    ], name="tiny_cnn")
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    t0 = time.perf_counter()
    hist = model.fit(train, validation_data=val, epochs=args.epochs, verbose=2)
    model.save(args.out)
    acc = hist.history.get("val_accuracy", [float("nan")])[-1]
    print(f"trained {model.name} ({model.count_params():,} parameters) for {args.epochs} epochs "
          f"in {time.perf_counter() - t0:.0f} s on {len(names)} classes ({', '.join(names)}); "
          f"val accuracy {acc:.2f} -> {args.out}")


if __name__ == "__main__":
    main()
