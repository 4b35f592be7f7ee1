"""The benchmark peers do the augmentation their recipe says (issue #22).

A peer that skipped a step would look faster and inflate every ratio in
docs/performance.md, and a shape test cannot see it. So each peer runs on
images built to expose each step, and its outputs are read back with NumPy:

* a dark left quarter on white: a plain resize always keeps 25% dark columns on
  the left; the random-resized crop moves that share from sample to sample, and
  the horizontal flip puts the dark columns on the right in about half of them;
* a uniform grey (level 128): crop, resize, flip and contrast leave it uniform,
  so each output is one value per channel and reads back the brightness shift,
  which must spread over the recipe's +-0.4 (after un-normalizing with the
  ImageNet mean/std the recipe ends with).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tfpipe.bench import baselines as B

N = 48
SIZE = 32
MEAN = np.array(B.IMAGENET_MEAN, np.float32)
STD = np.array(B.IMAGENET_STD, np.float32)


def _shards(root: Path, image: np.ndarray) -> list[str]:
    from tfpipe.records import Manifest, ShardEntry, SplitInfo, classification_schema
    from tfpipe.records import encode_example
    from tfpipe.records.writer import shard_name, write_shard

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, "JPEG", quality=100, subsampling=0)
    data = buf.getvalue()
    schema = classification_schema()
    records = [encode_example({"image/encoded": data, "image/format": b"jpeg",
                               "image/height": image.shape[0], "image/width": image.shape[1],
                               "image/filename": f"{i}.jpg".encode(),
                               "image/source_id": str(i).encode(),
                               "image/class/label": 0, "image/class/text": b"a"}, schema)
               for i in range(N)]
    root.mkdir(parents=True)
    path = root / shard_name("train", 0, 1, None)
    entry = ShardEntry.from_info(write_shard(str(path), records), root)
    Manifest(schema=schema, splits={"train": SplitInfo(shards=[entry])},
             class_names=["a"]).save(root)
    return [str(path)]


@pytest.fixture(scope="module")
def peer_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    root = tmp_path_factory.mktemp("peers")
    edge = np.full((96, 128, 3), 255, np.uint8)
    edge[:, :32] = 0
    grey = np.full((96, 128, 3), 128, np.uint8)
    return {"edge": _shards(root / "edge", edge), "grey": _shards(root / "grey", grey)}


def _peers() -> dict:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import peers  # benchmarks/peers.py: the Grain / OpenCV + fused LUT rows

    def opencv_lut(files: list[str], batch_size: int, size: int):
        from tfpipe.bench.baselines import read_records

        recs = [(bytes(d.numpy()), int(y.numpy())) for d, y in read_records(files)]
        imgs = [peers.imagenet_sample(d, i, seed=0, size=size) for i, (d, _) in enumerate(recs)]
        return [{"image": np.stack(imgs[j:j + batch_size])}
                for j in range(0, len(imgs), batch_size)]

    return {"cv2 in tf.py_function": B.cv2_py_function,
            "albumentations via tf.numpy_function": B.albumentations_numpy_function,
            "per-sample tf.image": B.tf_image_per_sample,
            "Keras preprocessing layers": B.keras_layers,
            "OpenCV + fused cv2.LUT (Grain / threads / Pool rows)": opencv_lut}


PEERS = list(_peers())
# Keras has no random-resized-crop layer; the peer documents its substitute
TRANSLATE_ONLY = {"Keras preprocessing layers"}
CONTRAST_ABOUT_ZERO = {"albumentations via tf.numpy_function"}


def _run(peer: str, files: list[str]) -> np.ndarray:
    """All N outputs of `peer` un-normalized to [0, 1] levels, [N, SIZE, SIZE, 3]."""
    batches = _peers()[peer](files, batch_size=8, size=SIZE)
    out = np.concatenate([np.asarray(b["image"]) for b in batches])
    assert out.shape == (N, SIZE, SIZE, 3) and out.dtype == np.float32
    return out * STD + MEAN


@pytest.mark.parametrize("peer", PEERS)
def test_peer_crops_and_flips(peer: str, peer_data: dict[str, list[str]]) -> None:
    levels = _run(peer, peer_data["edge"]).mean(axis=(1, 3))  # [N, SIZE] column profile
    lo, hi = levels.min(axis=1, keepdims=True), levels.max(axis=1, keepdims=True)
    dark = levels < (lo + hi) / 2
    two_tone = (hi - lo)[:, 0] > 0.2
    share = np.where(two_tone, dark.mean(axis=1), 0.0)
    # a plain resize: 8 of 32 columns dark in every sample, always on the left
    assert len(np.unique(np.round(share, 2))) >= 6, f"{peer}: the crop never moves: {share}"
    if peer in TRANSLATE_ONLY:  # resize to 1.15x, then a random 1/1.15 crop: no zoom
        assert 0.08 <= share.min() and share.max() <= 0.32, f"{peer}: {share}"
    else:  # random-resized crop, scale 0.08-1: some windows zoom past the edge or into it
        assert (~two_tone).any() or (share > 0.4).any(), f"{peer}: no crop zooms in: {share}"
    right = dark[two_tone][:, -1] & ~dark[two_tone][:, 0]
    left = dark[two_tone][:, 0] & ~dark[two_tone][:, -1]
    flipped = right.sum() / max(1, right.sum() + left.sum())
    assert 0.2 <= flipped <= 0.8, f"{peer}: {right.sum()} flipped of {right.sum() + left.sum()}"


@pytest.mark.parametrize("peer", PEERS)
def test_peer_shifts_brightness(peer: str, peer_data: dict[str, list[str]]) -> None:
    out = _run(peer, peer_data["grey"])
    # uniform in, uniform out (1/255 for the JPEG's and the kernels' rounding)
    assert np.ptp(out, axis=(1, 2)).max() <= 2 / 255, peer
    shift = out.mean(axis=(1, 2, 3)) - 128 / 255
    # albumentations' contrast scales about 0, not about the mean: it moves a grey too
    bound = 0.4 + (0.4 * 128 / 255 if peer in CONTRAST_ABOUT_ZERO else 0.0) + 2 / 255
    assert np.abs(shift).max() <= bound, f"{peer}: shift beyond {bound:.3f}: {shift}"
    # 48 uniform draws from [-0.4, 0.4]: the range misses 0.5 with probability ~1e-12
    assert np.ptp(shift) >= 0.5, f"{peer}: brightness barely moves: {np.ptp(shift):.3f}"
