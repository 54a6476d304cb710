"""``profkit step``: time a real model's decoder step with and without FlashInfer's tuned configs."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from profkit.cli import UsageError
from profkit.cli._paths import need_file, need_out_dir
from profkit.outputs import atomic
from profkit.printable import printable

NAME = "step"
HELP = "time a model's decode/prefill step untuned, tuned, from a cache file, and with torch linears (GPU)"
EXAMPLES = """examples:
  profkit step --model llama3-8b --dtype bf16 --states untuned,tuned,torch --out runs/llama-bf16
  profkit step --model llama3-8b --dtype bf16 --states cache --cache runs/llama-bf16/cache.json --out runs/llama-bf16-cache
  profkit step --model qwen3-30b-a3b --dtype bf16 --states untuned,tuned,repaired --cache repaired=rep.json --out runs/qwen3
"""


def add_arguments(p) -> None:
    from profkit import models  # the shipped JSON configs: no torch

    # The size defaults live with the timing code (profkit.bench.step imports torch): run() fills them in.
    p.add_argument("--model", required=True, choices=models.available())
    p.add_argument("--dtype", required=True, choices=("bf16", "fp8"))
    p.add_argument("--states", default="untuned,tuned,torch",
                   help="comma-separated, from untuned,tuned,planned,v2-graph,v2-eager,cache,advised,repaired,"
                        "torch: at most one tuning state per process; without one, the order given, repeats allowed")
    p.add_argument("--layers", type=int, default=4, help="decoder layers to build (a subset of the model's)")
    p.add_argument("--kv-len", type=int, default=512, help="KV cache length per sequence in decode")
    p.add_argument("--decode", type=_sizes, default=None, metavar="N,N,...",
                   help="decode batch sizes (default: profkit.bench.step.DECODE_SIZES, 1 to 4096)")
    p.add_argument("--prefill", type=_sizes, default=None, metavar="N,N,...",
                   help="prefill chunk token counts (default: profkit.bench.step.PREFILL_SIZES, 512 to 4096)")
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


def _sizes(text: str) -> tuple[int, ...]:
    """'1,8,64' -> (1, 8, 64); argparse turns the error into a usage message."""
    import argparse

    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"want positive integers separated by commas, e.g. 1,8,64; got {text!r}")
    return sizes


def run(args) -> int:
    from profkit.models import load_model

    model = load_model(args.model)
    _check_paths(args)
    if model.num_local_experts and args.dtype != "bf16":
        raise UsageError(f"{model.name} runs FlashInfer's SM90 fused MoE in bf16 only; pass --dtype bf16")
    from profkit.bench.graphs import no_cuda

    if no_cuda("profkit step"):
        return 2
    sizes = {key: value for key, value in (("decode_sizes", args.decode), ("prefill_sizes", args.prefill))
             if value is not None}
    if model.num_local_experts:
        rows = _moe_rows(model, args, sizes)
    else:
        from profkit.bench.step import run_step

        rows = run_step(args.model, args.dtype, out=args.out, states=args.states.split(","), layers=args.layers,
                        kv_len=args.kv_len, repetitions=args.repetitions, replays=args.replays,
                        cache_files=_cache_files(args.cache), deadline_s=args.deadline_s, plan_kwargs=args.plan,
                        **sizes)
    path = Path(args.out) / "step.jsonl"
    atomic.write_text(path, "".join(
        json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}) + "\n"
        for row in rows))
    print(f"profkit step: {len(rows)} rows -> {printable(path)}")  # a path is data: no terminal controls
    return 0


def _check_paths(args) -> None:
    """The files named on the command line, before anything needs a GPU."""
    for value in args.cache:
        _, sep, after = value.partition("=")
        path = Path(after if sep and not Path(value).exists() else value)
        need_file(path, "--cache", "a FlashInfer cache file ([STATE=]PATH)")
    need_out_dir(args.out)


def _moe_rows(model, args, sizes: dict) -> list[dict]:
    """An MoE model's step: bf16, its states interleaved in one process (profkit.bench.moe_step)."""
    from profkit.bench.moe import preload_kit_moe_utils
    from profkit.bench.moe_step import run_moe_step

    print(f"profkit step: {preload_kit_moe_utils()}", file=sys.stderr)
    return run_moe_step(model, out=args.out, states=args.states.split(","), cache_files=_cache_files(args.cache),
                        layers=args.layers, kv_len=args.kv_len, passes=args.passes, repetitions=args.repetitions,
                        replays=args.replays, deadline_s=args.deadline_s, **sizes)


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
    from profkit.cli import main

    raise SystemExit(main(["step", *sys.argv[1:]]))
