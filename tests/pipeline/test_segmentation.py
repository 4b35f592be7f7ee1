"""Segmentation end to end: the mask follows every geometric op through the image's
matrix (an independent NumPy nearest warp is the oracle), eval letterbox, batch ops,
as_supervised, seeds / resume / bad records as the other tasks."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment as A
from tfpipe import seeds
from tfpipe.config import load_config
from tfpipe.errors import ConfigError
from tfpipe.pipeline import build_pipeline, stream_offset
from tfpipe.pipeline._detect_geometry import op_matrix
from tfpipe.pipeline._plan import SampleSeeds
from tfpipe.pipeline._settings import settings

from .conftest import base_config, write_shards

OUT = (40, 48)
IGNORE = 255


def _png(a: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG")
    return buf.getvalue()


def _folder(root: Path, pairs: list[tuple[np.ndarray, np.ndarray]], classes: int) -> Path:
    """images/NNN.png + masks/NNN.png + classes.txt: what `tfpipe convert --masks` reads."""
    for sub in ("images", "masks"):
        (root / sub).mkdir(parents=True)
    for i, (img, mask) in enumerate(pairs):
        (root / "images" / f"{i:03d}.png").write_bytes(_png(img))
        (root / "masks" / f"{i:03d}.png").write_bytes(_png(mask))
    (root / "classes.txt").write_text("".join(f"c{k}\n" for k in range(classes)))
    return root


def _convert(root: Path, split: str | None = None) -> str:
    from tfpipe.convert import convert

    convert(root / "images", root / "out", masks=root / "masks",
            classes=root / "classes.txt", split=split, workers=1)
    return str(root / "out")


def _sources(data: str, split: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """(image, mask) of each record of `split`, in stream order (one shard, no
    shuffle: sample index = record index), decoded by PIL from the record bytes."""
    from PIL import Image

    from tfpipe.records import open_source

    files = list(open_source(data, split=split).files)
    assert len(files) == 1
    spec = {k: tf.io.FixedLenFeature([], tf.string)
            for k in ("image/encoded", "image/segmentation/class/encoded")}
    out = []
    for rec in tf.data.TFRecordDataset(files).as_numpy_iterator():
        ex = tf.io.parse_single_example(rec, spec)
        img, mask = (np.asarray(Image.open(io.BytesIO(ex[k].numpy()))) for k in spec)
        out.append((img, mask))
    return out


def _noise(n: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random RGB noise images of varied sizes, and masks of random classes 0..4 with
    some ignore: any misplaced pixel shows."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        h, w = int(rng.integers(37, 70)), int(rng.integers(41, 90))
        # no multiple of 16: such sizes resized to 40 / 48 put source coordinates
        # exactly on half pixels (nearest ties), where float32 may round either way
        h, w = h + (h % 16 == 0), w + (w % 16 == 0)
        img = rng.integers(1, 256, (h, w, 3), dtype=np.uint8)  # 0 only in the fill
        mask = rng.integers(0, 5, (h, w), dtype=np.uint8)
        mask[rng.random((h, w)) < 0.05] = IGNORE
        out.append((img, mask))
    return out


@pytest.fixture(scope="module")
def noise_data(tmp_path_factory) -> tuple[str, dict[str, list]]:
    """14 noise pairs through `tfpipe convert --masks`, split train / val."""
    root = _folder(Path(tmp_path_factory.mktemp("seg-noise")), _noise(14, 5), 5)
    data = _convert(root, "train=0.7,val=0.3")
    return data, {s: _sources(data, s) for s in ("train", "val")}


def _cfg(path: str, geometry: dict | None = None, **over) -> dict:
    cfg = base_config(path, **{
        "data.task": "segmentation", "data.image_size": list(OUT),
        "data.output_dtype": "uint8", "augment.pixel": {},
        "augment.geometry": geometry or {}, "pipeline.batch_size": 4,
        "pipeline.shuffle_buffer": 1, "pipeline.drop_remainder": False, **over})
    del cfg["data"]["num_classes"]  # from the manifest's class names
    return cfg


def _run(cfg: dict, split: str = "train", **kw) -> dict[str, np.ndarray]:
    batches = list(build_pipeline(cfg, split, keep_index=True, **kw))
    return {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}


# ------------------------------------------------------------------ the oracle
def nearest_warp(src: np.ndarray, m: np.ndarray, out_hw: tuple[int, int], fill: int
                 ) -> list[np.ndarray]:
    """NumPy nearest-neighbour warp: output pixel centre (x, y) (integers, as geometry.py)
    maps through M^-1 (float64) to the source; the nearest source pixel (round half
    away from zero, as ImageProjectiveTransform's nearest) or `fill` outside.
    Returns the candidate outputs: where a source coordinate is within 1e-3 of a
    half-pixel tie (float32 arithmetic in the kernel may round it either way) each
    side of the tie, per axis (4 arrays; all equal where there is no tie)."""
    h, w = src.shape[:2]
    inv = np.linalg.inv(m.astype(np.float64))
    ys, xs = np.mgrid[0:out_hw[0], 0:out_hw[1]].astype(np.float64)
    sx = inv[0, 0] * xs + inv[0, 1] * ys + inv[0, 2]
    sy = inv[1, 0] * xs + inv[1, 1] * ys + inv[1, 2]

    def pick(cx: np.ndarray, cy: np.ndarray) -> np.ndarray:
        ix = np.sign(cx) * np.floor(np.abs(cx) + 0.5)  # half away from zero
        iy = np.sign(cy) * np.floor(np.abs(cy) + 0.5)
        inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
        vals = src[np.clip(iy, 0, h - 1).astype(int), np.clip(ix, 0, w - 1).astype(int)]
        return np.where(inside if src.ndim == 2 else inside[..., None], vals, fill)

    eps = 1e-3

    def sides(c: np.ndarray) -> list[np.ndarray]:
        tie = np.abs(np.abs(c - np.floor(c)) - 0.5) < eps
        return [np.where(tie, c - 2 * eps, c), np.where(tie, c + 2 * eps, c)]

    return [pick(cx, cy) for cx in sides(sx) for cy in sides(sy)]


def _agrees(got: np.ndarray, candidates: list[np.ndarray]) -> np.ndarray:
    ok = np.zeros(got.shape, bool)
    for c in candidates:
        ok |= got == c
    return ok if ok.ndim == 2 else ok.all(axis=-1)


def _ties(candidates: list[np.ndarray]) -> int:
    return int(np.count_nonzero(np.any([c != candidates[0] for c in candidates], axis=0)))


def _matrices(cfg: dict, indices: np.ndarray, pairs, epoch: int = 0) -> list[np.ndarray]:
    """Each sample's matrix: the ops' draws from the sample's seeds (the public
    samplers behind `op_matrix`), composed with the final resize."""
    s = settings(load_config(cfg))
    es = seeds.epoch_seed(seeds.global_seed(s.seed), epoch)
    ss = SampleSeeds(es, 0, 1, s.batch_size)
    ops = s.active("geometry")
    out = []
    for i in indices:
        img = pairs[int(i)][0]
        sseed = ss.op_seeds(tf.constant(int(i), tf.int64))
        cur = (tf.constant(img.shape[0]), tf.constant(img.shape[1]))
        mats = []
        for k, op in enumerate(ops):
            mk, cur = op_matrix(op, sseed(k), cur, OUT)
            mats.append(mk)
        mats.append(A.resize_matrix(cur, OUT))
        out.append(A.compose(*mats).numpy())
    return out


# the chain's kernel is the affine's: an identity affine makes it nearest, so the image
# too can be checked pixel-exact against the NumPy warp
NEAREST = {"affine": {"interpolation": "nearest"}}
# every op of the detection geometry, each with p < 1 somewhere (samples with and
# without it), and compositions in random order of application
GEOMETRIES = {
    "center_crop-rot90-flip-pad_and_crop": {
        "center_crop": {"crop_fraction": 0.7, "p": 0.7}, "rot90": {"p": 0.75},
        "flip": {"horizontal": True, "vertical": True, "p": 0.5},
        "pad_and_crop": {"padding": 6, "p": 0.8}, **NEAREST},
    "random_resized_crop-affine": {
        "random_resized_crop": {"scale": [0.2, 1.0], "p": 0.8},
        "affine": {"rotation": 30.0, "scale": [0.6, 1.3], "shear": 10.0,
                   "translate": [0.2, 0.2], "interpolation": "nearest", "p": 0.8}},
}


@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_mask_and_image_follow_every_op_exactly(noise_data, name):
    """Pixel-exact: the mask is the NumPy nearest warp of the source mask (fill
    ignore), the image (nearest here) the NumPy nearest warp of the source image
    (fill 0), both with the sample's matrix: one matrix for both."""
    path, sources = noise_data
    pairs = sources["train"]
    cfg = _cfg(path, GEOMETRIES[name])
    got = _run(cfg)
    assert got["mask"].dtype == np.int32 and got["mask"].shape[1:] == (*OUT, 1)
    assert sorted(got["index"]) == list(range(len(pairs)))
    ties = 0
    for j, (idx, m) in enumerate(zip(got["index"], _matrices(cfg, got["index"], pairs))):
        img, mask = pairs[int(idx)]
        cands = nearest_warp(mask, m, OUT, IGNORE)
        ok = _agrees(got["mask"][j, ..., 0], cands)
        assert ok.all(), f"{name}: sample {idx}: {np.count_nonzero(~ok)} mask pixels off"
        ok = _agrees(got["image"][j], nearest_warp(img, m, OUT, 0))
        assert ok.all(), f"{name}: sample {idx}: {np.count_nonzero(~ok)} image pixels off"
        ties += _ties(cands)
    # the tolerance is for exact half-pixel ties only: most pixels are checked exactly
    assert ties < 0.1 * got["mask"].size, ties


