#!/usr/bin/env bash
# The correspondence study of docs/correspondence.md (issue 33): every encoding of the global
# attention, URoPE's ablations and Plücker + RoPE, 3 seeds each, trained with the correspondence
# loss on rectified stereo scenes with repetitive stripes (content alone is ambiguous along the
# epipolar line), evaluated per layer on held-out scenes, also with more views than trained, zoomed
# in, and with noisy input cameras.
#
#   bash depthpe/studies/correspondence/study.sh [OUT]        # default: study_corr/
#
# Two runs at a time, one torch thread each (deterministic on a given CPU). A finished run
# (OUT/<name>_s<seed>/results.json) is skipped, so the script resumes after an interruption.
set -euo pipefail
OUT=${1:-study_corr}
SEEDS=${SEEDS:-"0 1 2"}
STEPS=${STEPS:-300}
JOBS=${JOBS:-2}
DATA="$OUT/data"
mkdir -p "$OUT"
# 4 views per scene: training draws 2 of them, --eval-views 4 evaluates more views than trained
[ -f "$DATA/synth/val/index.json" ] || depthpe synth --out "$DATA" --style geometry --rig stereo --views 4 \
    --height 112 --width 112 --depth-ratio 1 4 --texture stripes --train-scenes 64 --val-scenes 16 --workers 1
# name = the arguments of `depthpe study correspondence` that make the encoding
RUNS=(
  "none|--pe none"
  "rope|--pe rope"
  "prope|--pe prope"
  "gta|--pe gta"
  "dppe_dual|--pe dppe_dual"
  "dppe_tadd|--pe dppe_tadd"
  "urope|--pe urope"
  "urope_1anchor|--pe urope --anchors 1"
  "urope_channels|--pe urope --anchor-assignment channels"
  "plucker_rope|--pe rope --plucker"
)
one_run() {  # name, seed, encoding arguments
  local out="$OUT/$1_s$2"
  [ -f "$out/results.json" ] && return 0
  OMP_NUM_THREADS=1 depthpe study correspondence --data "$DATA" --out "$out" $3 --seeds "$2" --steps "$STEPS" \
      --threads 1 --views 2 --eval-views 4 --eval-zooms 1.5 --eval-rotation-noise 2 5 \
      --eval-translation-noise 0.05 0.2 > "$out.log" 2>&1
}
export -f one_run
export OUT DATA STEPS
for seed in $SEEDS; do
  for entry in "${RUNS[@]}"; do
    echo "${entry%%|*} $seed ${entry#*|}"
  done
done | xargs -P "$JOBS" -L 1 bash -c 'one_run "$0" "$1" "${*:2}"'
echo "done: $OUT/*/results.json"
