"""TF Serving's files beside a SavedModel: models.config, batching, warm-up.

Each is written in the format the server reads and checked the way it reads it:

* `models.config`: a `ModelServerConfig` in protobuf text format (parsed with
  `tensorflow_serving.config.model_server_config_pb2`, TF Serving's own proto).
* `batching_parameters.txt` (`--batching_parameters_file`) and, per model,
  `batching_params.pbtxt` in the version directory: TF Serving's
  `BatchingParameters` in text format. `tensorflow-serving-api` does not ship
  that proto, so `parse_batching` parses the text with protobuf's own
  `text_format` against a message built here from the fields TF Serving's
  batching guide documents (wrapped scalars `name { value: N }`, a repeated
  `allowed_batch_sizes`), rejecting unknown fields and bad syntax like the
  server does, and then checks the values field by field.
* `<version>/assets.extra/tf_serving_warmup_requests`: a TFRecord file of
  `PredictionLog` records (`predict_log.request` a `PredictRequest`), at most
  1000, which the server replays when it loads the model.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from tfpipe.errors import TfpipeError

MODELS_CONFIG = "models.config"
BATCHING_FILE = "batching_parameters.txt"
PER_MODEL_BATCHING = "batching_params.pbtxt"
WARMUP_DIR = "assets.extra"
WARMUP_FILE = "tf_serving_warmup_requests"
MAX_WARMUP = 1000  # TF Serving reads at most this many warm-up records


class ServingFileError(TfpipeError, ValueError):
    """A TF Serving file is malformed or inconsistent; names the file and the field."""


def _serving_protos() -> tuple[Any, Any, Any]:
    try:
        from tensorflow_serving.apis import predict_pb2, prediction_log_pb2
        from tensorflow_serving.config import model_server_config_pb2
    except ImportError as exc:  # pragma: no cover - the serving extra is missing
        raise ServingFileError(
            "TF Serving's protos are needed for the serving files: pip install --no-deps "
            f"'tensorflow-serving-api>=2.16' (tfpipe[serving]) ({exc})") from None
    return model_server_config_pb2, prediction_log_pb2, predict_pb2


# ---------------------------------------------------------------- batching


@dataclass(frozen=True)
class BatchingParameters:
    """TF Serving's documented batching knobs (docs/serving.md "Batching").

    Defaults: batches of up to 32 (a CPU server's sweet spot for a small CNN:
    larger batches add latency without more throughput on a few cores), a 2 ms
    timeout (a request waits at most that long for company), one batch thread per
    available CPU, 100 queued batches before the server fails requests fast, and
    allowed sizes 8/16/32 so a partial batch is padded to one of three shapes
    (three graphs warmed instead of 32).
    """

    max_batch_size: int = 32
    batch_timeout_micros: int = 2000
    num_batch_threads: int = 0  # 0 -> the available CPUs at construction
    max_enqueued_batches: int = 100
    allowed_batch_sizes: tuple[int, ...] = (8, 16, 32)
    pad_variable_length_inputs: bool = False
    source: str = "defaults"

    def __post_init__(self) -> None:
        if self.num_batch_threads == 0:
            from tfpipe.system import available_cpus

            object.__setattr__(self, "num_batch_threads", max(1, int(available_cpus())))
        object.__setattr__(self, "allowed_batch_sizes", tuple(int(v) for v in
                                                              self.allowed_batch_sizes))
        problems = check_batching_values(self.to_fields(), "BatchingParameters")
        if problems:
            raise ServingFileError("; ".join(problems))

    def to_fields(self) -> dict[str, Any]:
        return {"max_batch_size": self.max_batch_size,
                "batch_timeout_micros": self.batch_timeout_micros,
                "num_batch_threads": self.num_batch_threads,
                "max_enqueued_batches": self.max_enqueued_batches,
                "allowed_batch_sizes": list(self.allowed_batch_sizes),
                "pad_variable_length_inputs": self.pad_variable_length_inputs}

    def to_text(self) -> str:
        """The text-format file TF Serving's --batching_parameters_file reads."""
        lines = [f"# written by tfpipe export ({self.source})"]
        for name in ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
                     "num_batch_threads"):
            lines.append(f"{name} {{ value: {getattr(self, name)} }}")
        lines += [f"allowed_batch_sizes: {v}" for v in self.allowed_batch_sizes]
        if self.pad_variable_length_inputs:
            lines.append("pad_variable_length_inputs: true")
        return "\n".join(lines) + "\n"

    @property
    def warmup_batch_sizes(self) -> list[int]:
        """The batch shapes the server will run: 1 and every allowed size."""
        sizes = list(self.allowed_batch_sizes) or [self.max_batch_size]
        return sorted({1, *sizes})

    @classmethod
    def from_bench(cls, result: dict[str, Any]) -> BatchingParameters:
        """From a `tfpipe bench --json` result (docs/serving.md "Batching from a bench").

        - max_batch_size: the benched batch (elements / steps), capped at 256;
        - batch_timeout_micros: a tenth of one batch's time (the model step from
          `--model`'s input-bound analysis when present, else the pipeline's p50
          per-batch latency), within [500, 100000] us: waiting for company then
          costs at most ~10% of the work the batch itself takes;
        - num_batch_threads: the CPUs the bench ran on;
        - allowed_batch_sizes: powers of two from 8 below the maximum, then it.
        """
        try:
            r = result["result"]
            batch = max(1, round(float(r["elements"]) / max(1.0, float(r["steps"]))))
            per_batch_ms = float(r["p50_ms"])
            cpus = int(r.get("available_cpus") or 0)
        except (KeyError, TypeError, ValueError) as exc:
            raise ServingFileError(f"--from-bench: not a `tfpipe bench --json` result "
                                   f"(needs result.elements, result.steps, result.p50_ms): "
                                   f"{exc!r}") from None
        ib = result.get("input_bound") or {}
        if ib.get("t_model_ms"):
            per_batch_ms = float(ib["t_model_ms"])
        max_batch = min(256, batch)
        timeout = int(min(100_000, max(500, round(per_batch_ms * 1000 * 0.1))))
        sizes = [2 ** k for k in range(3, int(math.log2(max_batch)) + 1) if 2 ** k < max_batch]
        return cls(max_batch_size=max_batch, batch_timeout_micros=timeout,
                   num_batch_threads=max(1, cpus), max_enqueued_batches=100,
                   allowed_batch_sizes=tuple(sizes + [max_batch]),
                   source=f"from bench: batch {batch}, {per_batch_ms:.2f} ms per batch")


