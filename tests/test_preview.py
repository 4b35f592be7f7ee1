"""tfpipe preview: renderer against hand-made samples, end to end through build_pipeline."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tfpipe.pipeline.preview import (
    CAPTION_LINES,
    PAD,
    PALETTE,
    collect_samples,
    draw_grid,
    label_caption,
    tile_scale,
    to_uint8,
)

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def _normalize(rgb: np.ndarray) -> np.ndarray:
    return ((rgb.astype(np.float32) / 255.0 - np.float32(MEAN)) / np.float32(STD)).astype(np.float32)


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _layout(grid: Image.Image, tile: int, n_cols: int) -> tuple[int, int]:
    """Cell size recomputed from the grid (independent of the renderer's internals)."""
    return grid.width // n_cols, tile


def test_to_uint8_inverts_normalization() -> None:
    rgb = np.random.default_rng(0).integers(0, 256, (9, 7, 3), dtype=np.uint8)
    np.testing.assert_array_equal(to_uint8(_normalize(rgb), MEAN, STD), rgb)
    assert to_uint8(rgb, MEAN, STD) is rgb  # uint8 output is already pixels


def test_label_captions() -> None:
    names = ["cat", "dog", "owl"]
    assert label_caption(np.int64(1), names) == "dog"
    assert label_caption(np.int64(7), names) == "7"
    assert label_caption(np.array([0.0, 1.0, 0.0], np.float32), names) == "dog"
    assert label_caption(np.array([0.3, 0.0, 0.7], np.float32), names) == "owl 0.70 / cat 0.30"
    assert label_caption(np.array([0.2, 0.3, 0.5]), []) == "2 0.50 / 1 0.30"


def test_collect_samples_crosses_batches_and_stops_at_n() -> None:
    images = np.arange(10, dtype=np.uint8).reshape(10, 1, 1, 1) * np.ones((1, 2, 2, 3), np.uint8)
    ds = tf.data.Dataset.from_tensor_slices({"image": images, "label": np.arange(10)}).batch(4)
    got = collect_samples(ds, 6)
    assert [int(s["label"]) for s in got] == [0, 1, 2, 3, 4, 5]
    assert got[5]["image"].shape == (2, 2, 3)
    assert len(collect_samples(ds, 50)) == 10
    unbatched = tf.data.Dataset.from_tensor_slices({"image": images, "label": np.arange(10)})
    assert len(collect_samples(unbatched, 3)) == 3


def test_grid_has_one_tile_per_sample_with_its_colours() -> None:
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (200, 100, 50), (10, 20, 30)]
    images = np.stack([np.full((16, 16, 3), c, np.uint8) for c in colours])
    ds = tf.data.Dataset.from_tensor_slices(
        {"image": _normalize(images), "label": np.arange(5, dtype=np.int64)}).batch(2)
    grid = draw_grid(collect_samples(ds, 5), mean=MEAN, std=STD, class_names=["a", "b", "c", "d", "e"])
    scale = int(tile_scale(16, 16))
    tile = 16 * scale
    cols, rows = 3, 2  # ceil(sqrt(5)) columns
    assert grid.width % cols == 0 and grid.height % rows == 0
    cell_w, cell_h = grid.width // cols, grid.height // rows
    assert cell_w == tile + 2 * PAD and cell_h > tile + 2 * PAD  # caption strip below the tile
    pixels = np.asarray(grid)
    for i, colour in enumerate(colours):
        y, x = (i // cols) * cell_h + PAD, (i % cols) * cell_w + PAD
        np.testing.assert_array_equal(pixels[y:y + tile, x:x + tile], np.broadcast_to(colour, (tile, tile, 3)))
    # The sixth cell is empty background, and captions wrote something under tile 0.
    empty = pixels[cell_h + PAD: cell_h + PAD + tile, 2 * cell_w + PAD: 2 * cell_w + PAD + tile]
    assert (empty == 32).all()
    caption = pixels[PAD + tile: cell_h - PAD, PAD: PAD + tile]
    assert (caption > 200).any()


def test_grayscale_tiles_and_uint8_output() -> None:
    gray = np.full((1, 8, 8, 1), 77, np.uint8)
    grid = draw_grid(collect_samples([{"image": gray, "label": np.array([0])}], 1))
    tile = 8 * int(tile_scale(8, 8))
    assert np.asarray(grid)[PAD + tile // 2, PAD + tile // 2].tolist() == [77, 77, 77]


def test_boxes_drawn_at_the_right_pixels() -> None:
    size = 64
    scale = int(tile_scale(size, size))
    tile = size * scale
    image = np.zeros((1, size, size, 3), np.uint8)
    boxes = np.zeros((1, 4, 4), np.float32)
    boxes[0, 0] = (0.25, 0.5, 0.75, 1.0)  # yxyx, class 2
    boxes[0, 1] = (0.0, 0.0, 0.5, 0.25)   # class 1
    boxes[0, 2] = (0.6, 0.1, 0.9, 0.3)    # padding beyond num_boxes: must not be drawn
    element = {"image": image, "boxes": boxes, "classes": np.array([[2, 1, 3, 0]]),
               "num_boxes": np.array([2])}
    grid = np.asarray(draw_grid(collect_samples([element], 1), class_names=["x", "y", "z", "w"]))

    def px(y: float, x: float) -> list[int]:
        # Independent oracle of the documented mapping: pixel = round(coord * (tile - 1)).
        return grid[PAD + int(round(y * (tile - 1))), PAD + int(round(x * (tile - 1)))].tolist()

    mid = 0.5
    assert px(0.25, 0.75) == list(PALETTE[2])  # top edge of box 0
    assert px(0.75, 0.75) == list(PALETTE[2])  # bottom edge
    assert px(mid, 1.0) == list(PALETTE[2])    # right edge
    assert px(0.4, 0.5) == list(PALETTE[2])    # left edge (below the class name)
    assert px(0.6, 0.75) == [0, 0, 0]          # inside box 0: untouched image
    assert px(0.5, 0.12) == list(PALETTE[1])   # bottom edge of box 1
    assert px(0.3, 0.25) == list(PALETTE[1])   # right edge of box 1
    assert px(0.9, 0.2) == [0, 0, 0]           # padded box 2 not drawn
    assert px(0.75, 0.2) == [0, 0, 0]


def test_same_samples_same_png_bytes() -> None:
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (4, 20, 24, 3), dtype=np.uint8)
    soft = np.array([[0.6, 0.4], [1, 0], [0, 1], [0.5, 0.5]], np.float32)
    samples = collect_samples([{"image": _normalize(images), "label": soft}], 4)
    a = _png(draw_grid(samples, mean=MEAN, std=STD, class_names=["p", "q"]))
    b = _png(draw_grid(samples, mean=MEAN, std=STD, class_names=["p", "q"]))
    assert a == b
    assert Image.open(io.BytesIO(a)).size == draw_grid(samples).size
    assert CAPTION_LINES >= 1


# --------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tfpipe import sample_data
    from tfpipe.convert import convert

    root = tmp_path_factory.mktemp("preview")
    folder = sample_data.make_image_folder(root / "raw", num_classes=3, per_class=6,
                                           size_range=(40, 72), seed=1)
    convert(folder, root / "ds", workers=1)
    return root / "ds"


def _config(dataset: Path, **extra: object):  # type: ignore[no-untyped-def]
    from tfpipe.config import load_config

    overrides = {"data.path": str(dataset), "pipeline.batch_size": 4, "pipeline.shuffle_buffer": 18,
                 "data.image_size": "[40, 40]", "seed": 5, **extra}
    return load_config("cifar", overrides)


def test_render_preview_end_to_end_is_reproducible(dataset: Path, tmp_path: Path) -> None:
    from tfpipe.pipeline.preview import render_preview

    a = render_preview(_config(dataset), tmp_path / "a.png", n=6)
    b = render_preview(_config(dataset, **{"pipeline.num_parallel_calls": 1}), tmp_path / "b.png", n=6)
    assert a.read_bytes() == b.read_bytes()  # same seed, other parallelism: same bytes
    grid = Image.open(a)
    tile = 40 * int(tile_scale(40, 40))
    assert grid.width == 3 * (tile + 2 * PAD)  # 6 samples -> 3 columns x 2 rows
    assert grid.height % 2 == 0


def test_preview_cli(dataset: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tfpipe.cli.main import cli

    out = tmp_path / "grid.png"
    result = CliRunner().invoke(cli, ["preview", "cifar", "--out", str(out), "-n", "4",
                                      "--set", f"data.path={dataset}", "--set", "pipeline.batch_size=2",
                                      "--set", "augment.batch.mixup.enabled=true",
                                      "--set", "data.num_classes=3"])
    assert result.exit_code == 0, result.output
    assert Image.open(out).size[0] > 0
    bad = CliRunner().invoke(cli, ["preview", "cifar", "--out", str(out), "--set", "pipeline.bach_size=2"])
    assert bad.exit_code == 2 and "did you mean 'batch_size'" in bad.output


def test_preview_of_an_empty_pipeline_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # E.g. fewer records than one batch with drop_remainder: an error, not a traceback.
    import tfpipe.pipeline
    from click.testing import CliRunner

    from tfpipe.cli.main import cli

    empty = tf.data.Dataset.from_tensors({"image": tf.zeros([2, 4, 4, 3])}).take(0)
    monkeypatch.setattr(tfpipe.pipeline, "build_pipeline", lambda *a, **k: empty)
    result = CliRunner().invoke(cli, ["preview", "cifar", "--out", str(tmp_path / "x.png")])
    assert result.exit_code == 2
    assert "yielded no batch to preview" in result.output and "Traceback" not in result.output




def test_detection_pipeline_boxes_land_on_their_pixels(tmp_path_factory: pytest.TempPathFactory) -> None:
    from tfpipe.config import load_config
    from tfpipe.convert import convert
    from tfpipe.convert.samples import make_coco
    from tfpipe.pipeline import build_pipeline

    root = tmp_path_factory.mktemp("preview-det")
    convert(make_coco(root / "raw", num_images=4, seed=2, size_range=(80, 120)), root / "ds", workers=1)
    cfg = load_config("detection", {"data.path": str(root / "ds"), "pipeline.batch_size": 2,
                                    "pipeline.shuffle_buffer": 4, "data.image_size": 64,
                                    "augment.batch.mosaic.enabled": False})
    samples = collect_samples(build_pipeline(cfg), 2)
    assert {"image", "boxes", "classes", "num_boxes"} <= set(samples[0])
    grid = np.asarray(draw_grid(samples, mean=cfg.data.normalize.mean, std=cfg.data.normalize.std))
    tile = 64 * int(tile_scale(64, 64))
    cell_w = grid.shape[1] // 2
    checked = 0
    for k, sample in enumerate(samples):
        for box, cls in zip(sample["boxes"][: int(sample["num_boxes"])], sample["classes"]):
            ymin, xmin, ymax, xmax = np.clip(box, 0, 1)
            if (ymax - ymin) * tile < 12 or (xmax - xmin) * tile < 12:
                continue  # tiny boxes are mostly covered by their caption
            # Bottom-right corner: never under the class-name text (drawn at top-left).
            y = PAD + int(round(ymax * (tile - 1)))
            x = k * cell_w + PAD + int(round(xmax * (tile - 1)))
            assert grid[y, x].tolist() == list(PALETTE[int(cls) % len(PALETTE)])
            checked += 1
    assert checked >= 1


@pytest.mark.parametrize("preset", ["imagenet", "medical-ultrasound", "remote-sensing"])
def test_preset_runs_end_to_end(preset: str, dataset: Path) -> None:
    """Every preset's ops exist in the pipeline (cifar and detection: tests above)."""
    from tfpipe.config import load_config
    from tfpipe.pipeline import build_pipeline

    cfg = load_config(preset, {"data.path": str(dataset), "pipeline.batch_size": 2,
                               "pipeline.shuffle_buffer": 4, "data.image_size": 32})
    batch = next(iter(build_pipeline(cfg)))
    assert batch["image"].shape == (2, 32, 32, cfg.data.channels)
    assert batch["image"].dtype == tf.float32 and np.isfinite(batch["image"].numpy()).all()
