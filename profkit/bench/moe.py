"""One model's MoE layer through FlashInfer's SM90 CuTe-DSL fused MoE, and its verify under routings (GPU).

The op is ``flashinfer.fused_moe.cute_dsl.sm90_fused_moe.cute_dsl_fused_moe_bf16`` (FlashInfer
0.7.2.post1, Hopper only): custom_op ``CuteDslFusedMoE::run_moe_sm90::Swiglu``, one runner
(``CuteDslFusedMoESm90Runner``), tactics ``(tile_size, ((tile_m, tile_n), swizzle),
((tile_m, tile_n), cluster_mn, raster_along_m))``; -1 runs the fixed default. Weights are random
bf16 at a shipped model config's expert geometry (w1 repacked by FlashInfer's own
``interleave_up_gate_sm90``); nothing is downloaded.

:func:`verify_moe` re-times, per M and per routing (:mod:`profkit.bench.routing`), the tuner's
top-k candidates of M's bucket, its pick and the default, the way engines run the op: a CUDA graph
of calls on rotating weights and activations (their touched bytes together more than twice the
L2), timed over graph replays. Each candidate runs through the op's public API with
:class:`~profkit.bench.steer.Steering` aimed at it, so FlashInfer's cache-file key is recorded for
``profkit repair``.
"""

from __future__ import annotations

import math
import os
import statistics
import time

import pandas as pd
import torch

from profkit import schema
from profkit.analysis.verify import verify_plan
from profkit.bench.contexts import load_cache
from profkit.bench.gemm import observe_choices
from profkit.bench.graphs import graph_replay_ms
from profkit.bench.routing import Routing, route
from profkit.bench.steer import Steering, tactic_from_text
from profkit.models import ModelConfig

OP = "CuteDslFusedMoE::run_moe_sm90::Swiglu"
RUNNER = "CuteDslFusedMoESm90Runner"
# Said wherever gpt-oss-120b's geometry is timed through this op.
GEOMETRY_NOTES = {
    "gpt-oss-120b": "bf16 experts at gpt-oss-120b's geometry: the real model runs MXFP4 experts, which "
                    "FlashInfer does not tune on SM90 through this op",
}


def preload_kit_moe_utils() -> str:
    """Point FlashInfer's ``moe_utils`` loader at the device kit's prebuilt module when ``MOE_UTILS_SO`` is set.

    Without it FlashInfer JIT-builds ``moe_utils`` with nvcc on first use (minutes). Returns what was done.
    """
    if not os.environ.get("MOE_UTILS_SO"):
        return "moe_utils: FlashInfer's own loader (MOE_UTILS_SO not set)"
    from moe_utils_preload import preload_moe_utils  # on PYTHONPATH after the kit's setup_moe.sh

    preload_moe_utils()
    return f"moe_utils: prebuilt {os.environ['MOE_UTILS_SO']}"


class MoeLayer:
    """``copies`` sets of random bf16 expert weights of ``model``'s MoE layer, on the GPU."""

    def __init__(self, model: ModelConfig, *, copies: int = 1, seed: int = 0):
        if not model.num_local_experts or not model.num_experts_per_tok:
            raise ValueError(f"{model.name} is not a mixture-of-experts model (no num_local_experts)")
        from flashinfer.fused_moe.cute_dsl.sm90_contiguous_gather_grouped_gemm_act_fusion import (
            interleave_up_gate_sm90)

        self.model = model
        self.experts, self.top_k = model.num_local_experts, model.num_experts_per_tok
        self.hidden, self.inter = model.hidden_size, model.expert_intermediate_size
        torch.manual_seed(seed)
        e, h, i, bf16 = self.experts, self.hidden, self.inter, torch.bfloat16
        self.w1 = [interleave_up_gate_sm90(torch.randn(e, 2 * i, h, device="cuda", dtype=bf16).mul_(h ** -0.5))
                   for _ in range(copies)]
        self.w2 = [torch.randn(e, h, i, device="cuda", dtype=bf16).mul_(i ** -0.5) for _ in range(copies)]

    @classmethod
    def from_shape(cls, shape: str, *, copies: int = 1, seed: int = 0) -> "MoeLayer":
        """A layer of the geometry a shape label names ('E=128 top_k=8 H=2048 I=768'), e.g. a capture's."""
        try:
            fields = dict(part.split("=") for part in shape.split())
            e, k, h, i = (int(fields[name]) for name in ("E", "top_k", "H", "I"))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not an MoE shape label: {shape!r}") from exc
        model = ModelConfig(name=shape, hidden_size=h, intermediate_size=i, num_attention_heads=0,
                            num_key_value_heads=0, head_dim=0, num_hidden_layers=1, vocab_size=0, dense_mlp=False,
                            num_local_experts=e, num_experts_per_tok=k)
        return cls(model, copies=copies, seed=seed)

    @property
    def shape(self) -> str:
        """profkit's shape label of this layer (as :func:`profkit.analysis._frames.moe_shape` gives it)."""
        return f"E={self.experts} top_k={self.top_k} H={self.hidden} I={self.inter}"

    def forward(self, x, ids, scales, out, *, copy: int = 0, tactic=None) -> torch.Tensor:
        """The fused MoE of ``x`` routed by (ids, scales); ``tactic=None`` asks FlashInfer's AutoTuner."""
        from flashinfer.fused_moe.cute_dsl.sm90_fused_moe import cute_dsl_fused_moe_bf16

        return cute_dsl_fused_moe_bf16(x, ids, scales, self.w1[copy], self.w2[copy], self.experts, self.top_k,
                                       moe_output=out, tactic=tactic)

    def inputs(self, routing: Routing, count: int) -> list[tuple]:
        """``count`` distinct (x, ids, scales, out) sets of one routing's token count, on the GPU."""
        m = routing.ids.shape[0]
        return [(torch.randn(m, self.hidden, device="cuda", dtype=torch.bfloat16), routing.ids.cuda().clone(),
                 routing.scales.cuda().clone(), torch.empty(m, self.hidden, device="cuda", dtype=torch.bfloat16))
                for _ in range(count)]

    def touched_bytes(self, tokens: int) -> int:
        """Weight bytes one call reads at most: the experts its tokens can reach."""
        per_expert = (2 * self.inter * self.hidden + self.hidden * self.inter) * 2
        return min(self.experts, tokens * self.top_k) * per_expert

    def tuner_routing_matches(self, tokens: int = 64) -> bool:
        """Whether :func:`profkit.bench.routing.route` ('tuner') equals FlashInfer's profiling draw on this GPU."""
        from flashinfer.fused_moe.cute_dsl.sm90_tuner import CuteDslFusedMoESm90Runner

        runner = CuteDslFusedMoESm90Runner(forward_impl=None, num_experts=self.experts, top_k=self.top_k,
                                           num_local_experts=self.experts)
        mine = route("tuner", tokens, self.experts, self.top_k, device="cuda")
        theirs = runner._profile_routing_pre_hook([None, mine.ids.clone()])[1]
        return bool(torch.equal(mine.ids, theirs))