_BATCHING_MESSAGE: Any = None


def _batching_message() -> Any:
    """A protobuf message class with TF Serving's documented BatchingParameters
    fields, built in code (field numbers are ours: text format does not carry
    them). Wrapped scalars use google.protobuf's wrappers, as TF Serving does."""
    global _BATCHING_MESSAGE
    if _BATCHING_MESSAGE is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        from google.protobuf import wrappers_pb2  # noqa: F401 - registers wrappers.proto

        f = descriptor_pb2.FileDescriptorProto(
            name="tfpipe/export/batching_check.proto", package="tfpipe.export.check",
            dependency=["google/protobuf/wrappers.proto"], syntax="proto3")
        m = f.message_type.add(name="BatchingParameters")
        fd = descriptor_pb2.FieldDescriptorProto
        wrapped = [("max_batch_size", ".google.protobuf.Int64Value"),
                   ("batch_timeout_micros", ".google.protobuf.Int64Value"),
                   ("max_enqueued_batches", ".google.protobuf.Int64Value"),
                   ("num_batch_threads", ".google.protobuf.Int64Value"),
                   ("thread_pool_name", ".google.protobuf.StringValue"),
                   ("enable_large_batch_splitting", ".google.protobuf.BoolValue"),
                   ("max_execution_batch_size", ".google.protobuf.Int64Value")]
        for i, (name, type_name) in enumerate(wrapped, start=1):
            m.field.add(name=name, number=i, type=fd.TYPE_MESSAGE, type_name=type_name,
                        label=fd.LABEL_OPTIONAL)
        m.field.add(name="allowed_batch_sizes", number=20, type=fd.TYPE_INT64,
                    label=fd.LABEL_REPEATED)
        m.field.add(name="pad_variable_length_inputs", number=21, type=fd.TYPE_BOOL,
                    label=fd.LABEL_OPTIONAL)
        pool = descriptor_pool.DescriptorPool()
        pool.AddSerializedFile(descriptor_pb2.FileDescriptorProto.FromString(
            wrappers_pb2.DESCRIPTOR.serialized_pb).SerializeToString())
        pool.AddSerializedFile(f.SerializeToString())
        desc = pool.FindMessageTypeByName("tfpipe.export.check.BatchingParameters")
        _BATCHING_MESSAGE = message_factory.GetMessageClass(desc)
    return _BATCHING_MESSAGE


