"""Which measurement policy to trust: tune under ``autotune_v2`` policies, then verify each (GPU).

For each op and (N, K) linear of a model: one tuning call at ``--max-m`` (every bucket up to it)
inside ``profkit.capture`` and ``flashinfer.autotune_v2(persistent_cache=False,
measurement_policy=...)``, then ``profkit verify`` of that capture at every bucket's own M in the
same process, so the tuning wall time and the verify time are measured side by side. Policies
(:mod:`profkit.bench.contexts`): ``autotune`` = FlashInfer's default ``autotune(True)``, ``v2-graph``
and ``v2-eager`` = ``autotune_v2`` under a CUDA-graph (cold L2) or an eager ``MeasurementPolicy``.

Each (op, policy, shape) lands in ``OUT/<op>-<policy>-<model>-<layer>/`` as ``capture/`` and
``verify.parquet``; ``OUT/provenance.json`` has the environment, the command and the timings.

Example::

    python -m profkit.bench.policy_study --op fp8_gemm --model llama3-8b --out runs/policy
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from profkit.bench.contexts import POLICIES, tuning_context


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from profkit.bench.graphs import no_cuda

    if no_cuda("profkit policy study"):
        return 2
    import torch
    from flashinfer.autotuner import AutoTuner

    import profkit
    from profkit import models, schema
    from profkit.bench import gemm as G
    from profkit.bench.verify import verify_capture
    from profkit.sources.env import collect_env, new_run_id

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    provenance = {"env": collect_env(new_run_id()), "argv": sys.argv, "flags": [], "runs": [], "errors": []}
    if args.op == "bf16_gemm":
        provenance["flags"].append(G.enable_bf16_auto_on_sm90())
    layers = [layer for layer in models.linear_layers(models.load_model(args.model))
              if not args.layers or layer.name in args.layers.split(",")]
    # Layers outer, policies inner: a deadline leaves whole layers with every policy, comparable side by side.
    for layer in layers:
        for policy in args.policies.split(","):
            name = f"{args.op}-{policy}-{layer.model}-{layer.name}"
            if time.monotonic() - started > args.deadline_s:
                provenance["errors"].append(f"not run (deadline {args.deadline_s}s reached): {name}")
                continue
            shape_dir = out / name
            try:
                AutoTuner.get().clear_cache()
                gemm = G.make_gemm(args.op, layer.n, layer.k)
                x = gemm.inputs(args.max_m, 1)[0]
                # Under autotune_v2 the default races as a candidate (autotuner_errata.md, point 3).
                with profkit.capture(run_id=f"{name}-{provenance['env']['run_id']}", time_default=policy == "autotune") as cap:
                    with tuning_context(policy):
                        t0 = time.perf_counter()
                        gemm(x, gemm.weights[0], gemm.out(args.max_m))
                        torch.cuda.synchronize()
                        tune_s = time.perf_counter() - t0
                cap.save(shape_dir / "capture")
                del gemm, x
                t0 = time.perf_counter()
                table = verify_capture(shape_dir / "capture", cache=None, only_buckets=True)
                verify_s = time.perf_counter() - t0
                schema.write_parquet(table.assign(policy=policy), shape_dir / "verify.parquet")
                provenance["runs"].append({"name": name, "policy": policy, "n": layer.n, "k": layer.k,
                                           "tune_call_s": tune_s, "verify_s": verify_s,
                                           "verify_to_tune": verify_s / tune_s, "candidates": len(cap.candidates),
                                           "winners": len(cap.winners)})
                print(f"[policy] {name}: tuned in {tune_s:.1f}s, verified {len(table)} rows in {verify_s:.1f}s",
                      flush=True)
            except Exception as exc:  # noqa: BLE001 - keep the other shapes' results
                traceback.print_exc()
                provenance["errors"].append(f"{name}: {type(exc).__name__}: {exc}")
            _save(out, provenance)
    _save(out, provenance)  # the deadline's skips too
    return 1 if provenance["errors"] and not provenance["runs"] else 0


def _save(out: Path, provenance: dict) -> None:
    (out / "provenance.json").write_text(json.dumps(provenance, indent=2, default=str))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m profkit.bench.policy_study", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", required=True, choices=("fp8_gemm", "bf16_gemm"))
    p.add_argument("--model", default="llama3-8b")
    p.add_argument("--layers", default="", help="only these layers (e.g. qkv,o); default all")
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--max-m", type=int, default=4096)
    p.add_argument("--deadline-s", type=float, default=420.0, help="start no new tuning after this many seconds")
    p.add_argument("--out", required=True)
    return p


if __name__ == "__main__":
    raise SystemExit(main())
