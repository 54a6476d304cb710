#!/usr/bin/env bash
# On the GPU machine, from the repo root, after `source .carry/setup.sh`:
#   bash scripts/device/engine_like.sh OUTDIR
# Two spawned ranks tune fp8_gemm and bf16_gemm (Llama-3.1-8B o, buckets up to 512) under
# `profkit capture` with FlashInfer's debug log per rank, then each rank's capture is checked
# against its own log. Everything lands in OUTDIR: capture/, logs/, check.txt.
set -u
out=$1
mkdir -p "$out"
FLASHINFER_LOGGING_LEVEL=debug timeout 420 python3 -m profkit capture --out "$out/capture" -- \
  python3 -m profkit.bench.engine_like --logs "$out/logs" --ranks 2 --ops fp8_gemm,bf16_gemm --layers o --max-m 512
echo "engine_like rc=$?"
python3 -m profkit.bench.engine_like --check "$out/capture" --logs "$out/logs" | tee "$out/check.txt"
echo "check rc=${PIPESTATUS[0]}"
