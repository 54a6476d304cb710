"""Tune one model's MoE layer inside profkit.capture, then verify its picks under routings (CUDA GPU, SM90).

One process per run: FlashInfer's SM90 CuTe-DSL fused MoE (:mod:`profkit.bench.moe`) is called
once at ``--max-m`` tokens inside ``profkit.capture(tune=True)``, which tunes every bucket of
FlashInfer's own hybrid bucket set up to it (1..256 doubling, then steps of 256 and 512: 20
buckets up to 4096), FlashInfer's cache file written beside the capture. With ``--routings`` the
same process then runs :func:`profkit.bench.moe.verify_moe` at every bucket's M and between
buckets under each routing, and records verify seconds per routing against the tuning call's.

Writes under ``--out``: ``capture/`` (profkit tables), ``cache.json`` (FlashInfer's), ``verify.parquet``
(with ``--routings``) and ``provenance.json`` (environment, command, timings, errors). Run with
``FLASHINFER_LOGGING_LEVEL=debug`` and keep stderr as the debug log::

    FLASHINFER_LOGGING_LEVEL=debug python -m profkit.bench.moe_sweep --model qwen3-30b-a3b \\
        --routings default --out runs/qwen3-r0 2> runs/qwen3-r0/debug.log
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

BETWEEN_BUCKETS = (3, 24, 100, 333, 1000, 3000)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from profkit.bench.graphs import no_cuda

    if no_cuda("profkit moe sweep"):
        return 2
    import torch

    import profkit
    from profkit import schema
    from profkit.bench import moe
    from profkit.bench.routing import default_routings, route
    from profkit.models import load_model
    from profkit.outputs import atomic
    from profkit.sources.env import collect_env, new_run_id

    out = Path(args.out)
    if (out / "cache.json").exists() or (out / "capture").exists():
        # FlashInfer would load that cache and tune nothing, and the capture would be replaced by an empty one.
        print(f"profkit moe sweep: --out {out} already holds a tuning (cache.json or capture/); choose a new folder",
              file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    model = load_model(args.model)
    provenance = {"env": collect_env(new_run_id()), "argv": sys.argv, "model": model.name, "op": moe.OP,
                  "note": moe.GEOMETRY_NOTES.get(model.name, ""), "max_m": args.max_m, "errors": []}

    def save():
        atomic.write_text(out / "provenance.json", json.dumps(provenance, indent=2, default=str))

    try:
        provenance["moe_utils"] = moe.preload_kit_moe_utils()
        layer = moe.MoeLayer(model, copies=2)
        provenance["shape"] = layer.shape
        provenance["tuner_routing_matches_flashinfer"] = layer.tuner_routing_matches()
        tuning = route("tuner", args.max_m, layer.experts, layer.top_k)
        x, ids, scales, y = layer.inputs(tuning, 1)[0]
        run_id = f"{out.name}-{args.tag}"
        with profkit.capture(tune=True, cache=str(out / "cache.json"), run_id=run_id) as cap:
            t0 = time.perf_counter()
            layer.forward(x, ids, scales, y)
            torch.cuda.synchronize()
            provenance["tune_call_s"] = time.perf_counter() - t0
        cap.save(out / "capture")
        provenance["run_id"] = cap.run_id
        provenance["candidates"], provenance["winners"] = len(cap.candidates), len(cap.winners)
        print(f"[moe] {model.name}: tuned in {provenance['tune_call_s']:.1f}s, {len(cap.candidates)} candidate rows, "
              f"{len(cap.winners)} winners", flush=True)
        save()
        if args.routings:
            names = default_routings(layer.top_k) if args.routings == "default" else args.routings.split(",")
            tables = schema.load(out / "capture")
            buckets = {int(b) for b in tables.winners["bucket"].dropna()}
            table, seconds = moe.verify_moe(layer, tables, routings=names, sizes=sorted(buckets | set(args.between)),
                                            top_k=args.top_k, replays=args.replays, seed=args.seed,
                                            cache=out / "cache.json")
            gpu = provenance["env"].get("gpu")
            schema.write_parquet(table.assign(verify_run_id=provenance["env"]["run_id"], verify_gpu=gpu, capture_gpu=gpu),
                                 out / "verify.parquet")
            provenance["verify_s"] = seconds
            provenance["verify_over_tuning"] = {k: v / provenance["tune_call_s"] for k, v in seconds.items()}
            provenance["verify"] = {"top_k": args.top_k, "replays": args.replays, "seed": args.seed, "rows": len(table),
                                    "note": "same process as the tuning call: its kernels were already compiled"}
    except Exception as exc:  # noqa: BLE001 - keep what was written; the error is recorded
        traceback.print_exc()
        provenance["errors"].append(f"{type(exc).__name__}: {exc}"[:2000])
    save()
    return 1 if provenance["errors"] else 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m profkit.bench.moe_sweep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True,
                   help="a shipped MoE model config (qwen3-30b-a3b, gpt-oss-120b, mixtral-8x7b)")
    p.add_argument("--max-m", type=int, default=4096, help="tokens of the tuning call: buckets up to it are tuned")
    p.add_argument("--routings", default="", help="'default' or comma-separated routing names to verify under; "
                                                  "empty: tune only")
    p.add_argument("--between", type=lambda s: tuple(int(x) for x in s.split(",")), default=BETWEEN_BUCKETS,
                   help="M values between buckets verified besides every bucket's own M")
    p.add_argument("--top-k", type=int, default=5, help="the tuner's fastest candidates per bucket to verify")
    p.add_argument("--replays", type=int, default=30, help="graph replays per timing")
    p.add_argument("--seed", type=int, default=0, help="seed of the skewed routings")
    p.add_argument("--tag", default="r0", help="suffix of the run id (e.g. the repeat)")
    p.add_argument("--out", required=True)
    return p


if __name__ == "__main__":
    raise SystemExit(main())
