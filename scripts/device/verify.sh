#!/usr/bin/env bash
# On the GPU machine, from the repo root, after `source .carry/setup.sh`:
#   bash scripts/device/verify.sh OUTDIR
# profkit verify of the shipped captures (no re-tuning: each carries its cache.json): first the
# Llama-3.1-8B step captures (their picks are what `profkit step` ran tuned), then the sweep sets.
set -u
out=$1
mkdir -p "$out"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
timeout 250 python3 -m profkit.cli.verify data/h200/step/llama3-8b-fp8/capture data/h200/step/llama3-8b-bf16/capture \
  --out "$out/step" --deadline-s 200
echo "step captures rc=$?"
timeout 330 python3 -m profkit.cli.verify data/h200/fp8 data/h200/bf16 --out "$out/sweep" --deadline-s 300
echo "sweep captures rc=$?"
