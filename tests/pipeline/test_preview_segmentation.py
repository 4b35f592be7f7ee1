"""tfpipe preview of segmentation samples: the mask as a translucent overlay of a fixed
per-class colour (ignore in its own colour) and a legend of the classes shown.

Oracles: PIL's `Image.blend` of the sample's pixels with the class colour, the PASCAL
VOC colormap written out by hand, and the manifest's per-class pixel counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tfpipe.pipeline.preview import PAD, collect_samples, draw_grid, tile_scale

# PASCAL VOC's colours of classes 0-4 and of 255 (its "void", our ignore)
VOC = {0: (0, 0, 0), 1: (128, 0, 0), 2: (0, 128, 0), 3: (128, 128, 0), 4: (0, 0, 128),
       255: (224, 224, 192)}


def _blend(pixel: np.ndarray, colour: tuple[int, int, int]) -> np.ndarray:
    """PIL's 50% blend of one pixel with `colour` (PIL truncates, the renderer rounds)."""
    a = Image.fromarray(pixel.reshape(1, 1, 3).astype(np.uint8))
    return np.asarray(Image.blend(a, Image.new("RGB", (1, 1), colour), 0.5))[0, 0].astype(int)


def _has_swatch(strip: np.ndarray, colour: tuple[int, int, int]) -> bool:
    return int((strip == np.array(colour)).all(-1).sum()) >= 36  # a 6x6 block at least


def test_mask_pixels_carry_their_class_colour_blend_and_a_legend() -> None:
    rng = np.random.default_rng(7)
    h, w = 24, 32
    image = rng.integers(0, 256, (1, h, w, 3), dtype=np.uint8)
    mask = rng.choice([0, 1, 2, 3, 255], size=(1, h, w, 1)).astype(np.int32)
    grid = np.asarray(draw_grid(collect_samples([{"image": image, "mask": mask}], 1),
                                class_names=["bg", "a", "b", "c", "d"]))
    s = int(tile_scale(h, w))  # an integer upscale: source pixel (y, x) is an s x s block
    checked = 0
    for y in range(h):
        for x in range(w):
            got = grid[PAD + y * s + s // 2, PAD + x * s + s // 2].astype(int)
            want = _blend(image[0, y, x], VOC[int(mask[0, y, x, 0])])
            assert np.abs(got - want).max() <= 1, (y, x, got, want)
            checked += 1
    assert checked == h * w
    legend = grid[PAD + h * s:]  # below the tile (captions, then the legend)
    for k in (0, 1, 2, 3, 255):
        assert _has_swatch(legend, VOC[k]), k
    assert not _has_swatch(legend, VOC[4])  # class 4 ("d") is in no mask: not listed


def test_other_ignore_label_and_untouched_images_without_masks() -> None:
    image = np.full((1, 16, 16, 3), 100, np.uint8)
    mask = np.full((1, 16, 16, 1), 250, np.int32)
    mask[0, :8] = 1
    grid = np.asarray(draw_grid([{"image": image[0], "mask": mask[0]}], ignore_label=250))
    s = int(tile_scale(16, 16))
    top, bottom = grid[PAD + 2 * s, PAD + 2 * s], grid[PAD + 12 * s, PAD + 2 * s]
    assert np.abs(top.astype(int) - _blend(image[0, 0, 0], VOC[1])).max() <= 1
    assert np.abs(bottom.astype(int) - _blend(image[0, 0, 0], VOC[255])).max() <= 1
    plain = np.asarray(draw_grid([{"image": image[0]}]))
    assert plain[PAD + 2 * s, PAD + 2 * s].tolist() == [100, 100, 100]


@pytest.fixture(scope="module")
def seg_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tfpipe import sample_data
    from tfpipe.convert import convert

    root = tmp_path_factory.mktemp("preview-seg")
    src = sample_data.make_segmentation_folder(root / "src", num_images=8, size_range=(32, 40),
                                               seed=3)
    convert(src / "images", root / "ds", masks=src / "masks", classes=src / "classes.txt",
            workers=1)
    return root / "ds"


def test_preview_cli_draws_every_stored_class_in_the_legend(seg_dataset: Path,
                                                            tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tfpipe.cli.main import cli

    out = tmp_path / "seg.png"
    # no augmentation and an upscale (48 >= 40): every stored pixel reaches the output
    config = tmp_path / "seg.yaml"
    config.write_text(f"data: {{path: '{seg_dataset}', task: segmentation, image_size: 48}}\n"
                      "pipeline: {batch_size: 8, shuffle_buffer: 8}\n")
    res = CliRunner().invoke(cli, ["preview", str(config), "--out", str(out), "-n", "8", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["samples"] == 8
    manifest = json.loads((seg_dataset / "manifest.json").read_text())
    stored = {int(k.split("/")[1]) for k, v in manifest["settings"]["stats"]["train"].items()
              if k.startswith("mask_pixels/") and v > 0}
    assert {0, 255} < stored
    grid = np.asarray(Image.open(out).convert("RGB"))
    legend = grid[-20:]
    for k in stored:
        assert _has_swatch(legend, VOC[k]), k
    assert not _has_swatch(legend, VOC[4])
