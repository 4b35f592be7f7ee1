"""Small shared inputs for the converter tests (built once per session)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tfpipe.convert.samples import make_coco, make_table
from tfpipe.sample_data import make_image_folder

SMALL = (48, 96)  # longer side in pixels: real JPEG/PNG content, tiny files


@pytest.fixture(scope="session")
def folder_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 classes x 8 images (JPEG, some PNG and grayscale)."""
    root = tmp_path_factory.mktemp("folder") / "src"
    make_image_folder(root, num_classes=4, per_class=8, seed=1, size_range=SMALL,
                      png_fraction=0.2)
    return root


@pytest.fixture()
def folder_copy(folder_src: Path, tmp_path: Path) -> Path:
    """A private copy a test may add files to or damage."""
    dst = tmp_path / "src"
    shutil.copytree(folder_src, dst)
    return dst


@pytest.fixture(scope="session")
def coco_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_coco(tmp_path_factory.mktemp("coco"), num_images=12, seed=3,
                     size_range=(64, 128), png_fraction=0.25)


@pytest.fixture(scope="session")
def table_src(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_table(tmp_path_factory.mktemp("table"), num_rows=20, seed=5,
                      size_range=SMALL)


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_bytes(directory: Path) -> dict[str, bytes]:
    """Every file under directory (relative path -> content), for byte-identity checks."""
    return {p.relative_to(directory).as_posix(): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def read_split(out: Path, split: str, features: dict, compression: str | None = None) -> list:
    """Records of a split through plain tf.data (not tfpipe's reader), in shard order."""
    import json

    import tensorflow as tf

    manifest = json.loads((out / "manifest.json").read_text())
    paths = [str(out / s["path"]) for s in manifest["splits"][split]["shards"]]
    ds = tf.data.TFRecordDataset(paths, compression_type="GZIP" if compression else "")
    return [{k: (v.numpy() if not isinstance(v, tf.SparseTensor) else v.values.numpy())
             for k, v in tf.io.parse_single_example(r, features).items()} for r in ds]
