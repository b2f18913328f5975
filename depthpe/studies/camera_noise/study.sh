#!/usr/bin/env bash
# The camera-noise measurement of docs/results.md (issue 32): the quickstart model with RoPE (ignores
# the cameras), PRoPE and URoPE in its global attention, 3 seeds each, trained on the synthetic
# scenes, then evaluated at 5 levels of input-camera noise on 48 held-out scenes generated with
# another seed (`depthpe study camera-noise`), and compared per level (`depthpe compare`, `plot`).
#
#   bash depthpe/studies/camera_noise/study.sh [STEPS] [OUT]        # defaults: 700 steps, study_noise/
#
# Two jobs at a time, one torch thread and no data worker each (deterministic on a given CPU). The
# runs are split over two sweeps that share one manifest and are compared together. Finished
# runs and evaluations are skipped, so the script resumes.
set -euo pipefail
STEPS=${1:-700}
OUT=${2:-study_noise}
ENCODINGS=${ENCODINGS:-"rope prope urope"}
SEEDS=${SEEDS:-"0 1 2"}
LEVELS=(--rotation-levels 0 1 2 5 10 --translation-levels 0 0.02 0.05 0.1 0.2)
mkdir -p "$OUT"
[ -f "$OUT/data/synth/train/index.json" ] || depthpe synth --out "$OUT/data"
[ -f "$OUT/data_eval/synth/val/index.json" ] || depthpe synth --out "$OUT/data_eval" --seed 1 --train-scenes 0 --val-scenes 48
train_one() {  # encoding, seed
  local run="$OUT/runs/$1_s$2"
  [ -f "$run/final/model.safetensors" ] && return 0
  depthpe train --config quickstart output_dir="$run" seed="$2" model.global_pe="$1" train.steps="$STEPS" \
    train.num_workers=0 train.torch_threads=1 train.checkpoint_every=0 train.report_to=[] \
    "data.sources=[{name: synth, root: $OUT/data, split: train}]" \
    "val.sources=[{name: synth, root: $OUT/data, split: val}]" val.panels=0 > "$OUT/$1_s$2.log" 2>&1
}
export -f train_one
export OUT STEPS
for pe in $ENCODINGS; do for seed in $SEEDS; do echo "$pe $seed"; done; done | xargs -P 2 -L 1 bash -c 'train_one "$0" "$1"'
# one manifest for every evaluation: the views of a plain evaluation of the first run
first=$(ls -d "$OUT"/runs/*/final | head -n 1)
[ -f "$OUT/manifest_eval/manifest.json" ] || depthpe eval --model "$first" --data "$OUT/data_eval" \
  --out "$OUT/manifest_eval" --panels 0 --num-workers 0 --cpu > "$OUT/manifest_eval.log" 2>&1
finals=("$OUT"/runs/*/final)
half=$(( (${#finals[@]} + 1) / 2 ))
sweep() {  # output folder, models...
  local out=$1; shift
  OMP_NUM_THREADS=1 depthpe study camera-noise "$@" --data "$OUT/data_eval" --out "$out" "${LEVELS[@]}" \
    --manifest "$OUT/manifest_eval/manifest.json" --cpu > "$out.log" 2>&1
}
sweep "$OUT/sweep_a" "${finals[@]:0:$half}" & first_half=$!
sweep "$OUT/sweep_b" "${finals[@]:$half}" & second_half=$!
wait "$first_half" && wait "$second_half"
depthpe compare "$OUT/sweep_a" "$OUT/sweep_b" --reference rope --out "$OUT/cmp"
depthpe plot "$OUT/sweep_a" "$OUT/sweep_b" --out "$OUT/plots"
echo "study done: $OUT/cmp/compare.md, $OUT/plots/noise_synth.png"
