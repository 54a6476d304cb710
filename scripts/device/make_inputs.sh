#!/usr/bin/env bash
# On the CPU machine, from the repo root, before the cross-GPU runs on TARGET (h100 or h200):
#   bash scripts/device/make_inputs.sh TARGET
# Fills the ignored .moe-in/ and .dense-in/ from data/: the OTHER GPU's Qwen3-30B-A3B capture and cache
# (.moe-in/qwen3-30b-a3b-r0/, for `moe.sh port` and `moe.sh cross`) and TARGET's own cache (.moe-in/qwen3-30b-a3b-own/),
# and the dense Llama-3.1-8B step tunings that scripts/device/port_dense.sh reads on TARGET. Carry both folders
# (`carry=[".moe2", ".moe-in"]`, `carry=[".carry", ".dense-in"]`); leave data/ out of the call (41 MB).
set -euo pipefail
target=${1:?usage: bash scripts/device/make_inputs.sh h100|h200}
case "$target" in
  h100) other=h200 ;;
  h200) other=h100 ;;
  *) echo "make_inputs: TARGET is h100 or h200, not '$target'" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/../.."
for ignored in /.moe-in/ /.dense-in/; do
  grep -qxF "$ignored" .git/info/exclude 2>/dev/null || echo "$ignored" >> .git/info/exclude
done
rm -rf .moe-in .dense-in
m=qwen3-30b-a3b
mkdir -p ".moe-in/$m-r0" ".moe-in/$m-own"
cp -r "data/$other-moe/$m-r0/capture" "data/$other-moe/$m-r0/cache.json" ".moe-in/$m-r0/"
cp "data/$target-moe/$m-r0/cache.json" ".moe-in/$m-own/cache.json"
for dtype in fp8 bf16; do
  # port_dense.sh's names: the source capture (h200-DTYPE on an H100, h100-step-DTYPE on an H200) and the own cache
  source_dir=$([ "$target" = h100 ] && echo "h200-$dtype" || echo "h100-step-$dtype")
  own_dir=$([ "$target" = h100 ] && echo "h100-own-$dtype" || echo "h200-$dtype")
  mkdir -p ".dense-in/$source_dir" ".dense-in/$own_dir"
  cp -r "data/$other/step/llama3-8b-$dtype/capture" "data/$other/step/llama3-8b-$dtype/cache.json" ".dense-in/$source_dir/"
  cp "data/$target/step/llama3-8b-$dtype/cache.json" ".dense-in/$own_dir/cache.json"
done
du -sh .moe-in .dense-in
