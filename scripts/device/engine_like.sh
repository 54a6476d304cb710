#!/usr/bin/env bash
# On the GPU machine, from the repo root, after `source .carry/setup.sh`:
#   bash scripts/device/engine_like.sh OUTDIR
# 1. Two spawned ranks tune fp8_gemm and bf16_gemm (Llama-3.1-8B o, buckets up to 512) under
#    `profkit capture` with FlashInfer's debug log per rank; each rank's capture is then checked
#    against its own log. Lands in OUTDIR/{capture,logs,check.txt}.
# 2. The same pattern with no prefix, only PROFKIT_CAPTURE set, after `profkit capture
#    --install-pth` (one rank, fp8_gemm, buckets up to 64). Lands in OUTDIR/pth-{capture,logs,check.txt}.
set -u
out=$1
mkdir -p "$out"
FLASHINFER_LOGGING_LEVEL=debug timeout 400 python3 -m profkit capture --out "$out/capture" -- \
  python3 -m profkit.bench.engine_like --logs "$out/logs" --ranks 2 --ops fp8_gemm,bf16_gemm --layers o --max-m 512
echo "engine_like rc=$?"
python3 -m profkit.bench.engine_like --check "$out/capture" --logs "$out/logs" | tee "$out/check.txt"
echo "check rc=${PIPESTATUS[0]}"

pth=$(python3 -m profkit capture --install-pth)
echo "installed $pth"
PROFKIT_CAPTURE="$out/pth-capture" FLASHINFER_LOGGING_LEVEL=debug timeout 90 \
  python3 -m profkit.bench.engine_like --logs "$out/pth-logs" --ranks 1 --ops fp8_gemm --layers o --max-m 64
echo "engine_like (PROFKIT_CAPTURE only) rc=$?"
rm -f "$pth"
python3 -m profkit.bench.engine_like --check "$out/pth-capture" --logs "$out/pth-logs" | tee "$out/pth-check.txt"
echo "pth check rc=${PIPESTATUS[0]}"
