"""Rule details the gallery does not pin: severities that depend on size, exemptions."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import doctor

from .gallery import images, numbers, plain, random_augment

AUTOTUNE = tf.data.AUTOTUNE
BASE = {"cpus": 4, "host_cpus": 4, "ram_budget_bytes": 1 << 30}


def rules(ds, **kw):
    return {(f.rule, f.severity) for f in doctor.check(ds, **{**BASE, **kw})}


def test_cache_size_estimate_scales_severity():
    ds = images(64).cache().prefetch(2)      # 64 x 8*8*3 float32 = 49,152 bytes
    assert rules(ds, ram_budget_bytes=49_152) == set()
    assert rules(ds, ram_budget_bytes=40_000) == {("unbounded-cache", "warning")}
    assert rules(ds, ram_budget_bytes=20_000) == {("unbounded-cache", "error")}
    (f,) = doctor.check(ds, **{**BASE, "ram_budget_bytes": 40_000})
    assert "64 elements" in f.message and "48.0 KiB" in f.message


def test_cache_of_unknown_size_is_info():
    ds = numbers().filter(lambda x: x[0] > 3).cache().prefetch(2)
    assert rules(ds) == {("unbounded-cache", "info")}


def test_deterministic_false_with_stateful_random_warns():
    ds = images().map(random_augment, num_parallel_calls=AUTOTUNE, deterministic=False)
    found = rules(ds.prefetch(2))
    assert ("serial-determinism", "warning") in found
    assert ("stateful-random", "error") in found


def test_options_deterministic_counts_as_explicit():
    opts = tf.data.Options()
    opts.deterministic = True
    ds = numbers().map(plain, num_parallel_calls=AUTOTUNE).prefetch(2).with_options(opts)
    assert rules(ds) == {("serial-determinism", "info")}


def test_private_threadpool_oversubscribed():
    opts = tf.data.Options()
    opts.threading.private_threadpool_size = 64
    ds = numbers().prefetch(2).with_options(opts)
    (f,) = doctor.check(ds, **BASE)
    assert f.rule == "oversubscribed-threads" and f.op == "(pipeline)"
    assert "private_threadpool_size=64" in f.message


def test_single_file_is_info(record_files):
    ds = tf.data.TFRecordDataset(record_files[0]).prefetch(2)
    assert rules(ds) == {("no-interleave", "info")}


def test_parallel_reads_are_fine(record_files):
    ds = tf.data.TFRecordDataset(record_files, num_parallel_reads=3).prefetch(2)
    assert rules(ds) == set()
    ds = tf.data.TFRecordDataset(record_files, num_parallel_reads=1).prefetch(2)
    assert rules(ds) == {("no-interleave", "warning")}


def test_unbatch_between_batch_and_shuffle_is_fine():
    ds = (numbers().batch(4).map(plain, num_parallel_calls=AUTOTUNE).unbatch()
          .shuffle(64).batch(4).prefetch(2))
    assert rules(ds) == set()


def test_buffer_holding_everything_is_a_full_shuffle():
    ds = numbers(16).shuffle(16).batch(8).prefetch(2)   # 2x the batch, but all 16 elements
    assert rules(ds) == set()


def test_batch_size_hint_when_batching_elsewhere():
    ds = numbers(1000).shuffle(100).prefetch(2)
    assert rules(ds) == set()
    assert rules(ds, batch_size_hint=64) == {("small-shuffle-buffer", "warning")}


def test_stateless_sequential_map_is_info():
    ds = images().map(lambda x: tf.image.resize(x, [16, 16])).prefetch(2)
    assert rules(ds) == {("sequential-map", "info")}
    opts = tf.data.Options()
    opts.experimental_optimization.map_parallelization = False
    assert rules(ds.with_options(opts)) == {("sequential-map", "warning")}


def test_from_tensor_slices_ignored_constants_do_not_crash():
    strings = tf.data.Dataset.from_tensor_slices(np.array([b"a", b"bb"])).prefetch(1)
    assert rules(strings) == set()


def test_ignore_errors_only_where_reader_errors_reach_it(record_files):
    from .gallery import parse_one, read

    # Reader errors flow through the map into ignore_errors(): the rest of a file is lost.
    ds = read(record_files).map(parse_one, num_parallel_calls=AUTOTUNE).ignore_errors()
    assert rules(ds.prefetch(2)) == {("ignore-errors", "warning")}

    # Each file's reader absorbs (and logs) its own errors; the outer ignore_errors()
    # only sees per-element map errors.
    def read_logged(path):
        return tf.data.TFRecordDataset(path).ignore_errors(log_warning=True)

    files = tf.data.Dataset.from_tensor_slices(record_files)
    ds = files.interleave(read_logged, cycle_length=3, num_parallel_calls=AUTOTUNE)
    ds = ds.map(parse_one, num_parallel_calls=AUTOTUNE).ignore_errors().prefetch(2)
    assert rules(ds) == {("ignore-errors", "info")}


# ---- bug 9: one finding per stateful random call, at the call's own line -----------------
THREE_OPS = '''\
import numpy as np
import tensorflow as tf


def augment(image):
    image = tf.image.random_flip_left_right(image)
    image = tf.image.random_brightness(image, 0.2)
    image = tf.image.random_contrast(image, 0.8, 1.2)
    return image


def pipeline():
    ds = tf.data.Dataset.from_tensor_slices(np.zeros((8, 8, 8, 3), np.float32))
    return ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE).batch(4).prefetch(2)
'''
THREE_CALLS = {6: "random_flip_left_right", 7: "random_brightness", 8: "random_contrast"}


@pytest.fixture(scope="module")
def three_ops_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("bug9") / "three_ops.py"
    path.write_text(THREE_OPS)
    return path


@pytest.fixture(scope="module")
def three_ops_module(three_ops_file):
    import importlib.util

    spec = importlib.util.spec_from_file_location("three_ops_mod", three_ops_file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cli_reports_each_unseeded_op_at_its_own_line(three_ops_file):
    import json

    from click.testing import CliRunner

    from tfpipe.cli.main import cli

    result = CliRunner().invoke(cli, ["doctor", f"{three_ops_file}:pipeline", "--json"])
    assert result.exit_code == 1, result.output
    found = [f for f in json.loads(result.output) if f["rule"] == "stateful-random"]
    assert sorted(f["location"] for f in found) == [f"{three_ops_file}:{line}"
                                                   for line in sorted(THREE_CALLS)]
    for f in found:
        line = int(f["location"].rsplit(":", 1)[1])
        assert f"tf.image.{THREE_CALLS[line]}" in f["message"]
        assert f"stateless_{THREE_CALLS[line]}" in f["fix"]
        assert f["function"] == "augment"


def test_each_unseeded_op_without_sources_falls_back_to_scopes(three_ops_file,
                                                                three_ops_module, monkeypatch):
    """A graph read without tracebacks still gives one finding per call (name scopes),
    located at the def of the function."""
    from tfpipe.doctor import _check, _sources

    mod = three_ops_module
    monkeypatch.setattr(_sources, "op_call_sites", lambda ds, types: {})
    locations = doctor.locate_functions(three_ops_file)
    found = [f for f in _check.check(mod.pipeline(), locations=locations, cpus=4, host_cpus=4)
             if f.rule == "stateful-random"]
    assert len(found) == 3
    assert {f.location for f in found} == {f"{three_ops_file}:5"}  # the def line
    assert sorted(f.message.split("(graph node ")[1].split(")")[0] for f in found) == [
        "random_flip_left_right/random_uniform/RandomUniform", "random_uniform/RandomUniform",
        "random_uniform_1/RandomUniform"]


def test_python_api_locates_calls_without_locations(three_ops_file, three_ops_module):
    """`doctor.check(ds)` with no `locations`: the call sites come from the ops' tracebacks."""
    mod = three_ops_module
    found = [f for f in doctor.check(mod.pipeline(), cpus=4, host_cpus=4)
             if f.rule == "stateful-random"]
    assert [f.location for f in found] == [f"{three_ops_file}:{n}" for n in sorted(THREE_CALLS)]