def check_batching_values(fields: dict[str, Any], where: str) -> list[str]:
    """The documented constraints, one message per violated field."""
    out = []
    for name in ("max_batch_size", "batch_timeout_micros", "num_batch_threads",
                 "max_enqueued_batches"):
        if fields.get(name) is None:
            out.append(f"{where}: {name}: missing (write `{name} {{ value: N }}`)")
    mb = fields.get("max_batch_size")
    if mb is not None and mb < 1:
        out.append(f"{where}: max_batch_size: must be >= 1, got {mb}")
    for name in ("num_batch_threads", "max_enqueued_batches"):
        v = fields.get(name)
        if v is not None and v < 1:
            out.append(f"{where}: {name}: must be >= 1, got {v}")
    t = fields.get("batch_timeout_micros")
    if t is not None and t < 0:
        out.append(f"{where}: batch_timeout_micros: must be >= 0, got {t}")
    sizes = list(fields.get("allowed_batch_sizes") or [])
    if sizes:
        if any(b <= a for a, b in zip(sizes, sizes[1:])) or sizes[0] < 1:
            out.append(f"{where}: allowed_batch_sizes: must be positive and strictly "
                       f"increasing, got {sizes}")
        if mb is not None and sizes[-1] != mb:
            out.append(f"{where}: allowed_batch_sizes: the last entry must equal "
                       f"max_batch_size ({mb}), got {sizes[-1]}")
    return out


def parse_batching(text: str, where: str = "batching parameters") -> BatchingParameters:
    """Parse and check a BatchingParameters text file; ServingFileError names the field."""
    from google.protobuf import text_format

    msg = _batching_message()()
    try:
        text_format.Parse(text, msg)
    except text_format.ParseError as exc:
        raise ServingFileError(f"{where}: not a valid BatchingParameters text proto: "
                               f"{exc}") from None
    fields: dict[str, Any] = {}
    for name in ("max_batch_size", "batch_timeout_micros", "num_batch_threads",
                 "max_enqueued_batches"):
        fields[name] = getattr(msg, name).value if msg.HasField(name) else None
    fields["allowed_batch_sizes"] = list(msg.allowed_batch_sizes)
    problems = check_batching_values(fields, where)
    if problems:
        raise ServingFileError("; ".join(problems))
    return BatchingParameters(
        max_batch_size=fields["max_batch_size"],
        batch_timeout_micros=fields["batch_timeout_micros"],
        num_batch_threads=fields["num_batch_threads"],
        max_enqueued_batches=fields["max_enqueued_batches"],
        allowed_batch_sizes=tuple(fields["allowed_batch_sizes"]),
        pad_variable_length_inputs=bool(msg.pad_variable_length_inputs),
        source=where)


def check_batching_file(path: str | os.PathLike[str]) -> BatchingParameters:
    return parse_batching(Path(path).read_text(), str(path))


# ---------------------------------------------------------------- models.config


def models_config_text(name: str, base_path: str, versions: Sequence[int] | None = None
                       ) -> str:
    """A ModelServerConfig: one TensorFlow model; `versions` pins them (specific
    policy), None serves the latest version (the server's default policy, spelled out)."""
    policy = ("latest { num_versions: 1 }" if not versions else
              "specific { " + " ".join(f"versions: {int(v)}" for v in versions) + " }")
    return ("model_config_list {\n"
            "  config {\n"
            f"    name: \"{name}\"\n"
            f"    base_path: \"{base_path}\"\n"
            "    model_platform: \"tensorflow\"\n"
            f"    model_version_policy {{ {policy} }}\n"
            "  }\n"
            "}\n")


@dataclass(frozen=True)
class ModelEntry:
    name: str
    base_path: str
    platform: str
    policy: str
    versions: list[int] = field(default_factory=list)


