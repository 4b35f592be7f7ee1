"""Same config, seed and data -> the same bytes on every CPU host (docs/seeds.md).

Each environment below runs, in its own process, the pipelines of the imagenet
(train at 224x224, where the fused colour chain and the native kernels run; a
mixup/cutmix + hue/gamma variant; uint8 output; eval), cifar, remote-sensing
(elastic warp), detection and segmentation presets on small
generated datasets, and prints the sha256 of the first two batches (every key:
dtype, shape, bytes). What a narrower host would run is emulated through the
knobs that pick code per host at run time:

- XLA's CPU backend: `XLA_FLAGS=--xla_cpu_max_isa=SSE4_2|AVX2` (vector width, FMA);
- oneDNN (matmul, convolutions): `ONEDNN_MAX_CPU_ISA=SSE41|AVX2`, and
  `TF_ENABLE_ONEDNN_OPTS=0/1` (TF turns oneDNN on by default only on some CPUs);
- glibc's libm/string ifuncs (FMA/AVX2 variants of exp, log, pow, ...):
  `GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,...`;
- libjpeg-turbo's SIMD dispatch: `JSIMD_FORCESSE2=1` (an SSE-only host has no AVX2);
- tfpipe's own dispatch (the native resize has an AVX2 and a baseline version):
  the native kernels' baseline loops (`tfpipe.native.baseline_isa()`);
- the intra-op thread pool size (hosts differ in core count);
- tfpipe's native kernels on/off (`TFPIPE_NATIVE=0`: the pure-TF twins);
- TF's graph optimizer (grappler) off, as the suite's own test processes run
  (tests/conftest.py): it must not change a byte either (in the AVX2 child).

The hashes must be equal across all environments. Before the fix (XLA-compiled
colour chain and normalize) the SSE4_2 and AVX2 environments hashed differently
from the default one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from .conftest import CLASSES, _example, make_images, write_shards

CHILD = textwrap.dedent(r'''
    import hashlib, json, os, sys
    import tensorflow as tf
    if os.environ.get("TFPIPE_TEST_NO_GRAPPLER") == "1":  # as tests/conftest.py runs tests
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    threads = int(os.environ.get("TFPIPE_TEST_THREADS", "0"))
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    import tfpipe
    from tfpipe import native

    cls, det, seg = sys.argv[1], sys.argv[2], sys.argv[3]

    def digest(ds, n=2):
        h = hashlib.sha256()
        for batch in ds.take(n):
            for key in sorted(batch):
                a = batch[key].numpy()
                h.update(f"{key}|{a.dtype}|{a.shape}|".encode())
                h.update(a.tobytes())
        return h.hexdigest()[:16]

    common = {"pipeline.shuffle_buffer": 16, "pipeline.num_parallel_calls": 2}
    runs = {
        "imagenet": ("imagenet", "train", {"data.path": cls, "data.num_classes": 4,
                                           "pipeline.batch_size": 8}),
        "imagenet-eval": ("imagenet", "val", {"data.path": cls, "data.num_classes": 4,
                                              "pipeline.batch_size": 8}),
        "imagenet-uint8": ("imagenet", "train", {"data.path": cls, "data.num_classes": 4,
                                                 "pipeline.batch_size": 8,
                                                 "data.output_dtype": "uint8"}),
        "imagenet-mix-hue-gamma": ("imagenet", "train", {
            "data.path": cls, "data.num_classes": 4, "pipeline.batch_size": 8,
            "augment.batch.mixup.enabled": True, "augment.batch.cutmix.enabled": True,
            "augment.pixel.hue": {"max_delta": 0.1, "p": 0.5},
            "augment.pixel.gamma": {"lower": 0.7, "upper": 1.4}}),
        "cifar": ("cifar", "train", {"data.path": cls, "data.num_classes": 4,
                                     "pipeline.batch_size": 16}),
        "remote-sensing": ("remote-sensing", "train", {"data.path": cls, "data.num_classes": 4,
                                                       "data.image_size": [96, 96],
                                                       "augment.geometry.elastic.p": 1.0,
                                                       "pipeline.batch_size": 4}),
        "detection": ("detection", "train", {"data.path": det, "data.num_classes": 4,
                                             "data.image_size": [160, 160],
                                             "data.max_boxes": 8,
                                             "pipeline.batch_size": 4}),
        "segmentation": ("segmentation", "train", {"data.path": seg, "data.image_size": [48, 96],
                                                   "pipeline.batch_size": 4}),
    }
    out = {"_native": native.available()}
    # the native kernels' baseline loops (their `isa` attr), as a pre-AVX host runs
    import contextlib
    isa = (native.baseline_isa() if os.environ.get("TFPIPE_TEST_ISA") == "baseline"
           else contextlib.nullcontext())
    with isa:
        for name, (preset, split, over) in runs.items():
            cfg = tfpipe.load_config(preset, {**common, **over})
            out[name] = digest(tfpipe.build_pipeline(cfg, split=split))
    print("HASHES " + json.dumps(out, sort_keys=True))
''')

# glibc >= 2.33 spells hwcaps without the old "_Usable" suffix (Debian 12: 2.36).
_NO_AVX = "glibc.cpu.hwcaps=-AVX512F,-AVX512DQ,-AVX512BW,-AVX512VL,-AVX2,-FMA,-AVX"
ENVS: dict[str, dict[str, str]] = {
    "default": {},
    "sse4.2 host": {"XLA_FLAGS": "--xla_cpu_max_isa=SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41",
                    "GLIBC_TUNABLES": _NO_AVX, "JSIMD_FORCESSE2": "1",
                    "TFPIPE_TEST_ISA": "baseline",
                    "TFPIPE_TEST_THREADS": "1"},
    # + TF's graph optimizer off: not a host, but how the suite's own processes run
    # (tests/conftest.py); one child for both, as a child costs ~30 CPU-s (4 children
    # run in two waves of two, 5 took three)
    "avx2 host, oneDNN off, graph optimizer off": {
        "XLA_FLAGS": "--xla_cpu_max_isa=AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F,-AVX512DQ,-AVX512BW,-AVX512VL",
        "TFPIPE_TEST_THREADS": "3", "TFPIPE_TEST_NO_GRAPPLER": "1"},
    "native off, oneDNN on": {"TFPIPE_NATIVE": "0", "TF_ENABLE_ONEDNN_OPTS": "1"},
}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> tuple[str, str, str]:
    """(classification glob, detection glob, segmentation dataset): real photo crops,
    JPEG and PNG; the segmentation masks are the photos' grey levels in 4 classes
    (and ignore), converted by `tfpipe convert --masks`."""
    root = Path(tmp_path_factory.mktemp("hosts"))
    images = make_images(24, seed=5)
    write_shards(root / "cls", "train",
                 [_example(enc, fmt, i % CLASSES) for i, (enc, fmt, _) in enumerate(images)], 2,
                 eval_links=True)
    rng = np.random.default_rng(7)
    recs = []
    for i, (enc, fmt, _) in enumerate(images[:16]):
        n = 1 + i % 3
        y0, x0 = rng.uniform(0.0, 0.5, n), rng.uniform(0.0, 0.5, n)
        boxes = np.stack([y0, x0, y0 + rng.uniform(0.1, 0.5, n), x0 + rng.uniform(0.1, 0.5, n)], 1)
        recs.append(_example(enc, fmt, 0, boxes, [1 + (i + k) % 3 for k in range(n)]))
    write_shards(root / "det", "train", recs, 2, eval_links=True)
    from tfpipe import sample_data
    from tfpipe.convert import convert

    for sub in ("images", "masks"):
        (root / "seg" / sub).mkdir(parents=True)
    for i, (_, _, img) in enumerate(x for x in images if x[2].ndim == 3):
        mask = (img.mean(axis=2) // 64).astype(np.uint8)
        mask[:2] = 255
        (root / "seg" / "images" / f"{i:02d}.png").write_bytes(sample_data.encode(img, "png"))
        (root / "seg" / "masks" / f"{i:02d}.png").write_bytes(sample_data.encode(mask, "png"))
    convert(root / "seg" / "images", root / "seg" / "out", masks=root / "seg" / "masks",
            workers=1)
    return (str(root / "cls" / "*.tfrecord"), str(root / "det" / "*.tfrecord"),
            str(root / "seg" / "out"))


def run_env(script: Path, data: tuple[str, str, str], extra: dict[str, str]) -> dict:
    env = dict(os.environ)
    for key in ("XLA_FLAGS", "ONEDNN_MAX_CPU_ISA", "TF_ENABLE_ONEDNN_OPTS", "GLIBC_TUNABLES",
                "JSIMD_FORCESSE2", "TFPIPE_NATIVE", "TFPIPE_TEST_ISA", "TFPIPE_TEST_THREADS",
                "TFPIPE_TEST_NO_GRAPPLER"):
        env.pop(key, None)  # the parent's settings must not leak into "default"
    env.update(extra)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    proc = subprocess.run([sys.executable, str(script), *data], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"{extra}: child failed\n{proc.stderr[-3000:]}"
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("HASHES ")]
    assert line, f"{extra}: no hashes in output\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return json.loads(line[-1][len("HASHES "):])


@pytest.mark.slow
def test_same_bytes_on_narrower_hosts(tmp_path, datasets):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:  # two children at a time: TF import dominates
        futures = {name: pool.submit(run_env, script, datasets, extra)
                   for name, extra in ENVS.items()}
        results = {name: f.result() for name, f in futures.items()}
    native_flags = {name: r.pop("_native") for name, r in results.items()}
    # the native kernels must really be exercised where they are expected (CI builds them)
    if os.environ.get("CI", "").lower() == "true":
        assert native_flags["default"], "CI: the native library must be built"
    assert native_flags["native off, oneDNN on"] is False
    ref = results["default"]
    diffs = {name: {k: (ref[k], v[k]) for k in ref if v[k] != ref[k]}
             for name, v in results.items() if v != ref}
    assert not diffs, "hashes differ from the default environment:\n" + json.dumps(
        {"default": ref, **diffs}, indent=1)
