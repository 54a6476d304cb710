#!/usr/bin/env bash
# On the GPU machine, from the repo root, after `source .carry/setup.sh`:
#   TOP_K=10 [DTYPES="fp8 bf16"] [PORT_AGAIN=1] [BLIND=1] [FRESH_TUNE=1] bash scripts/device/port_dense.sh OUTDIR
# Carries the other GPU's Llama-3.1-8B step tuning here and proves it in the model step, per dtype. On an H100 the
# source is the H200's (.dense-in/h200-DTYPE/capture) and the own tuning .dense-in/h100-own-DTYPE/cache.json; on an
# H200 the source is the H100's (.dense-in/h100-step-DTYPE/capture) and the own .dense-in/h200-DTYPE/cache.json.
#   0. with FRESH_TUNE=1, this GPU's own full tuning first in a fresh process with an empty FlashInfer JIT workspace
#      (FLASHINFER_WORKSPACE_BASE, so it builds the JIT modules as the port on a fresh machine does): profkit step
#      --states tuned into fresh-tune/ (its tuning pass over every bucket to 4096, then decode 1 and 4096, prefill 4096),
#      the fair price of step 1 with compiles on both sides;
#   1. profkit port SOURCE --top-k TOP_K (a fresh process: its compiles count);
#   2. one step process, states untuned,cache,advised,ported interleaved over three passes: cache is this GPU's own
#      tuning, advised the same file again (the A/A pair: identical kernels), ported the file step 1 wrote;
#      with BLIND=1, also blind: the source's picks as they are, under this GPU's _metadata (profkit port --blind
#      --like the own cache), between advised and ported (what copying the other GPU's file costs);
#   3. with PORT_AGAIN=1, the port of step 1 again into ported-again/ (FlashInfer's JIT modules now built: on a fresh
#      machine step 1's first shape includes their one-time build, which a tuning pass after an untuned pass never pays).
# Each process's stdout goes to OUTDIR/output.txt, its stderr (FlashInfer's debug log) to a debug.log beside its files.
set -u
out=$1
top_k=${TOP_K:-10}
mkdir -p "$out"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then src=h100-step; own=h200; else src=h200; own=h100-own; fi

port_into() {  # port_into NAME [ARG...]: profkit port of $dtype's source capture into $dir/NAME, its debug log beside
  local name=$1  # port.json; ARGs go to profkit port (--blind --like FILE)
  shift
  timeout 200 python3 -m profkit.cli.port ".dense-in/$src-$dtype/capture" --top-k "$top_k" "$@" --out "$dir/$name" \
    >> "$out/output.txt" 2> "$dir/$name-debug.log"
  echo "[port_dense] $(date -u +%H:%M:%S) port into $name rc=$?" | tee -a "$out/output.txt"
  [ -d "$dir/$name" ] && mv "$dir/$name-debug.log" "$dir/$name/debug.log"
}

for dtype in ${DTYPES:-fp8 bf16}; do
  dir=$out/llama3-8b-$dtype
  mkdir -p "$dir"
  if [ "${FRESH_TUNE:-0}" = 1 ]; then
    workspace=$(mktemp -d)
    FLASHINFER_WORKSPACE_BASE=$workspace timeout 420 python3 -m profkit.cli.step --model llama3-8b --dtype "$dtype" \
      --states tuned --decode 1,4096 --prefill 4096 --out "$dir/fresh-tune" >> "$out/output.txt" 2> "$dir/fresh-tune.log"
    echo "[port_dense] $(date -u +%H:%M:%S) fresh tune rc=$?" | tee -a "$out/output.txt"
    [ -d "$dir/fresh-tune" ] && mv "$dir/fresh-tune.log" "$dir/fresh-tune/debug.log"
    rm -rf "$workspace"
  fi
  echo "[port_dense] $(date -u +%H:%M:%S) port $dtype top-k $top_k" | tee -a "$out/output.txt"
  port_into ported
  s=untuned,cache,advised,ported
  files=(--cache "cache=.dense-in/$own-$dtype/cache.json" --cache "advised=.dense-in/$own-$dtype/cache.json"
         --cache "ported=$dir/ported/cache.json")
  if [ "${BLIND:-0}" = 1 ]; then
    port_into blind --blind --like ".dense-in/$own-$dtype/cache.json"
    s=untuned,cache,advised,blind,ported
    files+=(--cache "blind=$dir/blind/cache.json")
  fi
  timeout 170 python3 -m profkit.cli.step --model llama3-8b --dtype "$dtype" --states "$s,$s,$s" "${files[@]}" \
    --deadline-s 130 \
    --out "$dir/step" >> "$out/output.txt" 2> "$dir/step-debug.log"
  echo "[port_dense] $(date -u +%H:%M:%S) step rc=$?" | tee -a "$out/output.txt"
  if [ "${PORT_AGAIN:-0}" = 1 ]; then port_into ported-again; fi
done
