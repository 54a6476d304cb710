#!/usr/bin/env bash
# On the H200, from the repo root, after the MoE kit's two calls (../shared/device/moe/README.md):
#   source .moe2/setup_moe.sh && bash scripts/device/moe.sh PHASE...
# Phases run in the order given. Each step is its own fresh process under `timeout`, inside one budget shared
# by all phases (MOE_BUDGET_S, default 570 s);
# each model's folder is packed to $OUT/<folder>.tar.xz. FlashInfer's debug log is each folder's debug.log.
#   qwen    Qwen3-30B-A3B: tune + verify under the default routings (r0), repair from the tuner routing,
#           then the interleaved step untuned,tuned,cache,repaired (its tuning pass is a second run, r1)
#   models  gpt-oss-120b (bf16 geometry) and Mixtral-8x7B: tune + verify
#   r2      Qwen3-30B-A3B tune only, a fresh process (run r2)
#   steps   interleaved steps with an A/A pair (untuned twice) from the r0 files in .moe-in/MODEL-r0/
#           (cache.json, repaired.json): gpt-oss-120b and Mixtral-8x7B with a tuning pass, then
#           Qwen3-30B-A3B's files alone (no tuning pass)
#   verify  profkit verify of the r0 captures in .moe-in/MODEL-r0/ (capture/, cache.json) in a fresh
#           process: Qwen3-30B-A3B and gpt-oss-120b, every default routing (a repeat of the sweep's verify)
#   cross   cross-GPU verify: profkit verify of another GPU's r0 captures in .moe-in/MODEL-r0/ (capture/,
#           cache.json) on this GPU, every default routing, for all three models (their picks timed here;
#           MOE_CROSS_MODELS names fewer)
#   port    carry another GPU's tuning here (Qwen3-30B-A3B): profkit.bench.port_price on .moe-in/MODEL-r0/capture
#           (port cold, port warm, full tuning, tuning warm, one process), profkit port --blind of its cache.json,
#           then the interleaved step untuned,cache,untuned,blind,ported: cache is this GPU's own tuning
#           (.moe-in/MODEL-own/cache.json), blind the other GPU's picks made to load, ported the port's file;
#           MOE_PORT_TOP_K=10 re-times the top 10 (folders MODEL-port-top10, MODEL-step-port-top10) and skips blind
#   ranks   eight ranks that tune without a shared process group: Qwen3-30B-A3B tuned in 8 fresh processes one
#           after another (RANK=0..7, tags rank0..rank7; MOE_RANKS names fewer), each in qwen3-30b-a3b-ranks/rank{r}/, its cache file named
#           as SGLang names a rank's (rank_tp{r}_pp0_dp0.json)
#   ranks-verify  profkit verify of those eight captures in one process (tuner routing, each bucket's M, top 5):
#           the distinct picks re-timed, so the lottery's cost is measured (needs the ranks phase's folder)
#   repaired  does repaired lose to cache? interleaved steps cache,repaired,cache (cache twice: an A/A pair)
#           over 6 passes from the r0 files in .moe-in/MODEL-r0/: Qwen3-30B-A3B, Mixtral-8x7B, gpt-oss-120b
set -u
[ $# -gt 0 ] || { echo "usage: moe.sh PHASE... (qwen models r2 steps verify cross port ranks ranks-verify repaired)" >&2; exit 2; }
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} FLASHINFER_LOGGING_LEVEL=debug
out=${OUT:-/tmp/moe-out}
work=/tmp/moe-work
mkdir -p "$out" "$work"
budget=${MOE_BUDGET_S:-570}
t0=$SECONDS
nvidia-smi > "$out/nvidia-smi.txt" 2>&1

step() {  # step NAME MIN_S -- python args: run in $work/NAME, stdout to log.txt, stderr to debug.log
  local name=$1 need=$2 left=$((budget - (SECONDS - t0)))
  shift 3
  mkdir -p "$work/$name"
  if [ "$left" -lt "$need" ]; then
    echo "[moe.sh] $name: not run ($left s left of the budget, needs $need)" | tee -a "$work/$name/log.txt"
    return 1
  fi
  echo "[moe.sh] $name: $(date -u +%H:%M:%S) python3 $* (timeout $left s)" | tee -a "$work/$name/log.txt"
  timeout "$left" python3 "$@" >> "$work/$name/log.txt" 2>> "$work/$name/debug.log"
  local rc=$?
  echo "[moe.sh] $name: rc=$rc at $(date -u +%H:%M:%S), $((SECONDS - t0)) s into the budget" | tee -a "$work/$name/log.txt"
  tail -n 5 "$work/$name/log.txt"
  [ "$rc" -eq 0 ] || grep -a -m 5 -E "Error|Traceback" "$work/$name/debug.log"
  return $rc
}

pack() {  # pack NAME...: $OUT/NAME.tar.xz of each folder
  for name in "$@"; do
    [ -d "$work/$name" ] && tar -C "$work" -cJf "$out/$name.tar.xz" "$name"
  done
}

