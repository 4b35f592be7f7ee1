"""models.config and warm-up records read with TF Serving's own protos; the batching
file checked field by field (and bad ones rejected)."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf
from google.protobuf import text_format

pytestmark = pytest.mark.xdist_group("export")


def test_models_config_parses_as_model_server_config(exported):
    from tensorflow_serving.config import model_server_config_pb2

    from tfpipe.export import check_models_config

    path = Path(exported.serving_files["models_config"])
    cfg = text_format.Parse(path.read_text(), model_server_config_pb2.ModelServerConfig())
    (mc,) = cfg.model_config_list.config
    assert mc.name == "tiny"
    assert Path(mc.base_path) == Path(exported.version_dir).parent.resolve()
    assert (Path(mc.base_path) / "3" / "saved_model.pb").is_file()
    assert mc.model_platform == "tensorflow"
    assert mc.model_version_policy.WhichOneof("policy_choice") == "latest"
    assert mc.model_version_policy.latest.num_versions == 1
    (entry,) = check_models_config(path)
    assert (entry.name, entry.policy) == ("tiny", "latest")


def test_models_config_checks(tmp_path, exported):
    from tfpipe.export import ServingFileError, check_models_config, models_config_text

    base = str(Path(exported.version_dir).parent)
    p = tmp_path / "models.config"
    p.write_text(models_config_text("tiny", base, versions=[3]))
    assert check_models_config(p)[0].versions == [3]
    p.write_text(models_config_text("tiny", base, versions=[3, 7]))
    with pytest.raises(ServingFileError, match=r"versions \[7\] not under base_path"):
        check_models_config(p)
    p.write_text(models_config_text("tiny", str(tmp_path / "nowhere")))
    with pytest.raises(ServingFileError, match="holds no <version>/saved_model.pb"):
        check_models_config(p)
    p.write_text("model_config_list { config { nme: 'x' } }")
    with pytest.raises(ServingFileError, match="not a valid ModelServerConfig"):
        check_models_config(p)


def test_warmup_records_are_prediction_logs_the_model_answers(exported, loaded):
    from tensorflow_serving.apis import prediction_log_pb2

    from tfpipe.export import read_warmup

    path = Path(exported.version_dir) / "assets.extra" / "tf_serving_warmup_requests"
    raw = list(tf.data.TFRecordDataset(str(path)).as_numpy_iterator())
    assert len(raw) == exported.warmup_records == 5
    sizes = []
    for r in raw:  # what the server does at load: parse, replay each request
        log = prediction_log_pb2.PredictionLog.FromString(r)
        req = log.predict_log.request
        assert req.model_spec.name == "tiny"
        assert req.model_spec.signature_name == "serving_default"
        assert list(req.inputs) == ["image_bytes"]
        data = tf.make_ndarray(req.inputs["image_bytes"])
        assert data.dtype == object and data.ndim == 1
        out = loaded.signatures["serving_default"](image_bytes=tf.constant(list(data)))
        assert out["scores"].shape == (len(data), 2)
        sizes.append(len(data))
    # every batch shape the batching config allows (1 and 2/4/8) is warmed
    assert sorted(set(sizes)) == [1, 2, 4, 8]
    assert len(read_warmup(path, exported.signatures)) == 5


def test_warmup_limits(exported):
    from tfpipe.export import ServingFileError, read_warmup, warmup_records

    with pytest.raises(ServingFileError, match="at most|between 0 and 1000"):
        warmup_records("tiny", [b"x"], [1], 1001)
    path = Path(exported.version_dir) / "assets.extra" / "tf_serving_warmup_requests"
    with pytest.raises(ServingFileError, match="signature 'serving_default' not in"):
        read_warmup(path, {"other": {"inputs": {"image_bytes": {}}}})


GOOD = """
max_batch_size { value: 32 }
batch_timeout_micros { value: 2000 }
max_enqueued_batches { value: 100 }
num_batch_threads { value: 4 }
allowed_batch_sizes: 8
allowed_batch_sizes: 16
allowed_batch_sizes: 32
"""


def test_batching_files_written_pass_the_field_check(exported):
    from tfpipe.export import check_batching_file

    server = check_batching_file(exported.serving_files["batching_parameters"])
    per_model = check_batching_file(Path(exported.version_dir) / "batching_params.pbtxt")
    for b in (server, per_model):
        assert (b.max_batch_size, b.allowed_batch_sizes) == (8, (2, 4, 8))
        assert b.batch_timeout_micros == 2000 and b.max_enqueued_batches == 100
        assert b.num_batch_threads >= 1


@pytest.mark.parametrize("text,problem", [
    (GOOD.replace("allowed_batch_sizes: 16", "allowed_batch_sizes: 4"),
     "strictly increasing, got [8, 4, 32]"),
    (GOOD.replace("allowed_batch_sizes: 32", "allowed_batch_sizes: 24"),
     "the last entry must equal max_batch_size (32), got 24"),
    (GOOD.replace("num_batch_threads { value: 4 }", ""), "num_batch_threads: missing"),
    (GOOD.replace("value: 100", "value: 0"), "max_enqueued_batches: must be >= 1"),
    (GOOD + "max_batch_sise { value: 3 }", "not a valid BatchingParameters"),
    (GOOD.replace("max_batch_size { value: 32 }", "max_batch_size: 32"),
     "not a valid BatchingParameters"),  # a wrapped field written as a bare scalar
])
def test_batching_field_check_rejects(text, problem):
    from tfpipe.export import ServingFileError, parse_batching

    assert parse_batching(GOOD).allowed_batch_sizes == (8, 16, 32)
    with pytest.raises(ServingFileError) as e:
        parse_batching(text, "b.txt")
    assert problem in str(e.value) and "b.txt" in str(e.value)


def test_batching_from_a_bench_result(config):
    """From what `tfpipe bench --json` prints ({"result": Result.to_dict(), ...})."""
    from tfpipe import bench, build_pipeline
    from tfpipe.export import BatchingParameters, parse_batching

    ds = build_pipeline({**config, "pipeline": {"batch_size": 4}}, split="val")  # 8 records
    res = {"result": bench.measure(ds.repeat(), warmup=1, steps=2).to_dict()}
    b = BatchingParameters.from_bench(res)
    assert (b.max_batch_size, b.allowed_batch_sizes) == (4, (4,))
    assert 500 <= b.batch_timeout_micros <= 100_000
    assert b.num_batch_threads == res["result"]["available_cpus"]
    again = parse_batching(b.to_text())
    assert again.to_fields() == b.to_fields()
    res["input_bound"] = {"t_model_ms": 40.0}
    assert BatchingParameters.from_bench(res).batch_timeout_micros == 4000
    big = {"result": {**res["result"], "elements": 64 * 2, "steps": 2}}
    assert BatchingParameters.from_bench(big).allowed_batch_sizes == (8, 16, 32, 64)
