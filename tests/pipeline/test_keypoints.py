"""Keypoints through the detection pipeline (issue #24).

Oracle of the geometry: every source pixel holds its own coordinates
(`coordinate_image`), so each output image tells, by a NumPy least-squares fit,
the matrix the pipeline applied to that sample; the keypoints must equal that
matrix applied in NumPy (and the boxes' keep, cut objects, the left/right swap
iff the fitted matrix mirrors). Never the code under test."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tfpipe.config import load_config
from tfpipe.errors import ConfigError
from tfpipe.pipeline import build_pipeline

from .keypoint_data import NAMES, coordinate_image, random_objects, write_dataset

H, W = 48, 64
OUT = (40, 44)
K = len(NAMES)
FLIP = [0, 2, 1, 3]  # left_eye <-> right_eye


@pytest.fixture(scope="module")
def coord_data(tmp_path_factory) -> tuple[str, dict[int, dict]]:
    rng = np.random.default_rng(7)
    samples = []
    for r in range(8):
        o = random_objects(rng, 3, K, H, W, r)
        o["image"] = coordinate_image(H, W)
        samples.append(o)
    # a bad record: 3 objects but K - 1 points each (skipped under on_error: skip)
    bad = random_objects(rng, 3, K - 1, H, W, 8)
    bad["image"] = coordinate_image(H, W)
    path = write_dataset(Path(tmp_path_factory.mktemp("kp")) / "coord", samples + [bad])
    return path, {100 * (r + 1): s for r, s in enumerate(samples)}


def _cfg(path: str, geometry: dict, **data) -> dict:
    return {"seed": 5, "data": {"path": path, "task": "detection", "image_size": list(OUT),
                                "max_boxes": 3, "output_dtype": "uint8",
                                "keypoints": {}, **data},
            "pipeline": {"batch_size": 8, "shuffle_buffer": 8, "drop_remainder": False},
            "augment": {"geometry": geometry}}


def _fit(img: np.ndarray) -> np.ndarray | None:
    """The 3x3 source -> output matrix (pixel centres) from an output image of
    `coordinate_image` pixels; None when too few source pixels survived."""
    # the source's and the output's outer 2 rows and columns left out: a resize
    # clamps at a crop's border, and a clamped border is no longer a ramp
    inside = (img[..., 2] == 255) & (img[..., 0] > 2) & (img[..., 1] > 2) \
        & (img[..., 0] < W - 1) & (img[..., 1] < H - 1)
    inside[:2], inside[-2:], inside[:, :2], inside[:, -2:] = False, False, False, False
    yo, xo = np.nonzero(inside)
    if len(yo) < 30:
        return None
    a = np.stack([xo, yo, np.ones_like(xo)], 1).astype(np.float64)
    src = np.stack([img[yo, xo, 0] - 1.0, img[yo, xo, 1] - 1.0], 1)
    sol, *_ = np.linalg.lstsq(a, src, rcond=None)  # output -> source
    inv = np.eye(3)
    inv[:2] = sol.T
    return np.linalg.inv(inv)


def _box_oracle(boxes: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NumPy boxes through m: corners (edge coordinates), bounding box, clipped, kept
    when non-empty."""
    out = []
    for y0, x0, y1, x1 in boxes:
        xs = np.array([x0, x1, x1, x0]) * W - 0.5
        ys = np.array([y0, y0, y1, y1]) * H - 0.5
        p = m @ np.stack([xs, ys, np.ones(4)])
        nx, ny = (p[0] + 0.5) / OUT[1], (p[1] + 0.5) / OUT[0]
        out.append(np.clip([ny.min(), nx.min(), ny.max(), nx.max()], 0, 1))
    out = np.array(out)
    keep = (out[:, 2] > out[:, 0]) & (out[:, 3] > out[:, 1])
    return out, keep


