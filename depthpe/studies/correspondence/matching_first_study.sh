#!/usr/bin/env bash
# "Does matching-first make depth follow?" (docs/results.md, issue 33 item 3): the quickstart model
# trained for depth on the correspondence study's rectified stereo scenes with repetitive stripes
# (depthpe/studies/correspondence/study.sh writes them to OUT_CORR/data), with and without the
# correspondence term on its global attention (loss.correspondence_weight), for RoPE and PRoPE;
# then `depthpe eval` (is scene-aligned AbsRel below the scene-constant oracle?) and `depthpe probe
# attention` (does the lift rise above the same-position lift?) on the 16 held-out scenes.
#
#   bash depthpe/studies/correspondence/matching_first_study.sh [DATA] [OUT]     # defaults: study_corr/data, study_match/
#
# Two runs at a time, one torch thread and no data worker each; finished steps are skipped.
set -euo pipefail
DATA=${1:-study_corr/data}
OUT=${2:-study_match}
STEPS=${STEPS:-700}
WEIGHTS=${WEIGHTS:-"0 1"}
ENCODINGS=${ENCODINGS:-"rope prope"}
SEEDS=${SEEDS:-"0"}
LAYERSCALE=${LAYERSCALE:-1.0}  # as the correspondence benchmark, whose attention learns to match in 300 steps
[ -f "$DATA/synth/train/index.json" ] || { echo "no scenes in $DATA: run depthpe/studies/correspondence/study.sh first"; exit 2; }
mkdir -p "$OUT"
one_run() {  # encoding, correspondence weight, seed
  local run="$OUT/runs/$1_w$2_s$3"
  if [ ! -f "$run/final/model.safetensors" ]; then
    depthpe train --config quickstart output_dir="$run" seed="$3" model.global_pe="$1" \
      loss.correspondence_weight="$2" model.layerscale_init="$LAYERSCALE" "data.sources=[{name: synth, root: $DATA, split: train}]" \
      "data.views=[2, 4]" data.image_width=112 train.steps="$STEPS" train.num_workers=0 train.torch_threads=1 \
      train.checkpoint_every=0 train.report_to=[] "val.sources=[{name: synth, root: $DATA, split: val}]" \
      val.views=2 val.panels=0 > "$run.log" 2>&1
  fi
  [ -f "$run/eval/summary.json" ] || OMP_NUM_THREADS=1 depthpe eval --model "$run/final" --data "$DATA" \
    --out "$run/eval" --views 2 --panels 0 --num-workers 0 --cpu > "$run.eval.log" 2>&1
  [ -f "$run/probe/summary.json" ] || OMP_NUM_THREADS=1 depthpe probe attention --model "$run/final" \
    --data "$DATA" --out "$run/probe" --views 2 --scenes 16 --cpu > "$run.probe.log" 2>&1
}
export -f one_run
export OUT DATA STEPS LAYERSCALE
mkdir -p "$OUT/runs"
for pe in $ENCODINGS; do for w in $WEIGHTS; do for s in $SEEDS; do echo "$pe $w $s"; done; done; done \
  | xargs -P 2 -L 1 bash -c 'one_run "$0" "$1" "$2"'
echo "done: $OUT/runs/*/eval/summary.json and probe/"
