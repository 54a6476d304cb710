#!/usr/bin/env bash
# On the GPU machine, from the repo root, after `source .carry/setup.sh`:
#   bash scripts/device/advise_step.sh DTYPE PLAN_JSON OUTDIR [FULL]
# The `profkit advise` proof for Llama-3.1-8B in DTYPE, with the plan shipped in
# data/h200-advise/llama3-8b-DTYPE/plan (its blocklist.json) and PLAN_JSON its flashinfer.autotune
# arguments (e.g. '{"tuning_buckets": [1536, 2048, 3584, 4096]}'):
#   1. (FULL=full) full tuning pass inside profkit.capture, state tuned        -> OUT/full
#   2. the plan's tuning pass inside profkit.capture, state planned             -> OUT/planned
#   3. one process: untuned, cache (1's cache.json, else the shipped step cache), advised (2's
#      cache.json), repaired (the shipped profkit repair file), untuned again  -> OUT/compare
set -u
dtype=$1 plan=$2 out=$3 full=${4:-}
model=llama3-8b
mkdir -p "$out"
if [ "$full" = full ]; then
  timeout 260 python3 -m profkit.cli.step --model $model --dtype "$dtype" --states tuned --deadline-s 230 --out "$out/full"
  echo "full rc=$?"
  tuned_cache=$out/full/cache.json
else
  tuned_cache=data/h200/step/$model-$dtype/cache.json
fi
FLASHINFER_TACTICS_BLOCKLIST=$PWD/data/h200-advise/$model-$dtype/plan/blocklist.json \
  timeout 200 python3 -m profkit.cli.step --model $model --dtype "$dtype" --states planned --plan "$plan" \
  --deadline-s 170 --out "$out/planned"
echo "planned rc=$?"
advised=()
[ -f "$out/planned/cache.json" ] && advised=(--cache "advised=$out/planned/cache.json")
states=untuned,cache,repaired,untuned
[ ${#advised[@]} -gt 0 ] && states=untuned,cache,advised,repaired,untuned
timeout 200 python3 -m profkit.cli.step --model $model --dtype "$dtype" --states "$states" --deadline-s 170 \
  --cache "cache=$tuned_cache" "${advised[@]}" --cache "repaired=data/h200-verify/repaired/$model-$dtype-repaired.json" \
  --out "$out/compare"
echo "compare rc=$?"
