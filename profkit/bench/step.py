"""A decoder-layer stack of a real model, every linear through FlashInfer, timed per step (GPU).

What it builds: ``layers`` decoder layers of a shipped model config (random weights, never
downloaded): RMSNorm, fused qkv linear, attention, o linear, residual, RMSNorm, fused gate_up
linear, SwiGLU, down linear, residual. Attention is torch's ``scaled_dot_product_attention``:
decode attends one new token per sequence over a KV cache of ``kv_len`` tokens (queries grouped
per KV head, so no GQA expansion), prefill is causal over one sequence of the chunk's tokens.

Linear implementations (``impl``): ``flashinfer`` runs ``mm_bf16(backend="auto")`` (bf16) or
``bmm_fp8(backend="auto")`` with per-tensor scales after an in-graph cast of the activation
(fp8); ``torch`` runs ``torch.matmul`` (bf16) or ``torch._scaled_mm`` (fp8), the reference an
engine without FlashInfer GEMMs would use.

States: ``untuned`` (nothing tuned: FlashInfer's fallback tactic) and ``torch``; tuning states,
each after a tuning pass in this process: ``tuned`` (``flashinfer.autotune(True)``), ``planned``
(with a plan's ``flashinfer.autotune`` arguments, e.g. from ``profkit advise``), ``v2-graph`` /
``v2-eager`` (``autotune_v2`` with ``MeasurementPolicy(execution_mode="cuda_graph", cold_l2=True)``
/ ``execution_mode="eager"``; their steps run inside ``autotune_v2(mode="replay")`` with the same
policy, the only place FlashInfer serves winners tuned under a policy without a store); file states, each with FlashInfer's configs cleared and its own
cache files loaded: ``cache`` (a tuning pass's cache.json), ``advised`` (the cache a planned pass
wrote) and ``repaired`` (a ``profkit repair`` file). A process runs at most one tuning state,
first after untuned. Without one, states run in the order given and may repeat (``untuned`` again
at the end measures drift), so the file states are compared in one process. Each (phase, size, state) is warmed eagerly, captured in a CUDA
graph and replayed; each repetition is the median of ``replays`` replays.
"""

from __future__ import annotations

import dataclasses
import statistics

import torch
import torch.nn.functional as F

from profkit.bench.contexts import load_cache_files, serving_context, tuning_context
from profkit.bench.gemm import enable_bf16_auto_on_sm90, observe_choices
from profkit.bench.graphs import graph_replay_ms
from profkit.models import Linear, ModelConfig, linear_layers

DECODE_SIZES = (1, 2, 3, 8, 24, 64, 100, 256, 333, 512, 1024, 3000, 4096)
PREFILL_SIZES = (512, 2048, 4096)
ATTENTION = "torch.nn.functional.scaled_dot_product_attention"


@dataclasses.dataclass
class LinearWeights:
    """One linear's weight, kept in every layout the implementations need."""

    spec: Linear
    w: torch.Tensor  # (N, K) bf16, row-major
    w_fp8_t: torch.Tensor | None  # (K, N) e4m3, column-major (bmm_fp8 and _scaled_mm)


