#!/usr/bin/env bash
# On the GPU machine, from the repo root, after `source .carry/setup.sh`:
#   bash scripts/device/repair_step.sh OUTDIR
# Verify the Llama-3.1-8B step captures, repair their cache files from the verify tables, then time
# the step per dtype in three fresh processes: untuned, the tuning pass's own cache.json (cache),
# and the repaired file (repaired).
set -u
out=$1
mkdir -p "$out"
timeout 200 python3 -m profkit.cli.verify data/h200/step/llama3-8b-fp8/capture data/h200/step/llama3-8b-bf16/capture \
  --out "$out/verify" --deadline-s 150
echo "verify rc=$?"
for dtype in bf16 fp8; do
  python3 -m profkit.cli.repair "$out/verify/llama3-8b-$dtype/verify.parquet" \
    --like "data/h200/step/llama3-8b-$dtype/cache.json" --out "$out/llama3-8b-$dtype-repaired.json"
  echo "repair $dtype rc=$?"
  timeout 130 python3 -m profkit.cli.step --model llama3-8b --dtype "$dtype" --states untuned --deadline-s 100 \
    --out "$out/step/llama3-8b-$dtype-untuned"
  echo "step $dtype untuned rc=$?"
  timeout 130 python3 -m profkit.cli.step --model llama3-8b --dtype "$dtype" --states cache --deadline-s 100 \
    --cache "data/h200/step/llama3-8b-$dtype/cache.json" --out "$out/step/llama3-8b-$dtype-cache"
  echo "step $dtype cache rc=$?"
  timeout 130 python3 -m profkit.cli.step --model llama3-8b --dtype "$dtype" --states repaired --deadline-s 100 \
    --cache "$out/llama3-8b-$dtype-repaired.json" --out "$out/step/llama3-8b-$dtype-repaired"
  echo "step $dtype repaired rc=$?"
done
