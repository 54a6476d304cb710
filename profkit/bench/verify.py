"""``profkit verify`` on the GPU: re-time the tuner's candidates the way engines run the op.

For each capture (a directory holding the capture's parquet tables, with FlashInfer's
``cache.json`` beside it or given), :func:`profkit.analysis.verify.verify_plan` names the
candidates per op, GEMM shape and M: the bucket's top-k by the tuner's own time, its winner and
the default. Each is run through the op's public API (``bmm_fp8`` / ``mm_bf16`` with
``backend="auto"``) with :class:`~profkit.bench.steer.Steering` aimed at it, captured in a CUDA
graph of calls on rotating inputs and weights (together more than twice the GPU's L2), and
timed over graph replays: median, p10 and p90 per call. FlashInfer's own choice at each M, with
the capture's cache file loaded, is recorded too (``cache_choice``).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path

import pandas as pd
import torch

from profkit import schema
from profkit.outputs import atomic
from profkit.analysis.verify import verify_plan
from profkit.bench import gemm as G
from profkit.bench import moe
from profkit.bench.contexts import load_cache
from profkit.bench.graphs import graph_replay_ms
from profkit.bench.routing import default_routings
from profkit.bench.step import DECODE_SIZES, PREFILL_SIZES
from profkit.bench.steer import Steering, tactic_from_text

# M values timed: every bucket's own M (added per capture), M = 1..8, profkit step's sizes and the
# shipped op timings' between-bucket sizes.
EXTRA_SIZES = tuple(sorted({*range(1, 9), *DECODE_SIZES, *PREFILL_SIZES, 24, 100, 333, 1000, 3000}))


def find_captures(path: Path) -> list[Path]:
    """Capture directories under ``path`` (those holding candidates.parquet), sorted."""
    path = Path(path)
    if (path / "candidates.parquet").is_file():
        return [path]
    return sorted(p.parent for p in path.rglob("candidates.parquet"))


def cache_beside(capture_dir: Path) -> Path | None:
    """FlashInfer's cache file written with a capture: ``cache.json`` in it or in its parent."""
    for candidate in (capture_dir / "cache.json", capture_dir.parent / "cache.json"):
        if candidate.is_file():
            return candidate
    return None


def verify_capture(capture_dir: Path, *, cache: Path | None, top_k: int = 5, replays: int = 30,
                   only_buckets: bool = False, routings: str = "default", log=print) -> pd.DataFrame:
    """The verify table of one capture (see docs/schema.md, table ``verify``).

    A capture of FlashInfer's SM90 fused MoE is verified by :func:`profkit.bench.moe.verify_moe`
    under ``routings`` ('default' or comma-separated names, :mod:`profkit.bench.routing`), on random
    weights of the capture's own expert geometry.
    """
    tables = schema.load(capture_dir)
    sizes = set(EXTRA_SIZES) | {int(b) for b in tables.winners["bucket"].dropna()}
    if (tables.winners["op"] == moe.OP).any():
        log(f"[verify] {moe.preload_kit_moe_utils()}")
        layer = moe.MoeLayer.from_shape(_moe_shape(tables), copies=2)
        names = default_routings(layer.top_k) if routings == "default" else routings.split(",")
        buckets = {int(b) for b in tables.winners["bucket"].dropna()}
        table, seconds = moe.verify_moe(layer, tables, routings=names, sizes=sorted(buckets if only_buckets else sizes),
                                        top_k=top_k, replays=replays, cache=cache, log=log)
        return table.assign(verify_s_of_routing=table["routing"].map(seconds))
    plan = verify_plan(tables.candidates, tables.winners, sizes=sorted(sizes), top_k=top_k)
    if only_buckets:
        plan = plan[plan["m"] == plan["bucket"]]
    rows = []
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    for (op, n, k), shape_plan in plan.groupby(["op", "n", "k"], sort=False):
        if op == "bf16_gemm":
            G.enable_bf16_auto_on_sm90()
        rotate = _rotation(op, int(n), int(k), l2_bytes)
        gemm = G.make_gemm(op, int(n), int(k), copies=rotate)
        cache_loaded = load_cache(cache)
        started = time.perf_counter()
        for m, at_m in shape_plan.groupby("m", sort=True):
            choice = _cache_choice(gemm, int(m)) if cache_loaded else {}
            rows += _time_candidates(gemm, int(m), at_m, rotate=rotate, replays=replays, choice=choice,
                                     cache_loaded=cache_loaded)
        log(f"[verify] {capture_dir} {op} N={n} K={k}: {len(shape_plan)} timings in "
            f"{time.perf_counter() - started:.1f}s")
        del gemm
        torch.cuda.empty_cache()
    return schema.frame("verify", rows)


def _moe_shape(tables: schema.Tables) -> str:
    from profkit.analysis import moe_shape

    shapes = {moe_shape(p) for p in tables.winners.loc[tables.winners["op"] == moe.OP, "profile"]} - {None}
    if len(shapes) != 1:
        raise ValueError(f"an MoE capture of one expert geometry is needed; it holds {sorted(shapes) or 'none'}")
    return shapes.pop()


def _rotation(op: str, n: int, k: int, l2_bytes: int) -> int:
    """Calls per graph so that their distinct weights alone exceed twice the L2 (at least 4)."""
    weight_bytes = n * k * (1 if op == "fp8_gemm" else 2)
    return max(4, math.ceil(2 * l2_bytes / weight_bytes))