def test_mask_follows_bilinear_image(noise_data):
    """The image resampled bilinear (the default), the mask nearest, one matrix: the
    image agrees with OpenCV's warpAffine of the same matrix, the mask with the
    NumPy nearest warp."""
    import cv2

    path, sources = noise_data
    pairs = sources["train"]
    geo = {"rot90": {"p": 0.5}, "flip": {"horizontal": True, "p": 0.5},
           "affine": {"rotation": 20.0, "scale": [0.7, 1.2], "translate": [0.1, 0.1]}}
    cfg = _cfg(path, geo)
    got = _run(cfg)
    for j, (idx, m) in enumerate(zip(got["index"], _matrices(cfg, got["index"], pairs))):
        img, mask = pairs[int(idx)]
        cands = nearest_warp(mask, m, OUT, IGNORE)
        assert _agrees(got["mask"][j, ..., 0], cands).all()
        ref = cv2.warpAffine(img, m[:2].astype(np.float64), (OUT[1], OUT[0]),
                             flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                             borderValue=(0, 0, 0))
        # away from the border (no fill blended in): within the kernels' rounding
        inner = np.ones(OUT, bool)
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                inner &= np.roll(cands[0] != IGNORE, (dy, dx), (0, 1))
        diff = np.abs(got["image"][j].astype(int) - ref.astype(int)).max(axis=-1)
        assert np.percentile(diff[inner], 99) <= 2, np.percentile(diff[inner], 99)


