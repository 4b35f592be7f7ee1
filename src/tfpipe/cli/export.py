"""`tfpipe export`: SavedModel with the eval preprocessing, TF Serving files, TFLite check."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("config")
@click.option("--model", "model_path", required=True, type=click.Path(exists=True,
              dir_okay=False), help="The trained Keras model (.keras / .h5).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Export root: OUT/<name>/<version>/ plus the serving files.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (repeatable).")
@click.option("--name", "model_name", default=None,
              help="Model name for TF Serving (default: the model file's stem).")
@click.option("--version", "version", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--serving-config/--no-serving-config", default=True, show_default=True,
              help="Write models.config and batching_parameters.txt into OUT.")
@click.option("--warmup", type=click.IntRange(0, 1000), default=10, show_default=True,
              help="Warm-up requests (PredictionLog) in assets.extra (0: none).")
@click.option("--per-model-batching", is_flag=True,
              help="Also write batching_params.pbtxt into the version directory.")
@click.option("--from-bench", "bench_file", type=click.Path(exists=True, dir_okay=False),
              help="Batching parameters from a `tfpipe bench --json` result.")
@click.option("--base-path", default=None,
              help="models.config base_path (default: OUT/<name>, absolute; e.g. "
                   "/models/<name> inside a container).")
@click.option("--top-k", type=click.IntRange(min=1), default=5, show_default=True,
              help="Classification: the top classes returned (not for segmentation or "
                   "detection).")
@click.option("--tflite", is_flag=True,
              help="Convert with the TFLite converter and compare with the SavedModel "
                   "(classification; refused for segmentation and detection).")
@click.option("--overwrite", is_flag=True, help="Replace an existing OUT/<name>/<version>.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(config: str, model_path: str, out_dir: str, sets: tuple[str, ...],
            model_name: str | None, version: int, serving_config: bool, warmup: int,
            per_model_batching: bool, bench_file: str | None, base_path: str | None,
            top_k: int, tflite: bool, overwrite: bool, as_json: bool) -> None:
    """Export MODEL with CONFIG's eval preprocessing as a TF Serving SavedModel.

    Signatures: serving_default (image_bytes -> outputs, probabilities,
    class_ids, classes, scores), preprocess (image_bytes -> image),
    predict_preprocessed (image -> outputs). A segmentation config (data.task:
    segmentation, a model returning [B, H, W, num_classes]): serving_default ->
    class_map at each request image's size, image_size, window, scores,
    model_class_map. A detection config (a model returning a dict of boxes
    [B, N, 4] normalized yxyx, classes, scores[, num_detections, keypoints,
    instance_masks]): serving_default -> boxes and keypoints in each request
    image's pixels, classes, class_names, scores, num_detections, image_size,
    box-relative instance_masks. See docs/serving.md.
    """
    from tfpipe.config import load_config, parse_set_options
    from tfpipe.errors import TfpipeError
    from tfpipe.export import BatchingParameters, export_serving, tflite_text

    try:
        cfg = load_config(config, parse_set_options(list(sets)) if sets else None)
        batching = None
        if bench_file:
            batching = BatchingParameters.from_bench(json.loads(Path(bench_file).read_text()))
        name = model_name or Path(model_path).stem
        res = export_serving(cfg, model_path, out_dir, version, model_name=name, top_k=top_k,
                             serving_config=serving_config, warmup=warmup, batching=batching,
                             per_model_batching=per_model_batching, base_path=base_path,
                             tflite=tflite, overwrite=overwrite)
    except (TfpipeError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2, sort_keys=True))
        return
    click.echo(f"exported {res.model_name} version {res.version}: {res.version_dir}")
    for sig, spec in res.signatures.items():
        ins = ", ".join(f"{k}: {v['dtype']}{v['shape']}" for k, v in spec["inputs"].items())
        outs = ", ".join(f"{k}: {v['dtype']}{v['shape']}" for k, v in spec["outputs"].items())
        click.echo(f"  {sig}({ins}) -> {outs}")
    if res.class_names:
        click.echo(f"  classes: {', '.join(res.class_names)}")
    if res.warmup_records:
        click.echo(f"  warm-up: {res.warmup_records} PredictionLog records in assets.extra/")
    for what, path in res.serving_files.items():
        click.echo(f"  {what}: {path}")
    if res.tflite:
        click.echo(tflite_text(res.tflite))