def _cache_choice(gemm: G.Gemm, m: int) -> dict:
    """What FlashInfer's own lookup runs at M (the loaded cache, no steering), from one eager call."""
    x = gemm.inputs(m, 1)[0]
    with G.observe_choices() as seen:
        gemm(x, gemm.weights[0], gemm.out(m))
    torch.cuda.synchronize()
    return seen[0] if seen else {}


def _time_candidates(gemm: G.Gemm, m: int, plan: pd.DataFrame, *, rotate: int, replays: int, choice: dict,
                     cache_loaded: bool) -> list[dict]:
    xs = gemm.inputs(m, rotate)
    outs = [gemm.out(m) for _ in range(rotate)]
    ws = [gemm.weights[i % len(gemm.weights)] for i in range(rotate)]

    def calls():
        for x, w, o in zip(xs, ws, outs):
            gemm(x, w, o)

    rows = []
    with Steering() as steering:
        for cand in plan.to_dict("records"):
            runner = None if cand["default"] else cand["runner"]
            steering.aim(gemm.op, runner, tactic_from_text(cand["tactic"]))
            t0 = time.perf_counter()
            row = {**cand, "cache_loaded": cache_loaded,
                   "cache_choice": (cache_loaded and choice.get("runner") == cand["runner"]
                                    and choice.get("tactic") == cand["tactic"]),
                   "cache_runner": choice.get("runner"), "cache_tactic": choice.get("tactic"),
                   "calls_per_replay": rotate, "replays": replays,
                   "timing": f"cuda_graph, {rotate} rotating inputs and weights, {replays} replays"}
            try:
                per_call = sorted(ms / rotate for ms in graph_replay_ms(calls, replays=replays))
                row.update(serving_ms=statistics.median(per_call),
                           serving_p10_ms=per_call[int(0.1 * (len(per_call) - 1))],
                           serving_p90_ms=per_call[int(0.9 * (len(per_call) - 1))], status="ok", error="")
            except Exception as exc:  # noqa: BLE001 - a candidate that cannot run is a result
                torch.cuda.synchronize()
                row.update(serving_ms=float("nan"), serving_p10_ms=float("nan"), serving_p90_ms=float("nan"),
                           status="failed", error=f"{type(exc).__name__}: {exc}"[:500])
            steered = steering.calls[0] if steering.calls else {}
            row.update(file_key=steered.get("file_key"), steered_runner=steered.get("runner"),
                       verify_s=time.perf_counter() - t0)
            rows.append(row)
    return rows


def _tuned_on(capture_dir: Path) -> str | None:
    """The GPU a capture was tuned on, as its runs table records it (None where it does not)."""
    runs = schema.load(capture_dir).runs
    gpus = runs["gpu"].dropna().astype(str) if "gpu" in runs.columns else ()
    return gpus.iloc[0] if len(gpus) else None


def run(paths, *, out: Path | None, cache: Path | None = None, top_k: int = 5, replays: int = 30,
        only_buckets: bool = False, routings: str = "default", deadline_s: float | None = None,
        log=print) -> list[Path]:
    """Verify every capture under ``paths``; write ``verify.parquet`` beside each (or under ``out``)."""
    from profkit.sources.env import collect_env, new_run_id

    started = time.monotonic()
    env = collect_env(new_run_id(), source_kind="verify")
    written = []
    for root in map(Path, paths):
        for capture_dir in find_captures(root):
            if deadline_s is not None and time.monotonic() - started > deadline_s:
                log(f"[verify] not run (deadline {deadline_s}s): {capture_dir}")
                continue
            t0 = time.perf_counter()
            table = verify_capture(capture_dir, cache=cache or cache_beside(capture_dir), top_k=top_k,
                                   replays=replays, only_buckets=only_buckets, routings=routings, log=log)
            capture_gpu = _tuned_on(capture_dir)
            table = table.assign(verify_run_id=env["run_id"], verify_gpu=env.get("gpu"), capture_gpu=capture_gpu)
            target_dir = capture_dir.parent if out is None else Path(out) / _relative(capture_dir, root)
            target_dir.mkdir(parents=True, exist_ok=True)
            target = schema.write_parquet(table, target_dir / "verify.parquet")
            # verify_capture set the bf16 workaround for its bf16 shapes; the env above predates it.
            flags = [G.BF16_AUTO_FLAG] if (table["op"] == "bf16_gemm").any() else []
            meta = {"env": env, "flags": flags, "capture": str(capture_dir), "capture_gpu": capture_gpu,
                    "cache": str(cache or cache_beside(capture_dir)), "rows": len(table),
                    "wall_s": time.perf_counter() - t0, "top_k": top_k, "replays": replays}
            atomic.write_text(target_dir / "verify.json", json.dumps(meta, indent=2, default=str))
            written.append(target)
    return written


def _relative(capture_dir: Path, root: Path) -> Path:
    """Where a capture's results go under ``out``: its folder relative to ``root``, minus 'capture'.

    A capture given directly is named by itself (``.../llama3-8b-fp8/capture`` -> ``llama3-8b-fp8``).
    """
    if capture_dir == root:
        return Path(root.parent.name if root.name == "capture" else root.name)
    rel = capture_dir.relative_to(root)
    return rel.parent if rel.name == "capture" else rel