# ------------------------------------------------------------------ eval, supervised
def test_eval_letterbox_pads_image_with_zero_and_mask_with_ignore(noise_data):
    path, sources = noise_data
    pairs = sources["val"]
    cfg = _cfg(path, GEOMETRIES["random_resized_crop-affine"], **{"data.ignore_label": 254})
    got = _run(cfg, "val")
    assert sorted(got["index"]) == list(range(len(pairs)))
    for j, idx in enumerate(got["index"]):
        img, mask = pairs[int(idx)]
        h, w = mask.shape
        scale = min(OUT[0] / h, OUT[1] / w)
        nh, nw = round(h * scale), round(w * scale)
        top, left = (OUT[0] - nh) // 2, (OUT[1] - nw) // 2
        inside = np.zeros(OUT, bool)
        inside[top:top + nh, left:left + nw] = True
        assert (got["mask"][j, ..., 0][~inside] == 254).all()  # the fill; the source keeps 255
        assert (got["image"][j][~inside] == 0).all()
        # the mask inside: nearest of the source through the letterbox matrix
        m = np.array([[nw / w, 0, 0.5 * nw / w - 0.5 + left],
                      [0, nh / h, 0.5 * nh / h - 0.5 + top], [0, 0, 1]])
        np.testing.assert_allclose(A.letterbox_matrix((h, w), OUT).numpy(), m, atol=1e-5)
        assert _agrees(got["mask"][j, ..., 0], nearest_warp(mask, m, OUT, 254)).all()
        # the image inside: OpenCV's half-pixel bilinear resize of the whole image
        import cv2

        ref = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
        diff = np.abs(got["image"][j][top:top + nh, left:left + nw].astype(int) - ref)
        assert diff.max() <= 1, diff.max()