def check_models_config(path: str | os.PathLike[str], *, check_paths: bool = True
                        ) -> list[ModelEntry]:
    """Parse `path` with TF Serving's `ModelServerConfig` and check every model:
    a name, platform tensorflow, a base_path holding numeric version directories
    with saved_model.pb (when `check_paths`), and the pinned versions present."""
    from google.protobuf import text_format

    msc_pb2, _, _ = _serving_protos()
    cfg = msc_pb2.ModelServerConfig()
    try:
        text_format.Parse(Path(path).read_text(), cfg)
    except text_format.ParseError as exc:
        raise ServingFileError(f"{path}: not a valid ModelServerConfig: {exc}") from None
    if not cfg.HasField("model_config_list") or not cfg.model_config_list.config:
        raise ServingFileError(f"{path}: model_config_list: no model configured")
    out = []
    for i, mc in enumerate(cfg.model_config_list.config):
        where = f"{path}: model_config_list.config[{i}]"
        if not mc.name:
            raise ServingFileError(f"{where}.name: empty")
        if mc.model_platform != "tensorflow":
            raise ServingFileError(f"{where}.model_platform: must be 'tensorflow', "
                                   f"got {mc.model_platform!r}")
        policy = mc.model_version_policy.WhichOneof("policy_choice") or "latest"
        versions = list(mc.model_version_policy.specific.versions) \
            if policy == "specific" else []
        if check_paths:
            base = Path(mc.base_path)
            found = sorted(int(p.name) for p in base.iterdir()
                           if p.name.isdigit() and (p / "saved_model.pb").exists()) \
                if base.is_dir() else []
            if not found:
                raise ServingFileError(f"{where}.base_path: {mc.base_path!r} holds no "
                                       "<version>/saved_model.pb")
            missing = [v for v in versions if v not in found]
            if missing:
                raise ServingFileError(f"{where}.model_version_policy: versions {missing} "
                                       f"not under base_path (found {found})")
        out.append(ModelEntry(mc.name, mc.base_path, mc.model_platform, policy, versions))
    return out


# ---------------------------------------------------------------- warm-up


def warmup_records(model_name: str, images: Sequence[bytes], batch_sizes: Sequence[int],
                   count: int, signature: str = "serving_default",
                   input_name: str = "image_bytes") -> list[bytes]:
    """`count` serialized PredictionLog records; record i sends a batch of
    batch_sizes[i % len] images (cycled from `images`) to `signature`."""
    import tensorflow as tf

    if not 0 <= count <= MAX_WARMUP:
        raise ServingFileError(f"warmup: between 0 and {MAX_WARMUP} records (TF Serving "
                               f"reads no more), got {count}")
    if count and not images:
        raise ServingFileError("warmup: no images to build the requests from")
    _, log_pb2, predict_pb2 = _serving_protos()
    out, k = [], 0
    for i in range(count):
        n = int(batch_sizes[i % len(batch_sizes)])
        batch = [images[(k + j) % len(images)] for j in range(n)]
        k += n
        req = predict_pb2.PredictRequest()
        req.model_spec.name = model_name
        req.model_spec.signature_name = signature
        req.inputs[input_name].CopyFrom(tf.make_tensor_proto(batch, dtype=tf.string,
                                                             shape=[n]))
        log = log_pb2.PredictionLog(predict_log=log_pb2.PredictLog(request=req))
        out.append(log.SerializeToString())
    return out


def write_warmup(version_dir: str | os.PathLike[str], records: Sequence[bytes]) -> Path:
    import tensorflow as tf

    path = Path(version_dir) / WARMUP_DIR / WARMUP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as w:
        for r in records:
            w.write(r)
    return path


def read_warmup(path: str | os.PathLike[str], signatures: dict[str, dict[str, Any]] | None = None
                ) -> list[Any]:
    """Every record of a warm-up file as a `PredictionLog` (what the server replays),
    checked: at most 1000, each a predict_log whose request names a signature of
    `signatures` (name -> {"inputs": {name: ...}}) and feeds exactly its inputs."""
    import tensorflow as tf

    _, log_pb2, _ = _serving_protos()
    logs = []
    for i, raw in enumerate(tf.data.TFRecordDataset(str(path)).as_numpy_iterator()):
        log = log_pb2.PredictionLog.FromString(raw)
        where = f"{path}: record {i}"
        if log.WhichOneof("log_type") != "predict_log":
            raise ServingFileError(f"{where}: log_type must be predict_log, got "
                                   f"{log.WhichOneof('log_type')!r}")
        req = log.predict_log.request
        if signatures is not None:
            sig = req.model_spec.signature_name or "serving_default"
            if sig not in signatures:
                raise ServingFileError(f"{where}: signature {sig!r} not in the model "
                                       f"(has {sorted(signatures)})")
            want = set(signatures[sig]["inputs"])
            if set(req.inputs) != want:
                raise ServingFileError(f"{where}: inputs {sorted(req.inputs)} != the "
                                       f"signature's {sorted(want)}")
        logs.append(log)
    if len(logs) > MAX_WARMUP:
        raise ServingFileError(f"{path}: {len(logs)} records; TF Serving reads at most "
                               f"{MAX_WARMUP}")
    return logs
