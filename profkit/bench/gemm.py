"""FlashInfer GEMMs as engines call them, and CUDA-graph timing of them outside tuning (GPU only).

``fp8_gemm``: ``flashinfer.bmm_fp8(A[1,M,K] e4m3, B[1,K,N] column-major e4m3, sA, sB, bf16,
backend="auto")``. ``bf16_gemm``: ``flashinfer.mm_bf16(a[M,K], b[K,N] column-major,
backend="auto")``; on SM90 without nvidia-cutlass-dsl that raises, and setting
``flashinfer.gemm.gemm_base._TGV_DEBUG_USE_CPP = True`` first lets ``auto`` tune cuBLASLt, cuDNN
and TinyGEMM as one op (autotuner_errata.md, H200 data).
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics

import torch

from profkit.bench.graphs import graph_replay_ms

OPS = ("fp8_gemm", "bf16_gemm")


@dataclasses.dataclass
class Gemm:
    """Weights of one (N, K) linear, ready to call at any M with a given op."""

    op: str
    n: int
    k: int
    weights: list  # rotating copies of the weight, already in the op's layout
    scale: torch.Tensor | None = None

    def inputs(self, m: int, count: int) -> list[torch.Tensor]:
        """``count`` distinct activations of M rows (rotated so L2 does not serve them hot)."""
        dtype = torch.bfloat16
        xs = [torch.randn(m, self.k, device="cuda", dtype=dtype) for _ in range(count)]
        if self.op == "fp8_gemm":
            return [x.to(torch.float8_e4m3fn).unsqueeze(0) for x in xs]
        return xs

    def __call__(self, x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        import flashinfer

        if self.op == "fp8_gemm":
            return flashinfer.bmm_fp8(x, weight, self.scale, self.scale, torch.bfloat16, out=out, backend="auto")
        return flashinfer.mm_bf16(x, weight, out=out, backend="auto")

    def out(self, m: int) -> torch.Tensor:
        shape = (1, m, self.n) if self.op == "fp8_gemm" else (m, self.n)
        return torch.empty(shape, device="cuda", dtype=torch.bfloat16)


def make_gemm(op: str, n: int, k: int, *, copies: int = 4) -> Gemm:
    """Random weights (never downloaded) for an (N, K) linear in ``op``'s layout."""
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    weights = []
    for _ in range(copies):
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5  # (N, K) row-major
        if op == "fp8_gemm":
            weights.append(w.to(torch.float8_e4m3fn).t().unsqueeze(0))  # (1, K, N) column-major
        else:
            weights.append(w.t())  # (K, N) column-major
    scale = torch.tensor(1.0, device="cuda", dtype=torch.float32) if op == "fp8_gemm" else None
    return Gemm(op=op, n=n, k=k, weights=weights, scale=scale)


BF16_AUTO_FLAG = "flashinfer.gemm.gemm_base._TGV_DEBUG_USE_CPP=True"  # as provenance writes it


def enable_bf16_auto_on_sm90() -> str:
    """Apply the SM90 workaround for ``mm_bf16(backend="auto")``; return the flag set, for provenance."""
    import flashinfer.gemm.gemm_base as gemm_base

    gemm_base._TGV_DEBUG_USE_CPP = True
    return BF16_AUTO_FLAG


def time_graph(gemm: Gemm, m: int, *, rotate: int = 4, replays: int = 20) -> dict:
    """Time ``gemm`` at M=m in a CUDA graph of ``rotate`` calls on distinct inputs and weights.

    The op is warmed eagerly first (cuDNN builds its plan then; building it during capture
    raises). Returns per-call milliseconds: median, p10 and p90 over replays.
    """
    xs = gemm.inputs(m, rotate)
    ws = [gemm.weights[i % len(gemm.weights)] for i in range(rotate)]
    outs = [gemm.out(m) for _ in range(rotate)]

    def calls():
        for x, w, o in zip(xs, ws, outs):
            gemm(x, w, o)

    per_call = [ms / rotate for ms in graph_replay_ms(calls, replays=replays)]
    per_call.sort()
    return {
        "time_ms": statistics.median(per_call),
        "time_ms_p10": per_call[int(0.1 * (len(per_call) - 1))],
        "time_ms_p90": per_call[int(0.9 * (len(per_call) - 1))],
        "replays": replays,
        "calls_per_replay": rotate,
        "timing": f"cuda_graph, {rotate} rotating inputs and weights, median of {replays} replays",
    }


@contextlib.contextmanager
def observe_choices():
    """Record what ``AutoTuner.choose_one`` returns (runner, tactic) while open, tuning or not."""
    from flashinfer.autotuner import AutoTuner
    from flashinfer.autotuner.autotuner import _tactic_to_json

    from profkit.schema import tactic_text
    from profkit.sources.hooks import Hook

    seen: list[dict] = []

    def wrap(hook):
        def choose_one(self, custom_op, runners, tuning_config, inputs, **kwargs):
            runner, tactic = hook.inner(self, custom_op, runners, tuning_config, inputs, **kwargs)
            seen.append({"op": custom_op, "runner": type(runner).__name__,
                         "tactic": tactic_text(_tactic_to_json(tactic))})
            return runner, tactic
        return choose_one

    hook = Hook(AutoTuner, "choose_one", wrap)
    hook.install()
    try:
        yield seen
    finally:
        hook.uninstall()