class DecoderStack:
    """``layers`` decoder layers of ``model`` in ``dtype`` ('bf16' or 'fp8'), on the GPU."""

    def __init__(self, model: ModelConfig, dtype: str, *, layers: int, kv_len: int, max_batch: int,
                 device: str = "cuda"):
        if dtype not in ("bf16", "fp8"):
            raise ValueError(f"dtype must be bf16 or fp8, got {dtype!r}")
        self.model, self.dtype, self.n_layers, self.kv_len = model, dtype, layers, kv_len
        self.impl = "flashinfer"
        dev, bf16 = device, torch.bfloat16
        self.layers = []
        for _ in range(layers):
            linears = {}
            for spec in linear_layers(model):
                w = torch.randn(spec.n, spec.k, device=dev, dtype=bf16) / spec.k**0.5
                w8 = w.to(torch.float8_e4m3fn).t() if dtype == "fp8" else None
                linears[spec.name] = LinearWeights(spec, w, w8)
            self.layers.append(linears)
        self.norm = torch.ones(model.hidden_size, device=dev, dtype=bf16)
        self.scale = torch.tensor(1.0, device=dev, dtype=torch.float32)
        shape = (max_batch, model.num_key_value_heads, kv_len, model.head_dim)
        # One KV cache shared by all layers: each layer still reads kv_len tokens per sequence.
        self.k_cache = torch.randn(shape, device=dev, dtype=bf16)
        self.v_cache = torch.randn(shape, device=dev, dtype=bf16)

    # -- pieces -------------------------------------------------------------------------------
    def linear(self, x: torch.Tensor, lw: LinearWeights) -> torch.Tensor:
        if self.dtype == "bf16":
            if self.impl == "torch":
                return torch.matmul(x, lw.w.t())
            import flashinfer

            return flashinfer.mm_bf16(x, lw.w.t(), backend="auto")
        x8 = x.to(torch.float8_e4m3fn)
        if self.impl == "torch":
            return torch._scaled_mm(x8, lw.w_fp8_t, scale_a=self.scale, scale_b=self.scale, out_dtype=torch.bfloat16)
        import flashinfer

        out = flashinfer.bmm_fp8(x8.unsqueeze(0), lw.w_fp8_t.unsqueeze(0), self.scale, self.scale,
                                 torch.bfloat16, backend="auto")
        return out.squeeze(0)

    def rmsnorm(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * self.norm

    def attention(self, qkv: torch.Tensor, phase: str) -> torch.Tensor:
        m = self.model
        tokens, hd, kvh = qkv.shape[0], m.head_dim, m.num_key_value_heads
        q_size, kv_size = m.num_attention_heads * hd, kvh * hd
        q, k, v = qkv.split((q_size, kv_size, kv_size), dim=-1)
        if phase == "decode":
            group = m.num_attention_heads // kvh
            kc, vc = self.k_cache[:tokens], self.v_cache[:tokens]
            kc[:, :, -1] = k.view(tokens, kvh, hd)
            vc[:, :, -1] = v.view(tokens, kvh, hd)
            out = F.scaled_dot_product_attention(q.view(tokens, kvh, group, hd), kc, vc)
            return out.reshape(tokens, q_size)
        q = q.view(1, tokens, m.num_attention_heads, hd).transpose(1, 2)
        k = k.view(1, tokens, kvh, hd).transpose(1, 2)
        v = v.view(1, tokens, kvh, hd).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return out.transpose(1, 2).reshape(tokens, q_size)

    def forward(self, x: torch.Tensor, phase: str) -> torch.Tensor:
        for layer in self.layers:
            h = self.linear(self.rmsnorm(x), layer["qkv"])
            x = x + self.linear(self.attention(h, phase), layer["o"])
            if "gate_up" in layer:
                gate, up = self.linear(self.rmsnorm(x), layer["gate_up"]).chunk(2, dim=-1)
                x = x + self.linear(F.silu(gate) * up, layer["down"])
        return x

    # -- timing -------------------------------------------------------------------------------
    def time_step(self, phase: str, tokens: int, *, repetitions: int, replays: int) -> list[float]:
        """Milliseconds per step, one value per repetition (median of ``replays`` graph replays)."""
        x = torch.randn(tokens, self.model.hidden_size, device="cuda", dtype=torch.bfloat16)
        # Two eager warm-ups: cuDNN builds its plans here, never inside the capture.
        times = graph_replay_ms(lambda: self.forward(x, phase), replays=repetitions * replays, warmups=2)
        return [statistics.median(times[i * replays:(i + 1) * replays]) for i in range(repetitions)]


V2_STATES = ("v2-graph", "v2-eager")
TUNING_STATES = ("tuned", "planned", *V2_STATES)
FILE_STATES = ("cache", "advised", "repaired", "ported", "blind")
STATES = ("untuned", *TUNING_STATES, *FILE_STATES, "torch")


def run_step(model_name: str, dtype: str, *, out, states=("untuned", "tuned", "torch"), layers: int = 4,
             kv_len: int = 512, decode_sizes=DECODE_SIZES, prefill_sizes=PREFILL_SIZES, repetitions: int = 3,
             replays: int = 10, cache_files: dict | None = None, deadline_s: float | None = None,
             plan_kwargs: dict | None = None) -> list[dict]:
    """Time the stack in each state; return canonical bench rows (engine="profkit-step").

    A tuning state runs a tuning pass first (one forward at the largest size inside
    ``profkit.capture``, saved to ``out/capture``; ``tuned`` and ``planned`` write FlashInfer's
    ``out/cache.json``, the v2 states tune in memory; ``planned`` passes ``plan_kwargs`` to
    ``flashinfer.autotune``); a file state loads ``cache_files[state]`` (a list of paths) into
    FlashInfer, cleared first. See the module docstring for the order.
    """
    import time
    from pathlib import Path

    import profkit
    from profkit.models import load_model

    states = _ordered(states)
    cache_files = cache_files or {}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    model = load_model(model_name)
    flags = []
    if dtype == "bf16":
        flags.append(enable_bf16_auto_on_sm90())  # mm_bf16(backend="auto") raises on SM90 without it
    stack = DecoderStack(model, dtype, layers=layers, kv_len=kv_len, max_batch=max(decode_sizes))
    base = step_row_base(out, model_name, dtype, flags=flags, layers=layers, kv_len=kv_len)
    linear_names = [lin.name for lin in linear_layers(model)]
    rows, tuning_s, tuning_jit_s = [], None, None
    for state in states:
        stack.impl = "torch" if state == "torch" else "flashinfer"
        if state in TUNING_STATES:
            tuning_s, tuning_jit_s = _tuning_pass(profkit, stack, max(max(decode_sizes), max(prefill_sizes)), out,
                                                  state, plan_kwargs or {})
        if state in FILE_STATES or (state == "untuned" and not any(t in states for t in TUNING_STATES)):
            load_cache_files(cache_files.get(state, ()), state)
        for phase, sizes in (("decode", decode_sizes), ("prefill", prefill_sizes)):
            for tokens in sizes:
                row = {**base, "state": state, "label": state, "phase": phase, "tokens": tokens,
                       "batch_size": tokens if phase == "decode" else 1, "tuning_s": tuning_s,
                       "tuning_jit_build_s": tuning_jit_s}
                if deadline_s is not None and time.monotonic() - started > deadline_s:
                    rows.append({**row, "repetition": 0, "step_ms": float("nan"), "error": "not run: deadline"})
                    continue
                try:
                    with observe_choices() as seen, _serving_context(state):
                        times = stack.time_step(phase, tokens, repetitions=repetitions, replays=replays)
                    row["picks"] = picks_text(seen, linear_names, layers=layers)
                except Exception as exc:  # noqa: BLE001 - keep the other sizes; the error is a result
                    rows.append({**row, "repetition": 0, "step_ms": float("nan"), "error": f"{type(exc).__name__}: {exc}"[:500]})
                    torch.cuda.synchronize()
                    continue
                for rep, ms in enumerate(times):
                    per_s = tokens / (ms / 1e3)
                    rows.append({**row, "repetition": rep, "step_ms": ms, "error": "",
                                 "output_tok_s" if phase == "decode" else "input_tok_s": per_s})
                print(f"[step] {model_name} {dtype} {state:7} {phase:7} {tokens:5}: "
                      f"{statistics.median(times):8.3f} ms", flush=True)
    return rows


def step_row_base(out, model_name: str, dtype: str, *, flags, layers: int, kv_len: int) -> dict:
    """The columns every step row of one process shares: what ran, where, with which software."""
    from profkit.sources.env import collect_env, new_run_id

    env = collect_env(new_run_id())
    return {"engine": "profkit-step", "format": "profkit-step", "source": str(out), "model": model_name,
            "dtype": dtype, "flags": ",".join(flags), "layers": layers, "kv_len": kv_len, "attention": ATTENTION,
            **{k: env.get(k) for k in ("run_id", "gpu", "driver", "cuda", "torch", "flashinfer", "cudnn",
                                       "cublas", "host", "command")}}


def picks_text(seen: list[dict], names: list[str], *, layers: int, forwards: int = 3) -> str:
    """What FlashInfer ran for each linear of the captured forward, as ``name=Runner:tactic`` words.

    ``seen`` holds one choice per linear call over ``forwards`` forwards (two eager warm-ups, then
    the captured one); every layer has the same shapes, so the last forward's first layer says it all.
    """
    per_forward = layers * len(names)
    if not seen:
        return ""
    if len(seen) != forwards * per_forward:
        return f"unattributed: {len(seen)} choices for {forwards * per_forward} linear calls"
    last = seen[-per_forward:][:len(names)]
    return " ".join(f"{name}={c['runner']}:{c['tactic']}" for name, c in zip(names, last))


def _tuning_pass(profkit, stack: DecoderStack, tokens: int, out, state: str,
                 plan_kwargs: dict) -> tuple[float, float]:
    """One forward at ``tokens`` inside profkit.capture and the state's tuning context.

    Tunes every bucket up to ``tokens``; returns the pass's wall seconds and, of those, the seconds FlashInfer spent
    building JIT modules from scratch (0 where an earlier state, or an earlier process on this machine, built them:
    a tuning pass first in a fresh process on a fresh machine pays them, as a port there does).
    """
    import time

    from profkit.sources.jit import jit_builds

    x = torch.randn(tokens, stack.model.hidden_size, device="cuda", dtype=torch.bfloat16)
    with profkit.capture(run_id=f"{out.name}-{state}") as cap, _tuning_context(state, out, plan_kwargs), \
            jit_builds() as built:
        t0 = time.perf_counter()
        stack.forward(x, "decode")
        torch.cuda.synchronize()
        tuning_s = time.perf_counter() - t0
    cap.save(out / "capture")
    return tuning_s, built.seconds


def _tuning_context(state: str, out, plan_kwargs: dict):
    import flashinfer

    if state in V2_STATES:
        return tuning_context(state)
    return flashinfer.autotune(True, cache=str(out / "cache.json"), **(plan_kwargs if state == "planned" else {}))


def _serving_context(state: str):
    """The v2 states serve their winners inside ``autotune_v2(mode="replay")`` with their policy."""
    import contextlib

    if state in V2_STATES:
        return serving_context(state)
    return contextlib.nullcontext()


def _ordered(states) -> list[str]:
    """The states in running order; raises when the combination cannot run in one process."""
    states = list(states)
    unknown = [s for s in states if s not in STATES]
    if unknown:
        raise ValueError(f"unknown states {', '.join(unknown)}; known: {', '.join(STATES)}")
    tuning = [s for s in states if s in TUNING_STATES]
    if not tuning:
        return states
    if len(tuning) > 1 or any(s in FILE_STATES for s in states) or len(set(states)) < len(states):
        raise ValueError(f"a process runs one tuning state ({', '.join(tuning)} given), no file states, "
                         "no repeats: run the others in a separate process")
    return sorted(states, key=STATES.index)


