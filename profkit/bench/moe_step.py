"""An MoE model's decoder-layer stack, its experts through FlashInfer's SM90 fused MoE, timed interleaved (GPU).

What it builds: ``layers`` decoder layers of a shipped MoE config (random weights): RMSNorm, qkv
linear, torch SDPA attention (as :class:`profkit.bench.step.DecoderStack`), o linear, residual,
RMSNorm, the router (a linear to the experts, softmax, top-k, renormalized), the fused MoE
(:class:`profkit.bench.moe.MoeLayer`, each layer its own experts), residual. The dense linears run
``torch.matmul``, so the only FlashInfer op, and the only thing tuning changes, is the MoE.

States: ``untuned`` (FlashInfer's configs cleared: tactic -1), ``tuned`` (this process's tuning
pass: one forward at the largest size inside ``profkit.capture`` and ``flashinfer.autotune``; its
``cache.json`` is what the state loads) and file states (``cache``, ``advised``, ``repaired``:
given cache files). Interleaved: per size, every state's step is captured in its own CUDA graph
(configs cleared and the state's files loaded before its capture), then the graphs are replayed
state after state, ``passes`` times, so drift lands in every state alike. Each repetition is the
median of ``replays`` replays; a state has ``passes * repetitions`` repetitions per size. A state
given twice is timed as two series (``untuned`` and ``untuned-2``: an A/A pair for calibration).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from profkit.bench.contexts import load_cache_files
from profkit.bench.gemm import observe_choices
from profkit.bench.graphs import captured_graph, replay_ms
from profkit.bench.moe import MoeLayer
from profkit.bench.routing import imbalance
from profkit.bench.step import DECODE_SIZES, FILE_STATES, PREFILL_SIZES, DecoderStack, picks_text, step_row_base
from profkit.models import ModelConfig

MOE_STATES = ("untuned", "tuned", *FILE_STATES)


class MoeDecoderStack(DecoderStack):
    """``layers`` decoder layers of an MoE ``model`` in bf16, on the GPU."""

    def __init__(self, model: ModelConfig, *, layers: int, kv_len: int, max_batch: int):
        super().__init__(model, "bf16", layers=layers, kv_len=kv_len, max_batch=max_batch)
        self.impl = "torch"
        self.moe = MoeLayer(model, copies=layers)
        self.gates = [torch.randn(model.num_local_experts, model.hidden_size, device="cuda", dtype=torch.bfloat16)
                      .mul_(model.hidden_size ** -0.5) for _ in range(layers)]

    def route(self, h: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The router: expert ids (int32) and top-k scales renormalized to sum to 1 (float32)."""
        probs = torch.softmax(torch.matmul(h, self.gates[layer].t()).float(), dim=-1)
        scales, ids = probs.topk(self.moe.top_k, dim=-1)
        return ids.to(torch.int32), scales / scales.sum(dim=-1, keepdim=True)

    def forward(self, x: torch.Tensor, phase: str) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            h = self.linear(self.rmsnorm(x), layer["qkv"])
            x = x + self.linear(self.attention(h, phase), layer["o"])
            h = self.rmsnorm(x)
            ids, scales = self.route(h, i)
            x = x + self.moe.forward(h, ids, scales, torch.empty_like(h), copy=i)
        return x