def test_every_native_pixel_kernel_counts_as_heavy():
    # a map of one native decode is 3 ops, under the op-count threshold: only the
    # heavy list makes doctor see it as work (before: neither native decode was listed)
    import re
    from pathlib import Path

    from tfpipe.doctor import _ops

    src = Path(doctor.__file__).parents[1] / "native"
    registered = {m for f in src.glob("*.cc")
                  for m in re.findall(r'REGISTER_OP\("(\w+)"\)', f.read_text())}
    assert "TfpipeDecodeCropResizeBlock" in registered
    assert registered - _ops.NATIVE_LIGHT_OPS <= _ops.HEAVY_OPS, \
        sorted(registered - _ops.NATIVE_LIGHT_OPS - _ops.HEAVY_OPS)


def test_sequential_native_decode_map_is_flagged():
    from tfpipe.native import jpeg

    if not jpeg.available():
        pytest.skip("native library not built")  # CI builds it (tests/native fail there)
    encoded = tf.io.encode_jpeg(tf.zeros([8, 8, 3], tf.uint8))
    ds = (tf.data.Dataset.from_tensors(encoded).repeat(4)
          .map(lambda s: jpeg.decode_jpeg_strict(s, channels=3)).prefetch(2))
    found = doctor.check(ds, **BASE)
    assert {(f.rule, f.severity) for f in found} == {("sequential-map", "info")}
    assert "TfpipeDecodeJpegStrict" in next(f.message for f in found)
