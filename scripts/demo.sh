#!/usr/bin/env bash
# `make demo`: sample data from photos bundled in scikit-image / scikit-learn,
# converted to checked shards, then the pipeline measured, previewed and checked.
set -euo pipefail
# (tfpipe keeps TensorFlow's start-up logs quiet and never wraps tables when
# output is not a terminal: docs/cli.md)
OUT=${1:-demo-out}
mkdir -p "$OUT"
if [ -t 1 ]; then B=$'\033[1m' N=$'\033[0m'; else B='' N=''; fi  # bold on a terminal only
step() { printf '\n%s== %s%s\n' "$B" "$*" "$N"; }
# The plain-Python steps import TensorFlow outside the CLI, whose start-up INFO
# lines ignore TF_CPP_MIN_LOG_LEVEL (tensorflow#100442); drop just those lines
# (absl INFO format, its banner, the CPU-feature note) and pass the rest through.
py() {
  python "$@" 2> >(grep --line-buffered -v -E \
    '^I[0-9]{4} [0-9:.]+ +[0-9]+ [A-Za-z0-9_.]+:[0-9]+\] |^WARNING: All log messages before absl::InitializeLog|^To enable the following instructions: ' >&2)
}

step "tfpipe env"
tfpipe env

step "Sample data: image folder (4 classes) and a COCO-style detection set"
rm -rf "$OUT/raw" "$OUT/coco"
python -m tfpipe.sample_data folder "$OUT/raw" --classes 4 --per-class 60 --seed 0
python -m tfpipe.convert.samples coco "$OUT/coco"

step "Convert to sharded TFRecords with a manifest"
tfpipe convert "$OUT/raw" "$OUT/data" --split train=0.9,val=0.1 --shard-size 4MB
tfpipe convert "$OUT/coco/annotations.json" "$OUT/det" --format coco --shard-size 4MB

step "Inspect and verify"
tfpipe inspect "$OUT/data" -n 3
tfpipe verify "$OUT/data" --deep

CFG=(--set "data.path=$OUT/data" --set pipeline.batch_size=32)

step "Doctor: anti-patterns in the imagenet pipeline (expect none)"
tfpipe doctor imagenet "${CFG[@]}"

step "Bench: throughput of the imagenet train pipeline"
tfpipe bench imagenet "${CFG[@]}" --steps 20 --warmup 3

step "Preview: what the model is fed"
tfpipe preview imagenet "${CFG[@]}" --out "$OUT/preview.png" -n 16
tfpipe preview detection --set "data.path=$OUT/det" --set pipeline.batch_size=8 \
  --set data.image_size=[256,256] --out "$OUT/preview-detection.png" -n 8

step "Pre-flight check"
tfpipe check imagenet "${CFG[@]}"

printf '\nDemo outputs in %s: data/ (shards + manifest.json), det/, preview.png, preview-detection.png\n' "$OUT"

# ---- train -> export -> serve (issue #11): the same preprocessing in the served model
HERE=$(dirname "$0")
MODEL_CFG=("${CFG[@]}" --set "data.image_size=[96,96]")

step "Train a tiny CNN for two epochs, fed by tfpipe (build_pipeline -> model.fit)"
py "$HERE/demo_train.py" imagenet "$OUT/tiny_cnn.keras" "${MODEL_CFG[@]}"

step "Export: SavedModel with the eval preprocessing in its signatures + TF Serving files"
rm -rf "$OUT/export"
tfpipe export imagenet "${MODEL_CFG[@]}" --model "$OUT/tiny_cnn.keras" --out "$OUT/export"
tfpipe verify "$OUT/export"

step "Serve: a fresh process (no tfpipe) classifies raw JPEGs; then the same via the REST JSON body"
JPEGS=()
for d in "$OUT"/raw/*/; do JPEGS+=("$(ls "$d"*.jpg | head -n 1)"); done
py "$HERE/demo_classify.py" "$OUT/export/tiny_cnn/1" "${JPEGS[@]}"
printf '\nServe it: tensorflow_model_server --port=8500 --rest_api_port=8501 --model_config_file=%s --enable_batching --batching_parameters_file=%s\n' \
  "$(realpath "$OUT/export/models.config")" "$(realpath "$OUT/export/batching_parameters.txt")"

# ---- tabular (issue #14): statistics at conversion, transforms from the config, the same in serving
step "Tabular: a synthetic CTR table, converted with statistics, a tiny model trained and served"
rm -rf "$OUT/ctr" "$OUT/ctr-export"
tfpipe sample-data ctr "$OUT/ctr.parquet" --rows 4000 --seed 0
tfpipe convert "$OUT/ctr.parquet" "$OUT/ctr" --split train=0.9,val=0.1 --stats
py "$HERE/demo_tabular.py" "$OUT/ctr" "$OUT/ctr-export"