def copies_past_l2(layer: MoeLayer, tokens: int) -> int:
    """Calls per graph so that their touched weights exceed twice the L2 (at least 2, at most 8)."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return max(2, min(8, math.ceil(2 * l2 / layer.touched_bytes(tokens))))


def verify_moe(layer: MoeLayer, tables: schema.Tables, *, routings, sizes, top_k: int = 5, replays: int = 30,
               seed: int = 0, cache=None, log=print) -> tuple[pd.DataFrame, dict]:
    """The verify table of one MoE capture under each routing, and the seconds each routing took.

    Rows are the ``verify`` table's (docs/schema.md) plus ``routing``, ``routing_seed``,
    ``imbalance`` (max / mean tokens per expert) and ``tokens_per_expert_max``. ``cache``: a
    FlashInfer cache file loaded before timing, for ``cache_choice`` (what the tuned op runs at M).
    """
    plan = verify_plan(tables.candidates, tables.winners, sizes=sizes, top_k=top_k)
    plan = plan[plan["op"] == OP]
    cache_loaded = load_cache(cache)
    rows, seconds = [], {}
    for name in routings:
        started = time.perf_counter()
        for m, at_m in plan.groupby("m", sort=True):
            routing = route(name, int(m), layer.experts, layer.top_k, seed=seed)
            rows += _time_at(layer, routing, at_m, replays=replays, cache_loaded=cache_loaded)
        seconds[name] = time.perf_counter() - started
        log(f"[verify] {layer.model.name} routing {name}: {len(plan)} timings in {seconds[name]:.1f}s")
    return schema.frame("verify", rows), seconds


def _time_at(layer: MoeLayer, routing: Routing, plan: pd.DataFrame, *, replays: int, cache_loaded: bool) -> list[dict]:
    m = routing.ids.shape[0]
    copies = copies_past_l2(layer, m)
    sets = layer.inputs(routing, copies)

    def calls():
        for copy, (x, ids, scales, out) in enumerate(sets):
            layer.forward(x, ids, scales, out, copy=copy % len(layer.w1))

    choice = _cache_choice(layer, sets[0]) if cache_loaded else {}
    counts = torch.bincount(routing.ids.reshape(-1).long().cpu(), minlength=layer.experts)
    base = {"routing": routing.name, "routing_seed": routing.seed, "imbalance": routing.imbalance(layer.experts),
            "tokens_per_expert_max": int(counts.max()), "cache_loaded": cache_loaded,
            "cache_runner": choice.get("runner"), "cache_tactic": choice.get("tactic"),
            "calls_per_replay": copies, "replays": replays,
            "timing": f"cuda_graph, {copies} rotating weight and input sets, {replays} replays"}
    rows = []
    with Steering() as steering:
        for cand in plan.to_dict("records"):
            steering.aim(OP, None if cand["default"] else cand["runner"], tactic_from_text(cand["tactic"]))
            t0 = time.perf_counter()
            row = {**cand, **base, "cache_choice": bool(cache_loaded and choice.get("tactic") == cand["tactic"])}
            try:
                per_call = sorted(ms / copies for ms in graph_replay_ms(calls, replays=replays))
                row.update(serving_ms=statistics.median(per_call), serving_p10_ms=per_call[int(0.1 * (replays - 1))],
                           serving_p90_ms=per_call[int(0.9 * (replays - 1))], status="ok", error="")
            except Exception as exc:  # noqa: BLE001 - a candidate that cannot run is a result
                torch.cuda.synchronize()
                row.update(serving_ms=math.nan, serving_p10_ms=math.nan, serving_p90_ms=math.nan, status="failed",
                           error=f"{type(exc).__name__}: {exc}"[:500])
            steered = steering.calls[0] if steering.calls else {}
            row.update(file_key=steered.get("file_key"), steered_runner=steered.get("runner"),
                       verify_s=time.perf_counter() - t0)
            rows.append(row)
    return rows


def _cache_choice(layer: MoeLayer, inputs: tuple) -> dict:
    """What FlashInfer's own lookup runs for these inputs (the loaded cache, no steering)."""
    x, ids, scales, out = inputs
    with observe_choices() as seen:
        layer.forward(x, ids, scales, out)
    torch.cuda.synchronize()
    return seen[0] if seen else {}