def test_as_supervised_gives_image_and_int32_mask(noise_data):
    path, _ = noise_data
    cfg = _cfg(path, {"flip": {}}, **{"data.output_dtype": "float32"})
    for split in ("train", "val"):
        ds = build_pipeline(cfg, split, as_supervised=True)
        image_spec, mask_spec = ds.element_spec
        assert image_spec.dtype == tf.float32 and image_spec.shape.as_list()[1:] == [*OUT, 3]
        assert mask_spec.dtype == tf.int32 and mask_spec.shape.as_list()[1:] == [*OUT, 1]
    x, y = next(iter(ds))
    assert x.shape[0] == y.shape[0] == 4 and y.shape[1:] == (*OUT, 1)


def test_mixup_is_refused_with_the_reason(noise_data):
    path, _ = noise_data
    with pytest.raises(ConfigError, match="no single class per pixel"):
        build_pipeline(_cfg(path, **{"augment.batch": {"mixup": {"alpha": 0.2}}}))


# ------------------------------------------------------------------ the preset, a property
@pytest.fixture(scope="module")
def shapes_data(tmp_path_factory) -> str:
    """`sample_data.make_segmentation_folder`: bright solid shapes (class = shape) on
    darkened photos, their one-pixel rings ignore; through `tfpipe convert --masks`."""
    from tfpipe.convert import convert
    from tfpipe.sample_data import make_segmentation_folder

    root = Path(tmp_path_factory.mktemp("seg-shapes"))
    src = make_segmentation_folder(root / "src", num_images=8, seed=3, size_range=(64, 96))
    convert(src / "images", root / "out", masks=src / "masks", classes=src / "classes.txt",
            workers=1)
    return str(root / "out")


def _band(mask: np.ndarray, width: int) -> np.ndarray:
    """Pixels within `width` (Chebyshev) of a pixel of another value."""
    near = np.zeros(mask.shape, bool)
    pad = np.pad(mask, width, mode="edge")
    h, w = mask.shape
    for dy in range(-width, width + 1):
        for dx in range(-width, width + 1):
            near |= pad[width + dy:width + dy + h, width + dx:width + dx + w] != mask
    return near


