"""Tune FlashInfer GEMMs for real model shapes inside profkit.capture() and time them (CUDA GPU).

For each (N, K) linear of the chosen models: time the op at between-bucket M values untuned,
tune it once at ``--max-m`` (which tunes every bucket up to it) inside ``profkit.capture``
with FlashInfer's cache JSON written beside the capture, then time the same M values tuned.
Each shape lands in ``OUT/<op>-<model>-<layer>/`` as ``capture/`` (profkit tables),
``cache.json`` and ``op_timings.parquet``; ``OUT/provenance.json`` records the environment,
the command and anything that failed. Run with ``FLASHINFER_LOGGING_LEVEL=debug`` and keep
stderr to get the matching debug log.

Example::

    FLASHINFER_LOGGING_LEVEL=debug python -m profkit.bench.gemm_sweep --op fp8_gemm \\
        --models llama3-8b,gpt-oss-120b --out runs/fp8 2> runs/fp8/debug.log
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

BETWEEN_BUCKETS = (1, 3, 24, 100, 333, 1000, 3000)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from profkit.bench.graphs import no_cuda

    if no_cuda("profkit gemm sweep"):
        return 2
    import pandas as pd

    import profkit
    from profkit import models, schema
    from profkit.bench import gemm as G
    from profkit.sources.env import collect_env, new_run_id
    from profkit.outputs import atomic

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    provenance = {"env": collect_env(new_run_id()), "argv": sys.argv, "flags": [], "shapes": [], "errors": []}
    if args.op == "bf16_gemm":
        provenance["bf16_auto_without_workaround"] = _try_bf16_auto()
        provenance["flags"].append(G.enable_bf16_auto_on_sm90())

    layers = _layers(models, args)
    for layer in layers:
        if time.monotonic() - started > args.deadline_s:
            provenance["errors"].append(f"not run (deadline {args.deadline_s}s reached): {layer.label}")
            continue
        name = f"{args.op}-{layer.model}-{layer.name}"
        shape_dir = out / name
        print(f"[sweep] {name}: N={layer.n} K={layer.k}", flush=True)
        try:
            record = _one_shape(G, profkit, schema, pd, layer, args, shape_dir)
            provenance["shapes"].append({"name": name, **record})
        except Exception as exc:  # noqa: BLE001 - keep the other shapes' results
            traceback.print_exc()
            provenance["errors"].append(f"{name}: {type(exc).__name__}: {exc}")
        finally:
            from flashinfer.autotuner import AutoTuner

            AutoTuner.get().clear_cache()  # each shape's cache file holds its own winners only
        atomic.write_text(out / "provenance.json", json.dumps(provenance, indent=2, default=str))
    return 1 if provenance["errors"] and not provenance["shapes"] else 0


def _one_shape(G, profkit, schema, pd, layer, args, shape_dir: Path) -> dict:
    import torch

    gemm = G.make_gemm(args.op, layer.n, layer.k)
    sizes = [m for m in args.between if m <= args.max_m]
    rows = _timings(G, gemm, sizes, "untuned", layer)
    shape_dir.mkdir(parents=True, exist_ok=True)
    x = gemm.inputs(args.max_m, 1)[0]
    with profkit.capture(tune=True, cache=str(shape_dir / "cache.json"), run_id=f"{shape_dir.name}-{args.tag}") as cap:
        t0 = time.perf_counter()
        gemm(x, gemm.weights[0], gemm.out(args.max_m))
        torch.cuda.synchronize()
        tune_s = time.perf_counter() - t0
    cap.save(shape_dir / "capture")
    rows += _timings(G, gemm, sizes, "tuned", layer)
    timings = schema.frame("op_timings", [{**r, "run_id": cap.run_id} for r in rows])
    timings.to_parquet(shape_dir / "op_timings.parquet", index=False)
    winners = cap.winners
    print(f"[sweep] {shape_dir.name}: tuned in {tune_s:.1f}s, {len(cap.candidates)} candidate rows, "
          f"{len(winners)} winners", flush=True)
    return {"n": layer.n, "k": layer.k, "max_m": args.max_m, "tune_call_s": tune_s, "run_id": cap.run_id}


def _timings(G, gemm, sizes, state: str, layer) -> list[dict]:
    from flashinfer.fused_moe.utils import map_to_hybrid_bucket_uncapped

    rows = []
    for m in sizes:
        with G.observe_choices() as seen:
            timing = G.time_graph(gemm, m)
        choice = seen[0] if seen else {}
        rows.append({"op": gemm.op, "model": layer.model, "layer": layer.name, "n": gemm.n, "k": gemm.k, "m": m,
                     "bucket": map_to_hybrid_bucket_uncapped(m), "state": state,
                     "runner": choice.get("runner"), "tactic": choice.get("tactic"), **timing})
    return rows


def _try_bf16_auto() -> str:
    """Whether mm_bf16(backend="auto") works on this machine as installed; the error if not."""
    import torch

    import flashinfer

    a = torch.randn(8, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16).t()
    try:
        flashinfer.mm_bf16(a, b, backend="auto")
        torch.cuda.synchronize()
        return "ok"
    except Exception as exc:  # noqa: BLE001 - recorded as a fact of the environment
        return f"{type(exc).__name__}: {exc}"[:1000]


def _layers(models, args):
    wanted = set(args.layers.split(",")) if args.layers else None
    layers = []
    for name in args.models.split(","):
        for layer in models.linear_layers(models.load_model(name)):
            if wanted is None or layer.name in wanted:
                layers.append(layer)
    return layers


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m profkit.bench.gemm_sweep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", required=True, choices=("fp8_gemm", "bf16_gemm"))
    p.add_argument("--models", default="llama3-8b,gpt-oss-120b", help="comma-separated shipped model configs")
    p.add_argument("--layers", default="", help="only these layers (e.g. qkv,o); default all")
    p.add_argument("--max-m", type=int, default=4096, help="M of the tuning call: buckets up to it are tuned")
    p.add_argument("--between", type=lambda s: tuple(int(x) for x in s.split(",")), default=BETWEEN_BUCKETS,
                   help="M values timed tuned vs untuned outside tuning")
    p.add_argument("--tag", default="r0", help="suffix of run ids (e.g. the repetition)")
    p.add_argument("--deadline-s", type=float, default=480.0, help="start no new shape after this many seconds")
    p.add_argument("--out", required=True)
    return p


if __name__ == "__main__":
    raise SystemExit(main())