def _point_oracle(points: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """([N, K, 3] mapped points, [N, K] near-border flags); the swap iff det < 0."""
    xs, ys = points[..., 1] * W - 0.5, points[..., 0] * H - 0.5
    p = np.einsum("ij,jnk->ink", m, np.stack([xs, ys, np.ones_like(xs)]))
    nx, ny = (p[0] + 0.5) / OUT[1], (p[1] + 0.5) / OUT[0]
    v = points[..., 2]
    inside = (v > 0) & (nx >= 0) & (nx <= 1) & (ny >= 0) & (ny <= 1)
    out = np.where(inside[..., None], np.stack([ny, nx, v], -1), 0.0)
    edge = (np.minimum.reduce([nx, 1 - nx, ny, 1 - ny]) > -0.02) & \
        (np.minimum.reduce([nx, 1 - nx, ny, 1 - ny]) < 0.02)
    if np.linalg.det(m[:2, :2]) < 0:
        out, edge = out[:, FLIP], edge[:, FLIP]
    return out, edge


def _check(cfg: dict, sources: dict[int, dict], split: str = "train") -> tuple[int, int]:
    """Every sample's keypoints = the fitted matrix applied in NumPy; returns how
    many samples mirrored and how many objects the geometry cut away."""
    mirrored = seen = cut = 0
    for b in build_pipeline(cfg, split=split):
        for i in range(b["image"].shape[0]):
            img, n = b["image"][i].numpy(), int(b["num_boxes"][i])
            classes, kp = b["classes"][i].numpy(), b["keypoints"][i].numpy()
            assert not (classes >= 900).any()  # the bad record was skipped
            m = _fit(img)
            if m is None:
                continue
            seen += 1
            src = sources[int(classes[0]) // 100 * 100] if n else None
            if src is None:
                assert not kp.any()
                continue
            _, keep = _box_oracle(src["boxes"], m)
            cut += int((~keep).sum())
            want_classes = np.array(src["classes"])[keep][:3]
            np.testing.assert_array_equal(classes[:n], want_classes)
            want, edge = _point_oracle(src["points"], m)
            want, edge = want[keep][:3], edge[keep][:3]
            got = kp[:n]
            ok = ~edge  # a point within 2% of the border may fall either side of it
            np.testing.assert_array_equal(got[..., 2][ok], want[..., 2][ok])
            pos = ok & (want[..., 2] > 0)
            np.testing.assert_allclose(got[..., :2][pos], want[..., :2][pos], atol=0.6 / OUT[1])
            assert not kp[n:].any()  # padding objects all 0
            mirrored += np.linalg.det(m[:2, :2]) < 0
    assert seen >= 6
    return mirrored, cut


# every geometric op at once (each op alone against the same kind of oracle:
# tests/augment/test_keypoints.py); nearest, so the fit reads whole source pixels
COMPOSITION = {"random_resized_crop": {"scale": [0.4, 1.0]},
               "flip": {"horizontal": True, "vertical": True, "p": 0.5},
               "rot90": {"p": 0.5},
               "affine": {"rotation": 25.0, "scale": [0.8, 1.2], "shear": 8.0,
                          "translate": [0.1, 0.1], "interpolation": "nearest"},
               "pad_and_crop": {"padding": 4}}


def test_keypoints_follow_a_random_composition(coord_data):
    path, sources = coord_data
    mirrored, cut = _check(_cfg(path, COMPOSITION), sources)
    assert mirrored > 0 and cut > 0  # the swap and the cut were exercised


def test_eval_keypoints_follow_the_resize(coord_data):
    path, sources = coord_data
    assert _check(_cfg(path, {}), sources, split="validation") == (0, 0)


def test_flip_pairs_resolve_against_the_manifest(coord_data):
    from tfpipe.pipeline._keypoints import keypoint_spec
    from tfpipe.pipeline._settings import settings

    path, _ = coord_data
    spec = keypoint_spec(settings(_cfg(path, {})))
    assert spec.names == tuple(NAMES) and spec.flip == tuple(FLIP)
    assert spec.skeleton == ((0, 1), (0, 2), (0, 3))  # the manifest's, for the preview
    spec = keypoint_spec(settings(_cfg(path, {}, keypoints={"flip_pairs": [[0, 3]]})))
    assert spec.flip == (3, 1, 2, 0)
    spec = keypoint_spec(settings(_cfg(path, {}, keypoints={"flip_pairs": []})))
    assert spec.flip == (0, 1, 2, 3)


def test_keypoints_off_carries_none_and_config_errors(coord_data, tmp_path):
    from tfpipe.pipeline._keypoints import keypoint_spec
    from tfpipe.pipeline._settings import settings

    path, _ = coord_data
    cfg = _cfg(path, {})
    del cfg["data"]["keypoints"]
    assert keypoint_spec(settings(cfg)) is None  # off: Detect carries none (bit-identical)
    assert "keypoints" not in load_config(cfg).to_dict()["data"]  # and the config hash
    from tfpipe.pipeline._caching import _cache_path
    from tfpipe.pipeline._materialize import hashed_settings

    assert "keypoints" not in hashed_settings(settings(cfg))  # materialize hashes as before
    assert hashed_settings(settings(_cfg(path, {})))["keypoints"] == {"names": None,
                                                                     "flip_pairs": "auto"}
    cache = {"pipeline": {**cfg["pipeline"], "cache": str(tmp_path / "c")}}
    names = {_cache_path(settings({**c, **cache}), "train", ["f"], (0, 1), "decoded")
             for c in (cfg, _cfg(path, {}), _cfg(path, {}, keypoints={"flip_pairs": []}))}
    assert len(names) == 3  # decoded caches are keyed by the keypoint settings
    with pytest.raises(ConfigError, match="data.keypoints: .*'detection'"):
        load_config({"data": {"task": "segmentation", "keypoints": {}}})
    with pytest.raises(ConfigError, match=r"data.keypoints.flip_pairs: .*allowed: 0..3"):
        next(iter(build_pipeline(_cfg(path, {}, keypoints={"flip_pairs": [[1, 7]]}))))
    with pytest.raises(ConfigError, match="data.keypoints.names: 2 names"):
        next(iter(build_pipeline(_cfg(path, {}, keypoints={"names": ["a", "b"]}))))
    # records without keypoints: the error names the keys the records have
    rng = np.random.default_rng(0)
    plain = random_objects(rng, 1, K, H, W, 0)
    plain["image"] = coordinate_image(H, W)
    bare = write_dataset(tmp_path / "plain", [plain], keypoints=False)
    with pytest.raises(ConfigError, match=r"image/object/keypoint/y.*The records have: .*bbox"):
        build_pipeline(_cfg(bare, {}))


def test_mosaic_and_mixup_carry_keypoints(coord_data):
    """Batch ops: every visible point lies in its own object's box (rows aligned),
    and mosaic's points come from the right source object."""
    path, sources = coord_data
    cfg = _cfg(path, {})
    cfg["augment"]["batch"] = {"mosaic": {"p": 1.0}, "mixup": {"p": 1.0}}
    for b in build_pipeline(cfg, split="train"):
        kp, boxes, n = b["keypoints"].numpy(), b["boxes"].numpy(), b["num_boxes"].numpy()
        assert "box_weights" in b
        for i in range(len(n)):
            assert not kp[i, n[i]:].any()
            for j in range(n[i]):
                vis = kp[i, j, :, 2] > 0
                y0, x0, y1, x1 = boxes[i, j]
                pts = kp[i, j, vis]
                assert np.all((pts[:, 0] >= y0 - 1e-3) & (pts[:, 0] <= y1 + 1e-3)
                              & (pts[:, 1] >= x0 - 1e-3) & (pts[:, 1] <= x1 + 1e-3))
                c = int(b["classes"][i, j])
                src = sources[c // 100 * 100]["points"][c % 100]
                np.testing.assert_array_equal(np.isin(kp[i, j, :, 2], [0]) | vis, True)
                assert np.all(src[vis, 2] == kp[i, j, vis, 2])  # visibility carried


# ------------------------------------------------------------------ painted marks
COLOURS = {"nose": (0, 255, 0), "left_eye": (255, 0, 0), "right_eye": (0, 0, 255),
           "tail": (255, 255, 0)}
# an upright subject facing the viewer: its left eye is on the image's right
SPOTS = {"nose": (20, 32), "left_eye": (14, 42), "right_eye": (14, 22), "tail": (48, 32)}


@pytest.fixture(scope="module")
def marks_data(tmp_path_factory) -> str:
    from tfpipe import sample_data

    photo = next(iter(sample_data.source_photos().values()))
    img = np.ascontiguousarray(photo[:256:4, :256:4, :3])
    for name, (y, x) in SPOTS.items():
        img[y - 2:y + 3, x - 2:x + 3] = COLOURS[name]
    pts = np.array([[[(y + 0.5) / 64, (x + 0.5) / 64, 2] for y, x in SPOTS.values()]],
                   np.float32)
    sample = {"image": img, "boxes": np.array([[0.1, 0.1, 0.9, 0.9]], np.float32),
              "classes": [1], "points": pts}
    return write_dataset(Path(tmp_path_factory.mktemp("kp")) / "marks", [sample] * 8,
                         splits=("train",))


def _centroid(img: np.ndarray, colour: tuple[int, int, int]) -> np.ndarray:
    ys, xs = np.nonzero(np.all(img == colour, axis=-1))
    return np.array([xs.mean(), ys.mean()])


def test_points_land_on_their_marks_and_left_stays_left(marks_data):
    """Every visible point lands on its mark; the left_eye point is on the
    subject's left in every output, mirrored or not (the subject's left: its
    nose -> tail axis turned a quarter, read from the marks in the output image)."""
    geometry = {"flip": {"horizontal": True, "vertical": True, "p": 0.5}, "rot90": {"p": 0.5},
                "affine": {"rotation": 30.0, "interpolation": "nearest"}}
    cfg = {"seed": 2, "data": {"path": marks_data, "task": "detection", "image_size": [64, 64],
                               "max_boxes": 2, "output_dtype": "uint8", "keypoints": {}},
           "pipeline": {"batch_size": 8, "shuffle_buffer": 1},
           "augment": {"geometry": geometry}}
    kinds = set()
    b = next(iter(build_pipeline(cfg, split="train")))
    for img, kp in zip(b["image"].numpy(), b["keypoints"].numpy()[:, 0]):
        c = {n: _centroid(img, col) for n, col in COLOURS.items()}
        down = c["tail"] - c["nose"]
        subject_left = np.array([down[1], -down[0]])  # upright: down (0, 1) -> left (1, 0)
        mirrored = np.dot(c["left_eye"] - c["right_eye"], subject_left) < 0
        kinds.add(bool(mirrored))
        for j, name in enumerate(NAMES):
            y, x, v = kp[j]
            assert v == 2
            on = tuple(img[int(y * 64), int(x * 64)])
            # after a mirror the subject's left eye is the mark painted as the right one
            want = {"left_eye": "right_eye", "right_eye": "left_eye"}.get(name, name) \
                if mirrored else name
            assert on == COLOURS[want], (name, mirrored)
        left, right = kp[1, 1::-1], kp[2, 1::-1]  # (x, y)
        assert np.dot(left - right, subject_left) > 0
    assert kinds == {True, False}  # both kinds of sample seen (the test can fail)


def test_preview_draws_points_and_skeleton_edges():
    from tfpipe.pipeline.preview import PAD, PALETTE, draw_grid

    kp = np.zeros((2, 3, 3), np.float32)
    kp[0] = [[0.25, 0.25, 2], [0.25, 0.75, 1], [0.75, 0.5, 0]]
    sample = {"image": np.zeros((32, 32, 3), np.uint8),
              "boxes": np.array([[0.9, 0.9, 0.95, 0.95], [0, 0, 0, 0]], np.float32),
              "classes": np.array([1, -1]), "num_boxes": np.array(1), "keypoints": kp}
    grid = np.asarray(draw_grid([sample], skeleton=[[0, 1], [1, 2]]))
    colour = np.array(PALETTE[1])

    def at(y: float, x: float) -> np.ndarray:  # the tile is 192 px (32 px scaled 6x)
        return grid[int(PAD + y * 192), int(PAD + x * 192)]

    np.testing.assert_array_equal(at(0.25, 0.25), colour)  # visible: filled
    row, col = int(PAD + 0.25 * 192), int(PAD + 0.5 * 192)
    assert (grid[row - 1:row + 1, col] == colour).all(-1).any()  # the edge 0-1
    assert not at(0.25, 0.75).any()                       # occluded: hollow ...
    cy, cx = int(PAD + 0.25 * 192), int(PAD + 0.75 * 192)
    assert (grid[cy - 3:cy + 4, cx - 3:cx + 4] == colour).all(-1).any()  # ... its ring drawn
    assert not at(0.75, 0.5).any() and not at(0.5, 0.625).any()  # absent: no dot, no edge
