"""`bench --model`, `preview` and `doctor` on a config with `augment.pixel_stage: device`.

Such a train pipeline emits dict batches {"image" (uint8), "label", + the draws};
the tools must show / time / check what the model gets: preview applies the
device stage (on the CPU, where it equals the all-host pipeline byte for byte, so
the PNG equals the host-mode PNG), bench --model runs it in every step as
`tfpipe.train.fit` does (before: Keras got the dict and failed).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tfpipe import bench
from tfpipe.cli.main import cli
from tfpipe.pipeline.preview import render_preview

from .conftest import pipeline_args

DEVICE = "augment.pixel_stage=device"


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import keras

    model = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.GlobalAveragePooling2D(),
                              keras.layers.Dense(4)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    path = tmp_path_factory.mktemp("model") / "m.keras"
    model.save(path)
    return path


def _sets(data: Path, *extra: str) -> list[str]:
    args = pipeline_args(data, *extra)
    return [args[i + 1] for i in range(0, len(args), 2)]


@pytest.mark.slow
def test_preview_applies_the_device_stage(datasets: dict[str, Path], tmp_path: Path) -> None:
    from tfpipe.config import load_config, parse_set_options

    host, dev = tmp_path / "host.png", tmp_path / "dev.png"
    info: dict = {}
    render_preview(load_config("imagenet", parse_set_options(_sets(datasets["good"]))), host,
                   n=4, info=info)
    assert info["device_stage"] is False
    r = CliRunner().invoke(cli, ["preview", "imagenet", *pipeline_args(datasets["good"], DEVICE),
                                 "-n", "4", "--out", str(dev), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["device_stage"] is True
    # the device stage on the CPU gives the host pipeline's bytes: the same grid (before:
    # the uint8 images without L3, a different PNG)
    assert dev.read_bytes() == host.read_bytes()


@pytest.mark.slow
def test_bench_model_runs_the_device_stage(datasets: dict[str, Path], model_path: Path) -> None:
    res = bench.input_bound("imagenet", model_path, steps=1, warmup=1,
                            overrides=_sets(datasets["good"], DEVICE))
    assert res.step_kind == "train_on_batch" and res.t_model_ms > 0 and res.t_fed_ms > 0
    r = CliRunner().invoke(cli, ["bench", "imagenet", *pipeline_args(datasets["good"], DEVICE),
                                 "--model", str(model_path), "--steps", "1", "--warmup", "1",
                                 "--json"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["input_bound"]["step_kind"] == "train_on_batch"


def test_doctor_checks_a_device_stage_config(datasets: dict[str, Path]) -> None:
    runs = {}
    for mode, extra in (("host", ()), ("device", (DEVICE,))):
        r = CliRunner().invoke(cli, ["doctor", "imagenet", *pipeline_args(datasets["good"], *extra),
                                     "--json"], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        runs[mode] = sorted((f["rule"], f["function"]) for f in json.loads(r.output))
    # the device-mode pipeline is checked like the host one (its L3 just moved out),
    # except that its batch map draws the device stage's L3 parameters (tfpipe.seeds'
    # Philox), so it is not one "whose function draws no random numbers"
    assert ("serial-determinism", "lambda") in runs["host"]
    assert runs["device"] == [f for f in runs["host"] if f != ("serial-determinism", "lambda")]
