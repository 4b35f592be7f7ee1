"""Is training waiting for input? Model step time alone vs fed by the pipeline.

"Step" is a training step (`model.train_on_batch(x, y)`) when the model is a
compiled Keras model, else a forward pass (`model(x, training=False)`; for a
SavedModel, its `serving_default` signature or its `__call__`). Both timings use
the same step function:

- `t_model`: mean step time on ONE cached batch (the pipeline's first batch,
  already in memory, fed again and again): the model's own speed.
- `t_fed`: mean step time of `next(iterator)` + the step, fed by the pipeline
  (one iterator per epoch, kept to its end, as a training loop does).

input_wait_fraction = max(0, 1 - t_model / t_fed): the share of a fed step
spent waiting for input. 0 means the pipeline keeps up; 0.6 means 60% of the
step is the model idling.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class InputBoundResult:
    step_kind: str              # "train_on_batch" | "forward"
    steps: int
    t_model_ms: float           # mean step on a cached batch
    t_fed_ms: float             # mean step fed by the pipeline (next + step)
    input_wait_fraction: float  # max(0, 1 - t_model / t_fed)
    model_steps_per_s: float
    fed_steps_per_s: float

    def verdict(self) -> str:
        f = self.input_wait_fraction
        if f < 0.05:
            return "model-bound: the pipeline keeps up (< 5% of the step waits for input)"
        if f < 0.25:
            return f"mildly input-bound: {f:.0%} of each step waits for input"
        return (f"input-bound: {f:.0%} of each step waits for input; "
                "run `tfpipe bench --stages` to find the slow stage")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict()
        return d


def load_model(path: str | Path) -> Any:
    """A Keras file (.keras / .h5) or a SavedModel directory."""
    import tensorflow as tf

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"model not found: {path}")
    if path.suffix in (".keras", ".h5", ".hdf5"):
        import keras

        return keras.models.load_model(str(path), compile=True)
    if path.is_dir() and (path / "saved_model.pb").exists():
        return tf.saved_model.load(str(path))
    raise ValueError(f"{path}: expected a .keras / .h5 file or a SavedModel directory "
                     "(with saved_model.pb)")


def _split(batch: Any) -> tuple[Any, Any]:
    if isinstance(batch, dict):
        return batch["image"], batch.get("label")
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        return batch[0], batch[1]
    return batch, None


def make_step(model: Any) -> tuple[str, Callable[[Any, Any], Any]]:
    """The step function for `model` and its kind (see module docstring)."""
    compiled = getattr(model, "optimizer", None) is not None and getattr(
        model, "compiled", getattr(model, "_is_compiled", False))
    if compiled and hasattr(model, "train_on_batch"):
        def train(x: Any, y: Any) -> Any:
            if y is None:
                raise ValueError("train_on_batch needs labels; the pipeline gave none")
            return model.train_on_batch(x, y)  # returns NumPy: already synchronized

        return "train_on_batch", train

    if hasattr(model, "signatures") and "serving_default" in getattr(model, "signatures", {}):
        fn = model.signatures["serving_default"]
        _, kwargs = fn.structured_input_signature
        (name,) = list(kwargs) if len(kwargs) == 1 else (None,)

        def serve(x: Any, y: Any) -> Any:
            out = fn(**{name: x}) if name else fn(x)
            return _sync(out)

        return "forward", serve

    def forward(x: Any, y: Any) -> Any:
        try:
            out = model(x, training=False)
        except TypeError:  # a plain tf.Module / restored function without `training`
            out = model(x)
        return _sync(out)

    return "forward", forward


def _sync(out: Any) -> Any:
    """Wait for the result (a tiny reduction copied to the host), not the whole output."""
    import tensorflow as tf

    first = tf.nest.flatten(out)[0]
    return float(tf.reduce_sum(tf.cast(first, tf.float32)).numpy())


def input_bound_dataset(model: Any, dataset: Any, steps: int = 20, warmup: int = 3,
                        stage: Callable[[Any, Any], Any] | None = None) -> InputBoundResult:
    """Time `model` on a cached batch vs fed by `dataset` (batches of (x, y) or dicts).

    `stage`: `(x, y) -> (x, y)` run first in every step, timed as part of it (the
    device stage of `augment.pixel_stage: device`, `tfpipe.pipeline.device_stage`,
    which `tfpipe.train.fit` runs inside its train step), traced once as a tf.function.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    kind, step = make_step(model)
    if stage is not None:
        import tensorflow as tf

        staged, model_step = tf.function(stage), step

        def step(x: Any, y: Any) -> Any:
            return model_step(*staged(x, y))
    it = iter(dataset)
    first = next(it)
    x0, y0 = _split(first)
    for _ in range(warmup):  # trace/compile, thread pools
        step(x0, y0)
    t = time.perf_counter()
    for _ in range(steps):
        step(x0, y0)
    t_model = (time.perf_counter() - t) / steps

    # Fed: one stream of batches for the whole measurement, warmed up, then
    # next() + step per timed step. At the end of an epoch the stream opens the
    # next one and keeps it, as a training loop does; opening a fresh iterator
    # for every later step (the old behaviour) timed pipeline start-up instead.
    fed = _epochs(dataset)
    for _ in range(warmup):
        x, y = _split(next(fed))
        step(x, y)
    t = time.perf_counter()
    for _ in range(steps):
        x, y = _split(next(fed))
        step(x, y)
    t_fed = (time.perf_counter() - t) / steps
    frac = max(0.0, 1.0 - t_model / t_fed) if t_fed > 0 else 0.0
    return InputBoundResult(kind, steps, t_model * 1e3, t_fed * 1e3, min(1.0, frac),
                            1.0 / t_model, 1.0 / t_fed)


def _epochs(dataset: Iterable[Any]) -> Iterator[Any]:
    """Batches of `dataset`, epoch after epoch: one iterator per epoch, kept to its end."""
    while True:
        n = 0
        for batch in dataset:
            n += 1
            yield batch
        if n == 0:
            raise ValueError("the dataset yielded no batch: nothing to feed the model")


def input_bound(config: Any, model_path: str | Path, steps: int = 20, *, warmup: int = 3,
                overrides: Sequence[str] = (), split: str = "train") -> InputBoundResult:
    """Load the model at `model_path` and measure it against `build_pipeline(config)`.

    With `augment.pixel_stage: device` (train split) each step first applies the
    config's device stage to the (features, labels) batch, as `tfpipe.train.fit` does.
    """
    from tfpipe.bench._build import build_from, resolve_config
    from tfpipe.pipeline import device_stage, settings

    model = load_model(model_path)
    cfg = resolve_config(config, overrides)
    dataset = build_from(cfg, split=split, as_supervised=True)
    stage = device_stage(cfg) if split == "train" and settings(cfg).pixel_stage == "device" \
        else None
    return input_bound_dataset(model, dataset, steps=steps, warmup=warmup, stage=stage)