def test_preset_masks_agree_with_the_painted_shapes(shapes_data):
    """The segmentation preset (its flip, scale / rotation / translate affine and
    colour jitter; a small image_size): wherever the mask says shape k, the pixel
    has shape k's colour (after the sample's colour jitter: per image, every
    shape-k pixel is within a small distance of the others), and wherever it says
    another class, not shape k's colour; except a 2-pixel band around class changes
    (bilinear and JPEG blur; measured: inside <= 49, elsewhere >= 104 from the centre)."""
    from tfpipe.sample_data import SHAPE_COLORS

    cfg = load_config("segmentation", {
        "data.path": shapes_data, "data.image_size": [48, 96], "data.output_dtype": "uint8",
        "pipeline.batch_size": 4, "pipeline.shuffle_buffer": 8})
    got = _run(cfg)
    masks, images = got["mask"][..., 0], got["image"].astype(float)
    checked = 0
    for img, mask in zip(images, masks):
        assert set(np.unique(mask)) <= {0, 1, 2, 3, IGNORE}
        interior = ~_band(mask, 2)
        for k in SHAPE_COLORS:
            inside = interior & (mask == k)
            if inside.sum() < 4:
                continue
            centre = np.median(img[inside], axis=0)
            dist = np.linalg.norm(img - centre, axis=-1)
            assert (dist[inside] < 64).all(), (k, dist[inside].max())
            outside = interior & (mask != k) & (mask != IGNORE)
            assert (dist[outside] >= 64).all(), (k, dist[outside].min())
            checked += int(inside.sum())
    assert checked > 500  # shapes were there to check


