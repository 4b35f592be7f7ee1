"""A PNG grid of what the pipeline feeds the model (`tfpipe preview`).

Images are un-normalized with the config's mean/std, labels captioned with
class names from the manifest (top-2 with weights for mixed labels), detection
boxes drawn with their class names (and their keypoints: visible points filled,
occluded ones hollow, the manifest's skeleton edges between present points),
segmentation masks as a translucent overlay
(`MASK_ALPHA` of a fixed per-class colour, `class_colour`; ignore pixels in their
own colour) with a legend of the classes shown. Drawing uses only PIL with its
bundled default font, so the same config and seed give byte-identical PNGs (for
one Pillow version).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from PIL import Image, ImageDraw, ImageFont

from tfpipe.errors import ConfigError

# Distinct, colour-blind-friendly box colours (Okabe-Ito), indexed by class id.
PALETTE = [(230, 159, 0), (86, 180, 233), (0, 158, 115), (240, 228, 66),
           (0, 114, 178), (213, 94, 0), (204, 121, 167), (255, 255, 255)]
CAPTION_LINES = 2
PAD = 2
# Tiles are scaled so their longer side is about this many pixels: CIFAR's
# 32x32 becomes readable (integer upscale, nearest) and 512x512 detection
# images stay a reasonable PNG.
TARGET_TILE = 192
# Segmentation overlay: out = round((1 - a) * pixel + a * colour); half and half keeps
# the photo readable under the class colour.
MASK_ALPHA = 0.5
LEGEND_SWATCH = 10
# Keypoint dots: radius in tile pixels (filled: visible, v=2; hollow: occluded, v=1).
POINT_RADIUS = 2


def class_colour(index: int) -> tuple[int, int, int]:
    """Class `index`'s overlay colour: the PASCAL VOC colormap (bits of the index spread
    over R, G, B from the high bit down), so index 0 is black, 1 dark red, 2 dark green
    and the ignore colour is index 255's, (224, 224, 192), as in VOC's own masks."""
    r = g = b = 0
    c = int(index) & 0xFF
    for shift in range(7, -1, -1):
        r |= ((c >> 0) & 1) << shift
        g |= ((c >> 1) & 1) << shift
        b |= ((c >> 2) & 1) << shift
        c >>= 3
    return r, g, b


IGNORE_COLOUR = class_colour(255)


def _np(value: Any) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def collect_samples(elements: Iterable[Mapping[str, Any]], n: int) -> list[dict[str, np.ndarray]]:
    """The first `n` samples of a dataset of batches (or of single samples)."""
    out: list[dict[str, np.ndarray]] = []
    for element in elements:
        arrays = {k: _np(v) for k, v in element.items()}
        image = arrays["image"]
        if image.ndim == 4:  # a batch: split it into samples
            for i in range(image.shape[0]):
                out.append({k: v[i] for k, v in arrays.items() if v.ndim >= 1 and len(v) == len(image)})
                if len(out) >= n:
                    return out
        else:
            out.append(arrays)
        if len(out) >= n:
            break
    return out


def to_uint8(image: np.ndarray, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """Pipeline output -> uint8 [H, W, C]: float images are un-normalized with mean/std."""
    if image.dtype == np.uint8:
        return image
    mean_a = np.asarray(mean, np.float32).reshape(1, 1, -1)
    std_a = np.asarray(std, np.float32).reshape(1, 1, -1)
    unit = image.astype(np.float32) * std_a + mean_a  # back to the [0, 1] scale
    return np.clip(np.rint(unit * 255.0), 0, 255).astype(np.uint8)


def _name(index: int, class_names: Sequence[str]) -> str:
    return class_names[index] if 0 <= index < len(class_names) else str(index)


def label_caption(label: np.ndarray | None, class_names: Sequence[str]) -> str:
    """'cat' for an index; 'cat 0.70 / dog 0.30' (top-2) for a soft label."""
    if label is None:
        return ""
    label = np.asarray(label)
    if label.ndim == 0:
        return _name(int(label), class_names)
    weights = label.astype(np.float64).ravel()
    if weights.size == 0:
        return ""
    # Stable: ties go to the lower class index, so captions never flicker.
    order = np.argsort(-weights, kind="stable")[:2]
    # Weights that print as 0.00 are noise in a caption.
    top = [i for i in order if weights[i] >= 0.005] or [int(order[0])]
    if len(top) == 1 and weights[top[0]] >= 0.995:
        return _name(int(top[0]), class_names)
    return " / ".join(f"{_name(int(i), class_names)} {weights[i]:.2f}" for i in top)


def _fit(text: str, font: Any, width: int) -> str:
    if font.getlength(text) <= width:
        return text
    while text and font.getlength(text + "…") > width:
        text = text[:-1]
    return text + "…"


def tile_scale(height: int, width: int, target: int = TARGET_TILE) -> float:
    """Integer upscale for small images, downscale for large ones."""
    side = max(height, width)
    if side <= target:
        return float(max(1, target // side))
    return target / side


def nearest_resize(mask: np.ndarray, height: int, width: int) -> np.ndarray:
    """[h, w] -> [height, width], nearest neighbour on pixel centres (classes stay classes)."""
    h, w = mask.shape[:2]
    rows = np.minimum(((np.arange(height) + 0.5) * h / height).astype(np.int64), h - 1)
    cols = np.minimum(((np.arange(width) + 0.5) * w / width).astype(np.int64), w - 1)
    return mask[rows[:, None], cols[None, :]]


def overlay_mask(pixels: np.ndarray, mask: np.ndarray, ignore_label: int = 255,
                 alpha: float = MASK_ALPHA) -> np.ndarray:
    """uint8 RGB [H, W, 3] with `mask` ([H, W] class indices) blended over it: each
    pixel becomes round((1 - alpha) * pixel + alpha * colour) with its class's
    `class_colour`, ignore_label's pixels with IGNORE_COLOUR."""
    classes = np.asarray(mask).reshape(pixels.shape[:2]).astype(np.int64)
    lut = np.array([class_colour(k) for k in range(256)], np.float64)
    colours = lut[np.clip(classes, 0, 255)]
    colours[classes == ignore_label] = IGNORE_COLOUR
    blend = (1.0 - alpha) * pixels.astype(np.float64) + alpha * colours
    return np.clip(np.rint(blend), 0, 255).astype(np.uint8)


