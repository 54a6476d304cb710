#!/usr/bin/env bash
# On the GPU machine, from the repo root, after `source .carry/setup.sh`:
#   bash scripts/device/v2_step.sh DTYPE OUTDIR [POLICIES]
# profkit step's v2 states for Llama-3.1-8B in DTYPE, one fresh process per policy (default
# "v2-graph v2-eager"): untuned, then the v2 tuning pass and its steps, timed inside
# autotune_v2(mode="replay") with the same policy (profkit.bench.contexts.serving_context). Measured (2026-12-04):
# about 100-180 s a process; the first process of a dtype on a fresh machine also builds its JIT
# modules (fp8: about 270 s in all, 216 s of it tuning; bf16: over the 280 s limit, rerun alone with a
# longer one). Each step row's
# `picks` shows whether the v2 winners were really served.
set -u
dtype=$1 out=$2 policies=${3:-v2-graph v2-eager}
mkdir -p "$out"
for policy in $policies; do
  timeout 280 python3 -m profkit.cli.step --model llama3-8b --dtype "$dtype" --states "untuned,$policy" \
    --deadline-s 265 --out "$out/llama3-8b-$dtype-$policy"
  echo "$dtype $policy rc=$?"
done
