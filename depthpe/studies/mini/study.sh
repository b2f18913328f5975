#!/usr/bin/env bash
# The CPU mini-study of docs/results.md: every preset encoding x 3 seeds, the tiny model on the
# synthetic scenes, evaluated on 48 held-out scenes generated with another seed (one shared
# manifest) and on shifted scenes (data_shift/: --shift all; data_fov/: --shift fov --shift path),
# then compared with `depthpe compare`. Every run validates every VAL_EVERY steps (default 100) on
# 16 of the held-out scenes, all on one shared val manifest, so `depthpe plot` can draw the curves.
#
#   bash depthpe/studies/mini/study.sh [STEPS] [OUT]        # defaults: 700 steps, study/
#
# Each run uses 1 torch thread and no data worker (deterministic on a given CPU, and leaves the
# other core free). Finished runs and evaluations are skipped, so the script resumes.
set -euo pipefail
STEPS=${1:-700}
OUT=${2:-study}
ENCODINGS=${ENCODINGS:-"none rope prope dppe_dual dppe_tadd gta urope"}
SEEDS=${SEEDS:-"0 1 2"}
VAL_EVERY=${VAL_EVERY:-100}
mkdir -p "$OUT"
[ -f data/synth/train/index.json ] || depthpe synth --out data
[ -f data_eval/synth/val/index.json ] || depthpe synth --out data_eval --seed 1 --train-scenes 0 --val-scenes 48
[ -f data_shift/synth/val/index.json ] || depthpe synth --out data_shift --seed 2 --train-scenes 0 --val-scenes 48 --shift all
[ -f data_fov/synth/val/index.json ] || depthpe synth --out data_fov --seed 2 --train-scenes 0 --val-scenes 48 --shift fov --shift path
for pe in $ENCODINGS; do
  for seed in $SEEDS; do
    run="$OUT/runs/${pe}_s${seed}"
    if [ ! -f "$run/final/model.safetensors" ]; then
      start=$(date +%s)
      val_manifest=()
      [ -f "$OUT/val_manifest.json" ] && val_manifest=("val.manifest=$OUT/val_manifest.json")
      depthpe train --config quickstart output_dir="$run" seed="$seed" model.global_pe="$pe" \
        train.steps="$STEPS" train.num_workers=0 train.torch_threads=1 train.checkpoint_every=0 \
        "val.sources=[{name: synth, root: data_eval, split: val}]" val.every="$VAL_EVERY" val.views=8 \
        val.max_scenes=16 val.panels=0 train.report_to=[] "${val_manifest[@]}" > "$OUT/${pe}_s${seed}.log" 2>&1
      [ -f "$OUT/val_manifest.json" ] || cp "$run/val_manifest.json" "$OUT/val_manifest.json"
      echo "$pe seed $seed: $(( $(date +%s) - start )) s" >> "$OUT/wall_times.txt"
    fi
    for set in eval shift fov; do
      root=data_$set
      [ -d "$root" ] || continue
      ev="$run/eval_$set"
      manifest=()
      [ -f "$OUT/manifest_$set.json" ] && manifest=(--manifest "$OUT/manifest_$set.json")
      [ -f "$ev/summary.json" ] || depthpe eval --model "$run/final" --data "$root" --out "$ev" --panels 0 \
        --num-workers 0 --cpu "${manifest[@]}" > "$ev.log" 2>&1
      [ -f "$OUT/manifest_$set.json" ] || cp "$ev/manifest.json" "$OUT/manifest_$set.json"
    done
  done
done
echo "study done: $OUT"
