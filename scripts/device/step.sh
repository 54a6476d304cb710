#!/usr/bin/env bash
# On the GPU machine, from the repo root, after `source .carry/setup.sh`:
#   [DTYPES="bf16 fp8"] bash scripts/device/step.sh MODEL MODE OUTDIR
# MODE=reuse: states untuned + torch in one process, then `cache` in a fresh process loading the
#             shipped sweep caches of MODEL's shapes (data/h200/<dtype>/<op>-MODEL-*/cache.json).
# MODE=tune:  states untuned + tuned (tuning pass inside profkit.capture) + torch in one process,
#             then `cache` in a fresh process loading the cache JSON that pass wrote.
set -u
model=$1 mode=$2 out=$3
for dtype in ${DTYPES:-bf16 fp8}; do
  op=$([ "$dtype" = bf16 ] && echo bf16_gemm || echo fp8_gemm)
  dir=$out/$model-$dtype
  if [ "$mode" = reuse ]; then
    timeout 200 python3 -m profkit.cli.step --model "$model" --dtype "$dtype" --states untuned,torch --deadline-s 150 --out "$dir"
    echo "$model $dtype first process rc=$?"
    caches=$(for f in data/h200/$dtype/$op-$model-*/cache.json; do printf -- '--cache %s ' "$f"; done)
  else
    timeout 330 python3 -m profkit.cli.step --model "$model" --dtype "$dtype" --states untuned,tuned,torch --deadline-s 280 --out "$dir"
    echo "$model $dtype first process rc=$?"
    caches="--cache $dir/cache.json"
  fi
  # shellcheck disable=SC2086
  timeout 120 python3 -m profkit.cli.step --model "$model" --dtype "$dtype" --states cache $caches --deadline-s 90 --out "$dir-cache"
  echo "$model $dtype cache process rc=$?"
done