# ------------------------------------------------------------------ batch ops carry masks
def _coded(n: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Images whose gray level encodes their mask (class k: 30 + 40 k, ignore: 250),
    in 12x12 blocks: after any resample the image says which class each pixel must have."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        hb, wb = int(rng.integers(4, 7)), int(rng.integers(5, 8))
        mask = rng.integers(0, 5, (hb, wb)).astype(np.uint8)
        mask[rng.random((hb, wb)) < 0.1] = IGNORE
        mask = np.kron(mask, np.ones((12, 12), np.uint8))
        img = np.where(mask == IGNORE, 250, 30 + 40 * mask.astype(int)).astype(np.uint8)
        out.append((np.repeat(img[..., None], 3, axis=-1), mask))
    return out


@pytest.fixture(scope="module")
def coded_data(tmp_path_factory) -> str:
    return _convert(_folder(Path(tmp_path_factory.mktemp("seg-coded")), _coded(12, 7), 5))


def _decode_levels(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(class the image's gray level says, where it surely says one: an exact code level
    with the same level all around (3x3), so not a blend of two blocks); the mosaic's
    canvas fill 0 says ignore."""
    v = image[..., 0].astype(int)
    k = np.where((v == 250) | (v == 0), IGNORE, (v - 30) // 40)
    code = (v == 0) | (v == 250) | (((v - 30) % 40 == 0) & (v >= 30) & (v <= 190))
    same = np.ones(v.shape, bool)
    pad = np.pad(v, [(0, 0), (1, 1), (1, 1)], mode="edge")
    h, w = v.shape[1:]
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            same &= pad[:, dy:dy + h, dx:dx + w] == v
    return k, code & same


def test_mosaic_and_cutmix_carry_the_masks(coded_data):
    """mosaic (4 tiles, image bilinear at half scale) then cutmix (pasted boxes): every
    pixel whose gray level is exactly a class code has that class in the mask, and
    the batch ops did move content (the masks differ from the plain batches)."""
    geo = {"flip": {"horizontal": True, "p": 0.5}, **NEAREST}
    plain = _run(_cfg(coded_data, geo))
    got = _run(_cfg(coded_data, geo, **{"augment.batch": {"mosaic": {"p": 1.0},
                                                          "cutmix": {"alpha": 1.0, "p": 1.0}}}))
    np.testing.assert_array_equal(got["index"], plain["index"])
    changed = np.mean(got["mask"] != plain["mask"])
    assert changed > 0.3, changed
    k, exact = _decode_levels(got["image"])
    mask = got["mask"][..., 0]
    assert exact.mean() > 0.25, exact.mean()  # a good share of pixels is checked
    bad = exact & (k != mask)
    assert not bad.any(), np.count_nonzero(bad)


# ------------------------------------------------------------------ bad records, resume
BAD = {6: "wrong size", 9: "undecodable"}


@pytest.fixture(scope="module")
def bad_data(tmp_path_factory) -> str:
    """12 coded pairs converted (one shard), then the mask of record 6 replaced by a
    PNG one row taller than its image and that of record 9 by bytes that are no PNG
    (the manifest's sizes and sha256 follow: the shard is valid, two masks are bad)."""
    import hashlib
    import json

    root = Path(tmp_path_factory.mktemp("seg-bad"))
    data = Path(_convert(_folder(root, _coded(12, 9), 5)))
    manifest = json.loads((data / "manifest.json").read_text())
    (entry,) = manifest["splits"]["train"]["shards"]
    path = data / entry["path"]
    records = list(tf.data.TFRecordDataset(str(path)).as_numpy_iterator())
    for r, what in BAD.items():
        ex = tf.train.Example.FromString(records[r])
        feature = ex.features.feature["image/segmentation/class/encoded"].bytes_list
        if what == "wrong size":
            from PIL import Image

            h, w = np.asarray(Image.open(io.BytesIO(feature.value[0]))).shape
            feature.value[:] = [_png(np.zeros((h + 1, w), np.uint8))]
        else:
            feature.value[:] = [b"\x89PNG\r\n\x1a\n this is no png"]
        records[r] = ex.SerializeToString()
    with tf.io.TFRecordWriter(str(path)) as wr:
        for rec in records:
            wr.write(rec)
    entry["num_bytes"] = path.stat().st_size
    entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (data / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return str(data)


def _batches(ds) -> list[dict[str, np.ndarray]]:
    return [{k: v.numpy() for k, v in b.items()} for b in ds]


def test_bad_masks_are_skipped_or_raised_and_resume_is_exact(bad_data):
    """on_error skip: the two bad masks are skipped and counted, nothing else is lost;
    a resume at step 2 (before them) and at step 4 (after them: offset from
    stream_offset) gives the uninterrupted epoch's batches bit for bit, under train
    augmentation (geometry, L3, cutmix); on_error raise names the record."""
    from tfpipe.pipeline import reset_skipped_counts, skipped_counts

    geo = {"random_resized_crop": {"scale": [0.3, 1.0]}, "flip": {"p": 0.5},
           "affine": {"rotation": 10.0}}
    over = {"augment.pixel": {"brightness": {"max_delta": 0.2}},
            "augment.batch": {"cutmix": {"alpha": 1.0, "p": 0.5}},
            "pipeline.batch_size": 2, "pipeline.on_error": "skip",
            "data.output_dtype": "float32"}
    cfg = _cfg(bad_data, geo, **over)
    reset_skipped_counts()
    ref = build_pipeline(cfg, epoch=1, keep_index=True)
    full = _batches(ref)
    good = [p for p in range(12) if p not in BAD]
    assert [int(i) for b in full for i in b["index"]] == good
    assert list(skipped_counts().values()) == [2]
    for step, offset in ((2, None), (4, stream_offset(ref, epoch=1, step=4))):
        if offset is not None:
            assert offset == 9  # the stream position after the 8th good sample (8)
        resumed = _batches(build_pipeline(cfg, epoch=1, step=step, offset=offset,
                                          keep_index=True))
        assert len(resumed) == len(full) - step
        for a, b in zip(resumed, full[step:]):
            for k in a:
                np.testing.assert_array_equal(a[k], b[k], err_msg=f"step {step}: {k}")
    cfg = _cfg(bad_data, geo, **{**over, "pipeline.on_error": "raise"})
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"bad record 6 in shard .*train"):
        _batches(build_pipeline(cfg))
