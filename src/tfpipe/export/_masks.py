"""The client side of a detection export's box-relative `instance_masks`: pasting them
into the request image (docs/serving.md "Detection models"). NumPy only, so a client
without TensorFlow can import it."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def paste_instance_masks(masks: np.ndarray, boxes: np.ndarray, image_size: Sequence[int],
                         threshold: float = 0.5) -> np.ndarray:
    """Served box-relative masks [N, S, S] and their `boxes` [N, 4] (ymin, xmin, ymax,
    xmax in request pixels, the served `boxes`) -> uint8 [N, height, width] image
    masks (1 = object).

    Nearest: each pixel whose centre lies in the box (ymin <= y + 0.5 < ymax, and
    likewise for x) takes the mask cell its centre falls in, cell
    floor((y + 0.5 - ymin) * S / (ymax - ymin)), set where the mask value is above
    `threshold`; pixels outside the box, and empty boxes, are 0.
    """
    masks, boxes = np.asarray(masks), np.asarray(boxes, np.float64)
    if masks.ndim != 3 or boxes.shape != (masks.shape[0], 4):
        raise ValueError(f"masks [N, S, S] and boxes [N, 4], got {masks.shape} and "
                         f"{boxes.shape}")
    h, w = (int(v) for v in image_size)
    rows_s, cols_s = masks.shape[1:]
    out = np.zeros((masks.shape[0], h, w), np.uint8)
    yc, xc = np.arange(h) + 0.5, np.arange(w) + 0.5
    for k, (ymin, xmin, ymax, xmax) in enumerate(boxes):
        if not (ymax > ymin and xmax > xmin):  # empty, or NaN
            continue
        # multiplied before dividing: a pixel centre exactly on a cell edge (integer
        # boxes) is an exact quotient, so it falls in the lower-right cell, not by rounding
        rows = np.floor((yc - ymin) * rows_s / (ymax - ymin))
        cols = np.floor((xc - xmin) * cols_s / (xmax - xmin))
        r_ok, c_ok = (rows >= 0) & (rows < rows_s), (cols >= 0) & (cols < cols_s)
        if not (r_ok.any() and c_ok.any()):
            continue
        on = masks[k] > threshold
        cell = on[np.ix_(rows[r_ok].astype(int), cols[c_ok].astype(int))]
        out[k][np.ix_(r_ok, c_ok)] = cell
    return out