def run_moe_step(model: ModelConfig, *, out, states=("untuned", "tuned"), cache_files: dict | None = None,
                 layers: int = 4, kv_len: int = 512, decode_sizes=DECODE_SIZES, prefill_sizes=PREFILL_SIZES,
                 passes: int = 3, repetitions: int = 3, replays: int = 10, deadline_s: float | None = None,
                 log=print) -> list[dict]:
    """Time the stack in each state, interleaved (see the module docstring); canonical step rows.

    Rows add ``pass`` (0..passes-1) and ``imbalance`` (the router's max / mean tokens per expert
    in the first layer at that size) to :func:`profkit.bench.step.run_step`'s columns.
    """
    unknown = [s for s in states if s not in MOE_STATES]
    if unknown:
        raise ValueError(f"MoE step states are names from {', '.join(MOE_STATES)}; got {', '.join(states)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    files = {state: list(paths) for state, paths in (cache_files or {}).items()}
    stack = MoeDecoderStack(model, layers=layers, kv_len=kv_len, max_batch=max(decode_sizes))
    base = step_row_base(out, model.name, "bf16", flags=[], layers=layers, kv_len=kv_len)
    tuning_s = None
    if "tuned" in states:
        tuning_s = _tuning_pass(stack, max(max(decode_sizes), max(prefill_sizes)), out)
        files["tuned"] = [out / "cache.json"]
        log(f"[moe-step] {model.name}: tuning pass {tuning_s:.1f}s")
    labels = state_labels(states)
    rows = []
    for phase, sizes in (("decode", decode_sizes), ("prefill", prefill_sizes)):
        for tokens in sizes:
            row = {**base, "phase": phase, "tokens": tokens, "batch_size": tokens if phase == "decode" else 1,
                   "tuning_s": tuning_s}
            if deadline_s is not None and time.monotonic() - started > deadline_s:
                rows += [{**row, "state": s, "label": label, "repetition": 0, "step_ms": float("nan"),
                          "error": "not run: deadline"} for label, s in labels.items()]
                continue
            try:
                rows += _time_size(stack, row, labels, files, passes=passes, repetitions=repetitions,
                                   replays=replays, log=log)
            except Exception as exc:  # noqa: BLE001 - keep the other sizes; the error is a result
                torch.cuda.synchronize()
                rows += [{**row, "state": s, "label": label, "repetition": 0, "step_ms": float("nan"),
                          "error": f"{type(exc).__name__}: {exc}"[:500]} for label, s in labels.items()]
    return rows


def state_labels(states) -> dict[str, str]:
    """{label: state}: a state given again is timed again as its own series, ``untuned-2`` (an A/A pair)."""
    labels, seen = {}, {}
    for state in states:
        seen[state] = seen.get(state, 0) + 1
        labels[state if seen[state] == 1 else f"{state}-{seen[state]}"] = state
    return labels


def _time_size(stack: MoeDecoderStack, row: dict, labels: dict, files: dict, *, passes: int, repetitions: int,
               replays: int, log) -> list[dict]:
    phase, tokens = row["phase"], row["tokens"]
    x = torch.randn(tokens, stack.model.hidden_size, device="cuda", dtype=torch.bfloat16)
    ids, _ = stack.route(stack.rmsnorm(x), 0)
    row = {**row, "imbalance": imbalance(ids, stack.moe.experts)}
    graphs, picks = {}, {}
    for label, state in labels.items():
        load_cache_files(files.get(state, ()), state)
        with observe_choices() as seen:
            graphs[label] = captured_graph(lambda: stack.forward(x, phase), warmups=2)
        picks[label] = picks_text(seen, ["moe"], layers=stack.n_layers)
    rows = []
    for p in range(passes):
        for label, state in labels.items():
            times = replay_ms(graphs[label], replays=repetitions * replays)
            for r in range(repetitions):
                ms = statistics.median(times[r * replays:(r + 1) * replays])
                rows.append({**row, "state": state, "label": label, "picks": picks[label], "pass": p,
                             "repetition": p * repetitions + r, "step_ms": ms, "error": "",
                             "output_tok_s" if phase == "decode" else "input_tok_s": tokens / (ms / 1e3)})
    medians = {label: statistics.median(r["step_ms"] for r in rows if r["label"] == label) for label in labels}
    log(f"[moe-step] {stack.model.name} {phase:7} {tokens:5}: "
        + "  ".join(f"{s} {ms:.3f} ms" for s, ms in medians.items()))
    return rows


def _tuning_pass(stack: MoeDecoderStack, tokens: int, out: Path) -> float:
    """One decode forward at ``tokens`` inside profkit.capture and flashinfer.autotune; its wall seconds."""
    import flashinfer

    import profkit

    x = torch.randn(tokens, stack.model.hidden_size, device="cuda", dtype=torch.bfloat16)
    with profkit.capture(run_id=f"{out.name}-tuned") as cap, flashinfer.autotune(True, cache=str(out / "cache.json")):
        t0 = time.perf_counter()
        stack.forward(x, "decode")
        torch.cuda.synchronize()
        tuning_s = time.perf_counter() - t0
    cap.save(out / "capture")
    return tuning_s