for phase in "$@"; do
case "$phase" in
  qwen)
    m=qwen3-30b-a3b
    step "$m-r0" 200 -- -m profkit.bench.moe_sweep --model $m --routings default --tag r0 --out "$work/$m-r0"
    step "$m-r0" 20 -- -m profkit.cli.repair "$work/$m-r0/verify.parquet" --like "$work/$m-r0/cache.json" \
      --out "$work/$m-r0/repaired.json"
    states=untuned,tuned,cache
    cache=(--cache "cache=$work/$m-r0/cache.json")
    if [ -f "$work/$m-r0/repaired.json" ]; then
      states=$states,repaired
      cache+=(--cache "repaired=$work/$m-r0/repaired.json")
    fi
    deadline=$((budget - (SECONDS - t0) - 40))
    step "$m-step" 150 -- -m profkit.cli.step --model $m --dtype bf16 --states $states "${cache[@]}" \
      --deadline-s "$deadline" --out "$work/$m-step"
    pack "$m-r0" "$m-step"
    ;;
  models)
    step gpt-oss-120b-r0 150 -- -m profkit.bench.moe_sweep --model gpt-oss-120b --routings default --tag r0 \
      --out "$work/gpt-oss-120b-r0"
    pack gpt-oss-120b-r0
    step mixtral-8x7b-r0 150 -- -m profkit.bench.moe_sweep --model mixtral-8x7b --routings default --tag r0 \
      --out "$work/mixtral-8x7b-r0"
    pack mixtral-8x7b-r0
    ;;
  r2)
    step qwen3-30b-a3b-r2 120 -- -m profkit.bench.moe_sweep --model qwen3-30b-a3b --tag r2 --out "$work/qwen3-30b-a3b-r2"
    pack qwen3-30b-a3b-r2
    ;;
  steps)
    for m in gpt-oss-120b mixtral-8x7b qwen3-30b-a3b; do
      in=.moe-in/$m-r0
      states=untuned,tuned,untuned,cache,repaired
      [ $m = qwen3-30b-a3b ] && states=untuned,cache,untuned,repaired
      deadline=$((budget - (SECONDS - t0) - 40))
      step "$m-step-aa" 60 -- -m profkit.cli.step --model $m --dtype bf16 --states $states \
        --cache "cache=$in/cache.json" --cache "repaired=$in/repaired.json" --deadline-s "$deadline" \
        --out "$work/$m-step-aa"
      pack "$m-step-aa"
    done
    ;;
  verify)
    for m in qwen3-30b-a3b gpt-oss-120b; do
      step "$m-verify-repeat" 60 -- -m profkit.cli.verify ".moe-in/$m-r0/capture" --cache ".moe-in/$m-r0/cache.json" \
        --out "$work/$m-verify-repeat"
      pack "$m-verify-repeat"
    done
    ;;
  cross)
    for m in ${MOE_CROSS_MODELS:-qwen3-30b-a3b mixtral-8x7b gpt-oss-120b}; do
      step "$m-verify-cross" 60 -- -m profkit.cli.verify ".moe-in/$m-r0/capture" --cache ".moe-in/$m-r0/cache.json" \
        --out "$work/$m-verify-cross"
      pack "$m-verify-cross"
    done
    ;;
  port)
    m=qwen3-30b-a3b
    in=.moe-in/$m-r0
    k=${MOE_PORT_TOP_K:-3}
    sfx=$([ "$k" = 3 ] || echo "-top$k")
    step "$m-port$sfx" 150 -- -m profkit.bench.port_price --model $m --capture "$in/capture" --top-k "$k" \
      --out "$work/$m-port$sfx"
    states=untuned,cache,ported,cache  # the own cache twice: an A/A pair beside the ported file
    files=(--cache "cache=.moe-in/$m-own/cache.json" --cache "ported=$work/$m-port$sfx/cold/cache.json")
    if [ "$k" = 3 ]; then
      step "$m-port" 20 -- -m profkit.cli.port "$in/capture" --blind --out "$work/$m-port/blind"
      states=untuned,cache,untuned,blind,ported
      files+=(--cache "blind=$work/$m-port/blind/cache.json")
    fi
    deadline=$((budget - (SECONDS - t0) - 40))
    step "$m-step-port$sfx" 100 -- -m profkit.cli.step --model $m --dtype bf16 --states "$states" "${files[@]}" \
      --deadline-s "$deadline" --out "$work/$m-step-port$sfx"
    pack "$m-port$sfx" "$m-step-port$sfx"
    ;;
  ranks)
    m=qwen3-30b-a3b
    for r in ${MOE_RANKS:-0 1 2 3 4 5 6 7}; do  # MOE_RANKS names fewer (a call of 10 minutes holds about 5)
      RANK=$r step "$m-ranks/rank$r" 75 -- -m profkit.bench.moe_sweep --model $m --tag rank$r \
        --out "$work/$m-ranks/rank$r"
      # named as SGLang names a rank's cache (rank_tp{t}_pp{p}_dp{d}.json)
      [ -f "$work/$m-ranks/rank$r/cache.json" ] && mv "$work/$m-ranks/rank$r/cache.json" "$work/$m-ranks/rank$r/rank_tp${r}_pp0_dp0.json"
    done
    pack "$m-ranks"
    ;;
  ranks-verify)
    m=qwen3-30b-a3b
    step "$m-ranks-verify" 60 -- -m profkit.cli.verify "$work/$m-ranks" --routings tuner --only-buckets --top-k 5 \
      --out "$work/$m-ranks-verify"
    pack "$m-ranks-verify"
    ;;
  repaired)
    left_models=3
    for m in qwen3-30b-a3b mixtral-8x7b gpt-oss-120b; do
      in=.moe-in/$m-r0
      deadline=$(((budget - (SECONDS - t0) - 40) / left_models))  # an even share of what is left
      left_models=$((left_models - 1))
      step "$m-step-repaired" 60 -- -m profkit.cli.step --model $m --dtype bf16 --states cache,repaired,cache \
        --passes 6 --cache "cache=$in/cache.json" --cache "repaired=$in/repaired.json" --deadline-s "$deadline" \
        --out "$work/$m-step-repaired"
      pack "$m-step-repaired"
    done
    ;;
  *) echo "moe.sh: unknown phase $phase (qwen, models, r2, steps, verify, cross, port, ranks, ranks-verify or repaired)" >&2; exit 2 ;;
esac
done
ls -la "$out"
