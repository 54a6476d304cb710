"""``profkit step``: time a real model's decoder step with and without FlashInfer's tuned configs."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

NAME = "step"
HELP = "time a model's decode/prefill step untuned, tuned, from a cache file, and with torch linears (GPU)"
EXAMPLES = """examples:
  profkit step --model llama3-8b --dtype bf16 --states untuned,tuned,torch --out runs/llama-bf16
  profkit step --model llama3-8b --dtype bf16 --states cache --cache runs/llama-bf16/cache.json --out runs/llama-bf16-cache
  profkit step --model qwen3-30b-a3b --dtype bf16 --states untuned,tuned,repaired --cache repaired=rep.json --out runs/qwen3
"""


def add_arguments(p) -> None:
    from profkit import models
    from profkit.bench.step import DECODE_SIZES, PREFILL_SIZES

    sizes = lambda s: tuple(int(x) for x in s.split(",") if x)  # noqa: E731
    p.add_argument("--model", required=True, choices=models.available())
    p.add_argument("--dtype", required=True, choices=("bf16", "fp8"))
    p.add_argument("--states", default="untuned,tuned,torch",
                   help="comma-separated, from untuned,tuned,planned,v2-graph,v2-eager,cache,advised,repaired,"
                        "torch: at most one tuning state per process; without one, the order given, repeats allowed")
    p.add_argument("--layers", type=int, default=4, help="decoder layers to build (a subset of the model's)")
    p.add_argument("--kv-len", type=int, default=512, help="KV cache length per sequence in decode")
    p.add_argument("--decode", type=sizes, default=DECODE_SIZES, help="decode batch sizes")
    p.add_argument("--prefill", type=sizes, default=PREFILL_SIZES, help="prefill chunk token counts")
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--passes", type=int, default=3, help="MoE models: interleaved passes over the states per size")
    p.add_argument("--replays", type=int, default=10)
    p.add_argument("--cache", action="append", default=[], metavar="[STATE=]PATH",
                   help="a FlashInfer cache file for a file state (cache, advised, repaired; plain PATH: cache)")
    p.add_argument("--plan", type=json.loads, default=None,
                   help="state 'planned': flashinfer.autotune keyword arguments as JSON, e.g. "
                        "'{\"tuning_buckets\": [1, 8, 64], \"skip_ops\": [\"fp8_gemm\"]}'")
    p.add_argument("--deadline-s", type=float, default=None, help="stop timing new sizes after this many seconds")
    p.add_argument("--out", required=True, help="directory for step.jsonl (and capture/, cache.json when tuning)")


def run(args) -> int:
    from profkit.bench.graphs import no_cuda

    if no_cuda("profkit step"):
        return 2
    from profkit.models import load_model

    model = load_model(args.model)
    if model.num_local_experts:
        rows = _moe_rows(model, args)
    else:
        from profkit.bench.step import run_step

        rows = run_step(args.model, args.dtype, out=args.out, states=args.states.split(","), layers=args.layers,
                        kv_len=args.kv_len, decode_sizes=args.decode, prefill_sizes=args.prefill,
                        repetitions=args.repetitions, replays=args.replays, cache_files=_cache_files(args.cache),
                        deadline_s=args.deadline_s, plan_kwargs=args.plan)
    path = Path(args.out) / "step.jsonl"
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}) + "\n")
    print(f"profkit step: {len(rows)} rows -> {path}")
    return 0


def _moe_rows(model, args) -> list[dict]:
    """An MoE model's step: bf16, its states interleaved in one process (profkit.bench.moe_step)."""
    from profkit.bench.moe import preload_kit_moe_utils
    from profkit.bench.moe_step import run_moe_step

    if args.dtype != "bf16":
        raise SystemExit(f"profkit step: {model.name} runs FlashInfer's SM90 fused MoE in bf16 only (--dtype bf16)")
    print(f"profkit step: {preload_kit_moe_utils()}", file=sys.stderr)
    return run_moe_step(model, out=args.out, states=args.states.split(","), cache_files=_cache_files(args.cache),
                        layers=args.layers, kv_len=args.kv_len, decode_sizes=args.decode, prefill_sizes=args.prefill,
                        passes=args.passes, repetitions=args.repetitions, replays=args.replays,
                        deadline_s=args.deadline_s)


def _cache_files(values: list[str]) -> dict[str, list[str]]:
    """``--cache`` values grouped by state: 'repaired=a.json' -> {'repaired': ['a.json']}."""
    from profkit.bench.step import FILE_STATES

    files: dict[str, list[str]] = {}
    for value in values:
        state, sep, path = value.partition("=")
        if not sep or state not in FILE_STATES:
            state, path = "cache", value
        files.setdefault(state, []).append(path)
    return files


if __name__ == "__main__":  # python -m profkit.cli.step: the device scripts run it alone
    import argparse

    parser = argparse.ArgumentParser(prog="profkit step", description=HELP, epilog=EXAMPLES)
    add_arguments(parser)
    raise SystemExit(run(parser.parse_args()))
