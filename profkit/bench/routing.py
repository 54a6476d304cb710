"""Expert routings for timing an MoE op: which experts each token goes to, reproducible from a seed.

An MoE kernel's speed depends on how many tokens each expert receives: the row tiles of its
grouped GEMMs are padded per expert, so skew changes both the work and its shape. Each routing
here is named, drawn from a seed, and gives every token ``top_k`` distinct experts:

* ``tuner``: FlashInfer's own profiling draw for the SM90 CuTe-DSL MoE (``CuteDslFusedMoESm90Runner.
  _profile_routing_pre_hook``): uniform random scores per (token, expert), top-k, seed 515. On the
  GPU it equals the draw the tuner timed its candidates with (``profkit.bench.moe`` checks that).
* ``balanced``: round robin, token t slot j -> expert (t * top_k + j) mod E: every expert gets the
  same number of rows, +-1.
* ``zipf-S``: expert popularity proportional to 1 / rank**S over a seeded ranking of the experts;
  each token draws top_k distinct experts with those weights (Gumbel top-k sampling).
* ``hot-H``: H hot experts carry half of the weight, the rest share the other half uniformly;
  drawn like ``zipf``.

:func:`imbalance` is the measured skew: max / mean tokens per expert over all E experts.
"""

from __future__ import annotations

import dataclasses
import math

import torch

TUNER_SEED = 515  # FlashInfer 0.7.2.post1 sm90_tuner.py: the profiling routing's generator seed
HOT_SHARE = 0.5  # hot-H: the hot experts' share of the routing weight


@dataclasses.dataclass(frozen=True)
class Routing:
    """One routing of ``tokens`` tokens: expert ids and normalized scales, each (tokens, top_k)."""

    name: str
    seed: int
    ids: torch.Tensor  # int32
    scales: torch.Tensor  # float32, rows sum to 1

    def imbalance(self, experts: int) -> float:
        return imbalance(self.ids, experts)


def default_routings(top_k: int) -> tuple[str, ...]:
    """The routings verify times by default: the tuner's, balanced, Zipf 0.3 (max/mean ~3 at 128 experts)
    and top_k // 2 hot experts (~12)."""
    return ("tuner", "balanced", "zipf-0.3", f"hot-{max(1, top_k // 2)}")


def route(name: str, tokens: int, experts: int, top_k: int, *, seed: int = 0, device="cpu") -> Routing:
    """The routing ``name`` (see the module docstring) for ``tokens`` tokens; same seed, same routing.

    The ``tuner`` routing always uses FlashInfer's seed 515 (``seed`` is ignored), as the tuner does.
    """
    if not 1 <= top_k <= experts:
        raise ValueError(f"top_k must be in 1..{experts} experts, got {top_k}")
    if name == "tuner":
        seed = TUNER_SEED
        scores = torch.rand(tokens, experts, device=device, generator=_generator(device, seed))
        ids = scores.topk(top_k, dim=-1).indices
    elif name == "balanced":
        ids = (torch.arange(tokens, device=device)[:, None] * top_k + torch.arange(top_k, device=device)) % experts
    else:
        weights = _weights(name, experts, seed, device)
        uniform = torch.rand(tokens, experts, device=device, generator=_generator(device, seed + 1))
        gumbel = -torch.log(-torch.log(uniform.clamp_min(1e-20)))
        ids = (weights.log() + gumbel).topk(top_k, dim=-1).indices
    logits = torch.randn(tokens, top_k, device=device, generator=_generator(device, seed + 2))
    return Routing(name, seed, ids.to(torch.int32), torch.softmax(logits, dim=-1).to(torch.float32))


def imbalance(ids: torch.Tensor, experts: int) -> float:
    """Max over mean tokens per expert, the mean over all ``experts`` (1.0 = perfectly even)."""
    counts = torch.bincount(ids.reshape(-1).long().cpu(), minlength=experts).double()
    return float(counts.max() / counts.mean())


def _weights(name: str, experts: int, seed: int, device) -> torch.Tensor:
    """Unnormalized per-expert routing weights of a skewed routing, in a seeded expert order."""
    kind, _, param = name.partition("-")
    try:
        value = float(param)
    except ValueError:
        value = math.nan
    order = torch.randperm(experts, generator=_generator("cpu", seed)).to(device)
    if kind == "zipf" and value > 0:
        by_rank = 1.0 / torch.arange(1, experts + 1, device=device, dtype=torch.float64) ** value
    elif kind == "hot" and value.is_integer() and 1 <= value < experts:
        hot = int(value)
        by_rank = torch.full((experts,), (1 - HOT_SHARE) / (experts - hot), device=device, dtype=torch.float64)
        by_rank[:hot] = HOT_SHARE / hot
    else:
        raise ValueError(f"unknown routing {name!r}: use tuner, balanced, zipf-S (S > 0) or hot-H (1 <= H < experts)")
    weights = torch.empty_like(by_rank)
    weights[order] = by_rank
    return weights


def _generator(device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)
