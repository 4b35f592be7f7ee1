"""Read throughput of tfpipe shards: tf.data (raw, parsed) and tfpipe's own
CRC-checked readers, against `cat` of the same files, side by side in one run.

    .venv/bin/python benchmarks/read_bench.py [--images 300] [--target-mb 150] [--repeats 3]

Shards are written with tfpipe's ShardedWriter from JPEGs built by
tfpipe.sample_data.make_jpeg_bytes, repeated up to --target-mb. The page cache
is warmed by one untimed `cat` first, so every variant reads from memory: this
measures the CPU cost of each reader, not the disk. MB/s counts the bytes of
the (uncompressed) shard files; ratios are to `cat` measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def build_shards(out: str, images: int, target_mb: int, compression: str | None) -> list[str]:
    from PIL import Image
    import io

    from tfpipe.records import ShardedWriter, classification_schema, encode_example
    from tfpipe.sample_data import make_jpeg_bytes

    jpegs = make_jpeg_bytes(images, seed=0)
    schema = classification_schema()
    records = []
    for i, b in enumerate(jpegs):
        w, h = Image.open(io.BytesIO(b)).size
        records.append(encode_example({
            "image/encoded": b, "image/format": "jpeg", "image/height": h, "image/width": w,
            "image/filename": f"{i:05d}.jpg", "image/class/label": i % 10}, schema))
    per_pass = sum(len(r) + 16 for r in records)
    passes = max(1, (target_mb << 20) // per_pass)
    shard_size = max(1, passes * per_pass // 4 + 1)  # about 4 shards
    with ShardedWriter(out, "train", shard_size, compression) as w:
        for _ in range(passes):
            for r in records:
                w.write(r)
    return [i.path for i in w.infos]


def timeit(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=300)
    ap.add_argument("--target-mb", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import tensorflow as tf

    from tfpipe.records import classification_schema, iter_frames, scan_file

    tmp = tempfile.mkdtemp(prefix="tfpipe-read-bench-")
    try:
        plain = build_shards(os.path.join(tmp, "plain"), args.images, args.target_mb, None)
        gz = build_shards(os.path.join(tmp, "gzip"), args.images, args.target_mb, "gzip")
        nbytes = sum(os.path.getsize(f) for f in plain)
        gz_bytes = sum(os.path.getsize(f) for f in gz)
        mb = nbytes / 1e6
        spec = classification_schema().parse_spec()

        def cat(files: list[str]) -> None:
            subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)

        def tf_reduce(ds: tf.data.Dataset) -> int:
            return int(ds.reduce(tf.constant(0, tf.int64),
                                 lambda acc, x: acc + tf.cast(tf.strings.length(x), tf.int64)))

        def tf_read(files: list[str], comp: str = "", npr: int | None = None,
                    buffer: int | None = None) -> int:
            return tf_reduce(tf.data.TFRecordDataset(files, compression_type=comp,
                                                     buffer_size=buffer,
                                                     num_parallel_reads=npr))

        def tf_parse_single(files: list[str]) -> int:
            ds = tf.data.TFRecordDataset(files).map(
                lambda s: tf.io.parse_single_example(s, spec)["image/encoded"],
                num_parallel_calls=tf.data.AUTOTUNE)
            return tf_reduce(ds)

        def tf_parse_batch(files: list[str]) -> int:
            ds = tf.data.TFRecordDataset(files).batch(256).map(
                lambda s: tf.io.parse_example(s, spec)["image/encoded"],
                num_parallel_calls=tf.data.AUTOTUNE).unbatch()
            return tf_reduce(ds)

        def py_frames(files: list[str]) -> int:
            return sum(len(d) for f in files for _, _, d in iter_frames(f))

        def py_scan(files: list[str]) -> int:
            assert all(not scan_file(f) for f in files)
            return 0

        cat(plain), cat(gz)  # warm the page cache
        expected = tf_read(plain)  # warm TF (graph building, thread pools)
        assert tf_read(gz, "GZIP") == expected == py_frames(plain)

        variants: list[tuple[str, Callable[[], object]]] = [
            ("cat > /dev/null", lambda: cat(plain)),
            ("TFRecordDataset, read only", lambda: tf_read(plain)),
            ("TFRecordDataset, buffer_size=8 MiB", lambda: tf_read(plain, buffer=8 << 20)),
            ("TFRecordDataset, num_parallel_reads=4", lambda: tf_read(plain, npr=4)),
            ("TFRecordDataset GZIP, read only", lambda: tf_read(gz, "GZIP")),
            ("+ parse_single_example (map, AUTOTUNE)", lambda: tf_parse_single(plain)),
            ("+ batched parse_example (256)", lambda: tf_parse_batch(plain)),
            ("tfpipe iter_frames (Python, CRC checked)", lambda: py_frames(plain)),
            ("tfpipe scan_file (verify's frame pass)", lambda: py_scan(plain)),
        ]
        results = [(name, timeit(fn, args.repeats)) for name, fn in variants]
        cat_s = results[0][1]
        print(f"{len(plain)} shards, {mb:.1f} MB plain ({gz_bytes / 1e6:.1f} MB as GZIP), "
              f"{expected / 1e6:.1f} MB of record payload; median of {args.repeats} runs")
        print(f"{'variant':44s} {'MB/s':>9s} {'x cat':>7s}")
        for name, s in results:
            print(f"{name:44s} {mb / s:9.0f} {cat_s / s:7.3f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