def paste_instance_masks(pixels: np.ndarray, sample: Mapping[str, np.ndarray],
                         alpha: float = MASK_ALPHA) -> np.ndarray:
    """uint8 RGB [H, W, 3] with each real object's box-cropped instance mask
    (`instance_masks` [max_boxes, h, w]) put back into its box (nearest: output pixel
    centre -> crop pixel) and blended in its class's box colour where it is non-zero."""
    out = pixels.astype(np.float64)
    masks = np.asarray(sample["instance_masks"])
    boxes = np.asarray(sample["boxes"], np.float64).reshape(-1, 4)
    classes = np.asarray(sample.get("classes", np.zeros(len(boxes), np.int64))).reshape(-1)
    count = min(int(sample.get("num_boxes", len(boxes))), len(masks))
    h, w = pixels.shape[:2]
    for k in range(count):
        y0, x0, y1, x1 = boxes[k]
        if y1 <= y0 or x1 <= x0:
            continue
        mh, mw = masks[k].shape
        iy = np.floor(((np.arange(h) + 0.5) / h - y0) / (y1 - y0) * mh).astype(np.int64)
        ix = np.floor(((np.arange(w) + 0.5) / w - x0) / (x1 - x0) * mw).astype(np.int64)
        iny, inx = (iy >= 0) & (iy < mh), (ix >= 0) & (ix < mw)
        on = np.zeros((h, w), bool)
        on[np.ix_(iny, inx)] = masks[k][np.ix_(iy[iny], ix[inx])] > 0
        cls = int(classes[k]) if k < len(classes) else -1
        colour = np.array(PALETTE[cls % len(PALETTE)] if cls >= 0 else PALETTE[-1], np.float64)
        out[on] = (1.0 - alpha) * out[on] + alpha * colour
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def mask_caption(mask: np.ndarray, class_names: Sequence[str], ignore_label: int = 255
                 ) -> list[str]:
    """['square 41% / circle 12%', 'ignore 3%']: the two largest classes, then the
    ignore share."""
    values, counts = np.unique(np.asarray(mask).ravel(), return_counts=True)
    total = max(int(counts.sum()), 1)
    keep = values != ignore_label
    order = np.argsort(-counts[keep], kind="stable")[:2]
    top = " / ".join(f"{_name(int(values[keep][i]), class_names)} "
                     f"{100 * counts[keep][i] / total:.0f}%" for i in order)
    ignored = int(counts[~keep].sum())
    return [top, f"ignore {100 * ignored / total:.0f}%" if ignored else ""]


