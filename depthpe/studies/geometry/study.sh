#!/usr/bin/env bash
# The geometry-only study of docs/results.md: on `depthpe synth --style geometry` scenes (depth only
# from parallax), the tiny model with each global encoding x 3 seeds, URoPE's anchor ablations, and
# one run with the other backbone setting; every run evaluated on 48 held-out geometry scenes and
# probed (`depthpe probe attention`: correspondence lift per layer), then compared with
# `depthpe compare` (paired intervals against RoPE) and `depthpe plot` (validation curves of native
# AbsRel and of the correspondence lift, which every run logs every VAL_EVERY steps) and
# `depthpe study lift-table` (lift per layer and group on the 48 scenes: lift_r0.md, lift_r1.md).
#
#   bash depthpe/studies/geometry/study.sh [STEPS] [OUT]     # defaults: 1000 steps, geo_study/
#
# Environment: SEEDS (default "0 1 2"), VAL_EVERY (100), PARALLEL (2 runs at once, 1 torch thread
# each), BACKBONE (frozen or trained: the backbone setting of the study; one extra prope run, seed 0,
# uses the other one). Finished runs, evaluations and probes are skipped, so the script resumes.
set -euo pipefail
STEPS=${1:-1000}
OUT=${2:-geo_study}
SEEDS=${SEEDS:-"0 1 2"}
VAL_EVERY=${VAL_EVERY:-100}
BACKBONE=${BACKBONE:-frozen}
PARALLEL=${PARALLEL:-2}
mkdir -p "$OUT"
[ -f "$OUT/geo/synth/train/index.json" ] || depthpe synth --out "$OUT/geo" --style geometry --train-scenes 256 --val-scenes 16 --quiet
[ -f "$OUT/geo_eval/synth/val/index.json" ] || depthpe synth --out "$OUT/geo_eval" --style geometry --seed 1 --train-scenes 0 --val-scenes 48 --quiet

ENCODINGS="rope none prope dppe_dual dppe_tadd urope plucker"
ABLATIONS="urope_anchors-1 urope_channelwise"

# overrides_of NAME: the run-config overrides of a group (its runs are NAME_sSEED), into the array `o`.
overrides_of() {
  case $1 in
    plucker) o=(model.global_pe=rope model.plucker=true) ;;
    urope_anchors-1) o=(model.global_pe=urope "model.pe_options={num_anchors: 1}") ;;
    urope_channelwise) o=(model.global_pe=urope "model.pe_options={anchor_assignment: channels}") ;;
    *) o=(model.global_pe="$1") ;;
  esac
}

# run_one NAME SEED BACKBONE: train, evaluate and probe one run (each step skipped when done).
run_one() {
  local name=$1 seed=$2 backbone=$3 o
  local run="$OUT/runs/${name}_s${seed}" train_backbone=false
  [ "$backbone" = trained ] && train_backbone=true
  [ "$backbone" = "$BACKBONE" ] || run="$OUT/runs/${name}-backbone-${backbone}_s${seed}"
  overrides_of "$name"
  mkdir -p "$OUT/runs"
  if [ ! -f "$run/final/model.safetensors" ]; then
    local start; start=$(date +%s)
    depthpe train --config quickstart output_dir="$run" seed="$seed" "${o[@]}" model.train_backbone=$train_backbone \
      "data.sources=[{name: synth, root: $OUT/geo, split: train}]" train.steps="$STEPS" train.num_workers=0 \
      train.torch_threads=1 train.checkpoint_every=0 "val.sources=[{name: synth, root: $OUT/geo, split: val}]" \
      val.every="$VAL_EVERY" val.views=8 val.max_scenes=16 val.panels=0 val.correspondence=true \
      "train.report_to=[]" > "$run.log" 2>&1 || return 1
    echo "$(basename "$run"): $(( $(date +%s) - start )) s" >> "$OUT/wall_times.txt"
  fi
  [ -f "$run/eval_geo/summary.json" ] || OMP_NUM_THREADS=1 depthpe eval --model "$run/final" \
    --data "$OUT/geo_eval" --out "$run/eval_geo" --panels 0 --num-workers 0 --cpu > "$run/eval_geo.log" 2>&1 || return 1
  [ -f "$run/probe_geo/summary.json" ] || OMP_NUM_THREADS=1 depthpe probe attention --model "$run/final" \
    --data "$OUT/geo_eval" --out "$run/probe_geo" --cpu > "$run/probe_geo.log" 2>&1 || return 1
}

# The jobs, PARALLEL at once, most needed first (a study cut short still has a complete first seed):
# every encoding with the first seed, the backbone check (prope, first seed, the other backbone
# setting), the ablations with the first seed, then the other seeds.
other=trained; [ "$BACKBONE" = trained ] && other=frozen
first=${SEEDS%% *}
jobs_list=()
for name in $ENCODINGS; do jobs_list+=("$name $first $BACKBONE"); done
jobs_list+=("prope $first $other")
for name in $ABLATIONS; do jobs_list+=("$name $first $BACKBONE"); done
for seed in ${SEEDS#"$first"}; do for name in $ENCODINGS; do jobs_list+=("$name $seed $BACKBONE"); done; done
for seed in ${SEEDS#"$first"}; do for name in $ABLATIONS; do jobs_list+=("$name $seed $BACKBONE"); done; done
failed=0
for job in "${jobs_list[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n || failed=1; done
  run_one $job || { echo "failed: $job (see its log under $OUT/runs)"; exit 1; } &
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || failed=1; done
[ "$failed" = 0 ] || { echo "some runs failed; rerun the script to retry them"; exit 1; }

# Paired comparisons against RoPE (all on the same 48 scenes and views) and the validation curves.
r=$OUT/runs
main=(); for g in rope none prope dppe_dual dppe_tadd urope; do main+=("$r/${g}"_s*/eval_geo); done
depthpe compare "${main[@]}" --reference rope --out "$OUT/compare_encodings"
depthpe compare "$r"/rope_s*/eval_geo "$r"/plucker_s*/eval_geo --group-by model.plucker --reference false \
  --out "$OUT/compare_plucker"
depthpe compare "$r"/urope_s*/eval_geo "$r"/urope_anchors-1_s*/eval_geo "$r"/urope_channelwise_s*/eval_geo \
  --group-by model.pe_options --out "$OUT/compare_urope"
depthpe compare "$r"/prope_s$first/eval_geo "$r"/prope-backbone-*_s$first/eval_geo --group-by model.train_backbone \
  --out "$OUT/compare_backbone"
depthpe plot "${main[@]%/eval_geo}" --metrics abs_rel --rows native scene_aligned --out "$OUT/curves"
depthpe plot "${main[@]%/eval_geo}" --metrics lift_r0 lift_r1 --rows correspondence --out "$OUT/curves_lift"
for radius in 0 1; do depthpe study lift-table "$r" --radius $radius > "$OUT/lift_r$radius.md"; done
echo "study done: $OUT"