def _legend_entries(samples: Sequence[Mapping[str, np.ndarray]], class_names: Sequence[str],
                    ignore_label: int) -> list[tuple[tuple[int, int, int], str]]:
    """(colour, name) of every class in the shown masks, by index; ignore last."""
    present: set[int] = set()
    for sample in samples:
        if "mask" in sample:
            present.update(int(v) for v in np.unique(sample["mask"]))
    out = [(class_colour(k), _name(k, class_names)) for k in sorted(present - {ignore_label})]
    if ignore_label in present:
        out.append((IGNORE_COLOUR, f"ignore ({ignore_label})"))
    return out


def _legend_layout(entries: Sequence[tuple[tuple[int, int, int], str]], font: Any, width: int
                   ) -> list[tuple[int, int, tuple[int, int, int], str]]:
    """(x, line, colour, name) of each entry, wrapped to `width`."""
    placed, x, line = [], PAD, 0
    for colour, name in entries:
        w = LEGEND_SWATCH + 4 + int(math.ceil(font.getlength(name))) + 12
        if x > PAD and x + w > width:
            x, line = PAD, line + 1
        placed.append((x, line, colour, name))
        x += w
    return placed


def draw_grid(samples: Sequence[Mapping[str, np.ndarray]], *, mean: Sequence[float] = (0.0,),
              std: Sequence[float] = (1.0,), class_names: Sequence[str] = (),
              columns: int | None = None, target_tile: int = TARGET_TILE,
              ignore_label: int = 255,
              skeleton: Sequence[Sequence[int]] = ()) -> Image.Image:
    """One RGB image: a tile per sample with its caption and boxes; masks overlaid
    (`overlay_mask`, at the tile's size) with a class legend under the grid;
    keypoints ([max_boxes, K, 3]) as dots joined by the `skeleton` edges."""
    if not samples:
        raise ValueError("nothing to preview: the dataset yielded no samples")
    font = ImageFont.load_default()
    line_h = int(math.ceil(font.getbbox("Ag")[3])) + 2
    h0, w0 = samples[0]["image"].shape[:2]
    scale = tile_scale(h0, w0, target_tile)
    tile_h, tile_w = max(1, round(h0 * scale)), max(1, round(w0 * scale))
    tile_w = max(tile_w, 64)  # room for a caption even for tiny images
    cols = columns or int(math.ceil(math.sqrt(len(samples))))
    rows = int(math.ceil(len(samples) / cols))
    cell_w, cell_h = tile_w + 2 * PAD, tile_h + CAPTION_LINES * line_h + 2 * PAD
    legend = _legend_layout(_legend_entries(samples, class_names, ignore_label), font,
                            cols * cell_w)
    legend_h = (max(e[1] for e in legend) + 1) * line_h + 2 * PAD if legend else 0
    grid = Image.new("RGB", (cols * cell_w, rows * cell_h + legend_h), (32, 32, 32))
    draw = ImageDraw.Draw(grid)
    for x, line, colour, name in legend:
        y = rows * cell_h + PAD + line * line_h
        top = y + (line_h - LEGEND_SWATCH) // 2
        draw.rectangle((x, top, x + LEGEND_SWATCH - 1, top + LEGEND_SWATCH - 1), fill=colour,
                       outline=(160, 160, 160))  # black (class 0) on the dark grey
        draw.text((x + LEGEND_SWATCH + 4, y), name, fill=(235, 235, 235), font=font)
    for i, sample in enumerate(samples):
        x0, y0 = (i % cols) * cell_w + PAD, (i // cols) * cell_h + PAD
        pixels = to_uint8(np.asarray(sample["image"]), mean, std)
        if pixels.ndim == 3 and pixels.shape[-1] == 1:
            pixels = pixels[..., 0]
        img = Image.fromarray(pixels).convert("RGB")
        h, w = pixels.shape[:2]
        out_h, out_w = max(1, round(h * scale)), max(1, round(w * scale))
        resample = Image.Resampling.NEAREST if scale >= 1 else Image.Resampling.BILINEAR
        img = img.resize((out_w, out_h), resample)
        lines = [label_caption(sample.get("label"), class_names)] if "label" in sample else []
        if "mask" in sample:
            mask = np.asarray(sample["mask"]).reshape(h, w)
            img = Image.fromarray(overlay_mask(np.asarray(img), nearest_resize(mask, out_h, out_w),
                                               ignore_label))
            lines += mask_caption(mask, class_names, ignore_label)
        if "instance_masks" in sample and "boxes" in sample:  # data.instance_masks
            img = Image.fromarray(paste_instance_masks(np.asarray(img), sample))
        grid.paste(img, (x0, y0))
        if "boxes" in sample:
            _draw_boxes(draw, sample, (x0, y0, out_w, out_h), class_names, font)
            if "keypoints" in sample:
                _draw_keypoints(draw, sample, (x0, y0, out_w, out_h), skeleton)
            count = int(sample.get("num_boxes", len(sample["boxes"])))
            lines.append(f"{count} box{'es' if count != 1 else ''}")
        for j, line in enumerate(lines[:CAPTION_LINES]):
            draw.text((x0, y0 + tile_h + j * line_h), _fit(line, font, tile_w), fill=(235, 235, 235),
                      font=font)
    return grid


def _draw_boxes(draw: ImageDraw.ImageDraw, sample: Mapping[str, np.ndarray],
                where: tuple[int, int, int, int], class_names: Sequence[str], font: Any) -> None:
    """Boxes are normalized yxyx; only the first `num_boxes` rows are real."""
    x0, y0, w, h = where
    boxes = np.asarray(sample["boxes"], np.float64).reshape(-1, 4)
    count = int(sample.get("num_boxes", len(boxes)))
    classes = np.asarray(sample.get("classes", np.zeros(len(boxes), np.int64))).reshape(-1)
    for k in range(min(count, len(boxes))):
        ymin, xmin, ymax, xmax = np.clip(boxes[k], 0.0, 1.0)
        left, top = x0 + int(round(xmin * (w - 1))), y0 + int(round(ymin * (h - 1)))
        right, bottom = x0 + int(round(xmax * (w - 1))), y0 + int(round(ymax * (h - 1)))
        cls = int(classes[k]) if k < len(classes) else -1
        colour = PALETTE[cls % len(PALETTE)] if cls >= 0 else PALETTE[-1]
        draw.rectangle((left, top, right, bottom), outline=colour, width=1)
        draw.text((left + 1, top + 1), _name(cls, class_names), fill=colour, font=font)


def _draw_keypoints(draw: ImageDraw.ImageDraw, sample: Mapping[str, np.ndarray],
                    where: tuple[int, int, int, int], skeleton: Sequence[Sequence[int]]) -> None:
    """Each real object's points ((y, x, v) normalized like the boxes) in its box's
    colour: skeleton edges between two present points, then the dots (filled:
    visible, hollow: occluded); absent points (v = 0) are not drawn."""
    x0, y0, w, h = where
    kp = np.asarray(sample["keypoints"], np.float64)
    count = int(sample.get("num_boxes", len(kp)))
    classes = np.asarray(sample.get("classes", np.zeros(len(kp), np.int64))).reshape(-1)
    for k in range(min(count, len(kp))):
        cls = int(classes[k]) if k < len(classes) else -1
        colour = PALETTE[cls % len(PALETTE)] if cls >= 0 else PALETTE[-1]
        # pixel position of a normalized point: x * w is an edge coordinate
        xy = [(x0 + x * w - 0.5, y0 + y * h - 0.5) for y, x, _ in kp[k]]
        present = kp[k, :, 2] > 0
        for a, b in skeleton:
            if a < len(xy) and b < len(xy) and present[a] and present[b]:
                draw.line((xy[a], xy[b]), fill=colour, width=1)
        for (px, py), v in zip(xy, kp[k, :, 2]):
            if v <= 0:
                continue
            box = (px - POINT_RADIUS, py - POINT_RADIUS, px + POINT_RADIUS, py + POINT_RADIUS)
            draw.ellipse(box, fill=colour if v >= 2 else None, outline=colour)


def _class_names(data_path: str | None) -> list[str]:
    if not data_path:
        return []
    try:
        from tfpipe.records import open_source

        source = open_source(data_path)
    except Exception:  # a preview without names is still useful; build_pipeline reports real errors
        return []
    manifest = getattr(source, "manifest", None)
    return list(getattr(manifest, "class_names", []) or [])


def tf_error_text(exc: Exception) -> str:
    """The useful part of a TF runtime error: tfpipe's own assertion text
    (which names the shard and record) when there is one, else its first line."""
    text = str(getattr(exc, "message", exc))
    marker = "assertion failed: ["
    if marker in text:
        text = text.split(marker, 1)[1]
        return text.split("]\n", 1)[0].split("] [Op:", 1)[0].rstrip("]").strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def _model_batches(dataset: Iterable[Any], config: Any, staged: bool) -> Iterable[Any]:
    """The batches as the model sees them. With `augment.pixel_stage: device` the
    pipeline emits uint8 images + draws ({"image", "label", + draw keys}); the device
    stage (`device_stage(config)`: L3, L4, normalize) is applied here, on the CPU,
    where it gives the bytes of the all-host pipeline (docs/augment-pixel.md)."""
    if not staged:
        yield from dataset
        return
    from tfpipe.pipeline import device_stage

    stage = device_stage(config)
    for batch in dataset:
        with tf.device("/CPU:0"):
            image, label = stage(batch, batch["label"])
        yield {"image": image, "label": label}


def render_preview(config: Any, out_png: str | os.PathLike[str], n: int = 16, split: str = "train",
                   epoch: int = 0, info: dict[str, Any] | None = None) -> Path:
    """Write a PNG grid of the first `n` samples `build_pipeline(config, split, epoch)` yields.

    A split smaller than one batch (no full batch under drop_remainder) is shown
    as the partial batch drop_remainder would drop. With `augment.pixel_stage:
    device` the train batches are shown after the device stage (run on the CPU),
    i.e. what the train step feeds the model. `info`, when given, gets ``samples``
    (how many were drawn), ``partial_batch`` (whether that happened) and
    ``device_stage`` (whether the device stage was applied).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if isinstance(config, (str, os.PathLike)):
        from tfpipe.config import load_config

        config = load_config(config)
    from tfpipe.pipeline import build_pipeline, settings

    s = settings(config)
    partial = False
    staged = split == "train" and s.pixel_stage == "device"
    try:
        try:
            samples = collect_samples(_model_batches(build_pipeline(config, split, epoch),
                                                     config, staged), n)
        except ConfigError:  # fewer records than one batch (the manifest says): below
            if not s.drop_remainder:
                raise
            samples = []
        if not samples and s.drop_remainder:
            # fewer records than one batch: preview the partial batch training drops
            from tfpipe.config import load_config

            loose = load_config(config, {"pipeline.drop_remainder": False})
            samples = collect_samples(_model_batches(build_pipeline(loose, split, epoch), config,
                                                     staged), n)
            partial = bool(samples)
    except tf.errors.OpError as exc:
        # a bad record under pipeline.on_error=raise, or unreadable data: one
        # paragraph (tfpipe's message names the shard and record), no traceback
        from tfpipe.errors import RecordError

        raise RecordError(f"split {split!r} of {s.data_path!r} could not be read: "
                          f"{tf_error_text(exc)}") from None
    if not samples:
        from tfpipe.errors import InputError

        raise InputError(f"split {split!r} of {s.data_path!r} yielded no batch to preview "
                         "(no records, or every record was skipped as bad?)")
    if info is not None:
        info.update(samples=len(samples), partial_batch=partial, device_stage=staged)
    from tfpipe.pipeline._keypoints import keypoint_spec

    spec = keypoint_spec(s)
    grid = draw_grid(samples, mean=s.mean, std=s.std, class_names=_class_names(s.data_path),
                     ignore_label=s.ignore_label, skeleton=spec.skeleton if spec else ())
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    grid.save(tmp, format="PNG")
    os.replace(tmp, out)
    return out
