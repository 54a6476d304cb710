"""MoE-shaped tuning on a CPU: toy runners and TuningConfigs with the shape of FlashInfer's fused MoE.

Three families, each modelled on FlashInfer 0.7's own MoE tuning (read from its source, not copied):

* trtllm-gen MoE (``fused_moe/shared/tuning.py``): one ``choose_one`` per forward; several inputs
  share the token dimension through one ``DynamicTensorSpec``; a flat activation scale follows it
  through a ``ConstraintSpec``; buckets are a fixed hybrid tuple up to ``tune_max_num_tokens``;
  tactics are ``[tile_n, config]`` lists such as ``[32, 15]``.
* CUTLASS fused MoE (``fused_moe/core.py``): two ``choose_one`` calls per forward,
  ``trtllm::fused_moe::gemm1`` and ``gemm2``, the same runner with ``gemm_idx=1|2`` passed through
  to ``forward``; integer tactics, gemm1 ``[0, g1)`` and gemm2 ``[g1, g1 + g2)``.
* unified MoE layer (``fused_moe/runners.py``): the outer runner's ``get_valid_tactics`` ranks
  each GEMM with ``rank_tactics(k=2, gemm_idx=...)`` and offers the (gemm1, gemm2) pairs.

Run them inside :func:`profkit.testing.cpu_autotuner`; FlashInfer's profile generation,
constraints, caching and winner selection run for real.
"""

from __future__ import annotations

import torch
from flashinfer.autotuner import AutoTuner, ConstraintSpec, DynamicTensorSpec, TunableRunner, TuningConfig, autotune
from flashinfer.fused_moe.utils import get_hybrid_num_tokens_buckets, make_hybrid_bucket_mapper, map_to_hybrid_bucket_uncapped

HIDDEN = 64
INTERMEDIATE = 48  # fc1 is (E, 2 * INTERMEDIATE, HIDDEN); 2 * INTERMEDIATE != HIDDEN, as in most MoE layers
NUM_EXPERTS = 4
TOP_K = 2
SF_VEC = 32  # flat activation scale: num_tokens * HIDDEN // SF_VEC elements, as MXFP8's linear layout

# trtllm-gen input order (a subset of MoeRunnerInputs): what the dynamic spec and constraint index.
OUTPUT, TOPK_IDS, EXPERT_WEIGHTS, HIDDEN_STATES, HIDDEN_STATES_SCALE = range(5)


def _expert_ids(shapes, dtype, device):
    """Initializer for routed expert ids (random ids would index out of range)."""
    return torch.randint(0, NUM_EXPERTS, shapes, dtype=dtype, device=device)


def _flat_scale_numel(shapes) -> int:
    """ConstraintSpec callback: the flat scale's length follows hidden_states' token count."""
    return shapes[HIDDEN_STATES][0] * HIDDEN // SF_VEC


def trtllm_gen_config(tune_max_num_tokens: int = 32) -> TuningConfig:
    """Token dim of output, topk_ids, expert_weights and hidden_states tied; flat scale constrained."""
    tied = (OUTPUT, TOPK_IDS, EXPERT_WEIGHTS, HIDDEN_STATES)
    return TuningConfig(
        dynamic_tensor_specs=(DynamicTensorSpec(tied, (0,) * len(tied),
                                                get_hybrid_num_tokens_buckets(tune_max_num_tokens, 1),
                                                make_hybrid_bucket_mapper(tune_max_num_tokens)),),
        constraint_specs=(ConstraintSpec(HIDDEN_STATES_SCALE, 0, _flat_scale_numel),),
        tensor_initializers=((TOPK_IDS, _expert_ids),),
    )


def trtllm_gen_inputs(m: int) -> list[torch.Tensor]:
    return [torch.empty(m, HIDDEN), _expert_ids((m, TOP_K), torch.int32, "cpu"), torch.ones(m, TOP_K),
            torch.randn(m, HIDDEN), torch.ones(m * HIDDEN // SF_VEC)]


class ToyTrtllmGenMoERunner(TunableRunner):
    """``[tile_n, config]`` list tactics; ``failing`` tiles raise below ``min_tokens`` tokens."""

    def __init__(self, tactics=([8, 3], [16, 7], [32, 15], [64, 5]), failing=(64,), min_tokens=4):
        self.tactics = [list(t) for t in tactics]
        self.failing = tuple(failing)
        self.min_tokens = min_tokens

    def get_cache_key_extras(self, inputs) -> tuple:
        return (TOP_K, NUM_EXPERTS, HIDDEN, INTERMEDIATE)

    def get_valid_tactics(self, inputs, profile):
        return [list(t) for t in self.tactics]

    def forward(self, inputs, tactic=-1, do_preparation=False, **kwargs):
        out, topk_ids, weights, hidden, scale = inputs
        m = hidden.shape[0]
        # The real launcher checks these too: the tied dims and the constraint must agree.
        assert out.shape[0] == topk_ids.shape[0] == weights.shape[0] == m, "token dims differ"
        assert scale.numel() == m * HIDDEN // SF_VEC, "flat scale does not follow num_tokens"
        if tactic != -1 and tactic[0] in self.failing and m < self.min_tokens:
            raise RuntimeError(f"tile_N {tactic[0]} has no launcher for num_tokens={m}")
        return hidden * weights.sum(-1, keepdim=True)


def tune_trtllm_gen(m: int, runner: TunableRunner | None = None, op: str = "flashinfer::toy_trtllm_moe"):
    """One tuning call of a trtllm-gen-like MoE op at m tokens; returns (runner, tactic)."""
    with autotune(True):
        return AutoTuner.get().choose_one(op, [runner or ToyTrtllmGenMoERunner()], trtllm_gen_config(),
                                          trtllm_gen_inputs(m))


# -- CUTLASS fused MoE: gemm1 / gemm2 ------------------------------------------------------------
def cutlass_config(tune_max_num_tokens: int = 32) -> TuningConfig:
    """As ``MoERunner.refine_tuning_config``: input 0's token dim on capped hybrid buckets."""
    return TuningConfig(dynamic_tensor_specs=(DynamicTensorSpec((0,), (0,),
                                                                get_hybrid_num_tokens_buckets(tune_max_num_tokens),
                                                                make_hybrid_bucket_mapper(tune_max_num_tokens)),))


def cutlass_inputs(m: int) -> list:
    """``[input, fc1_weights, fc1_bias, fc2_weights, fc2_bias]`` (biases None, as without bias)."""
    return [torch.randn(m, HIDDEN), torch.randn(NUM_EXPERTS, 2 * INTERMEDIATE, HIDDEN), None,
            torch.randn(NUM_EXPERTS, HIDDEN, INTERMEDIATE), None]


class ToyCutlassMoERunner(TunableRunner):
    """One runner for both GEMMs: ``gemm_idx_for_tuning`` picks the tactic range, ``gemm_idx`` the GEMM.

    Tactic ``gemm1_failing`` raises from ``failing_from`` tokens on ("lacks the shared memory").
    """

    def __init__(self, gemm1_count=4, gemm2_count=3, gemm1_failing=2, failing_from=16):
        self.gemm1_count, self.gemm2_count = gemm1_count, gemm2_count
        self.gemm1_failing, self.failing_from = gemm1_failing, failing_from
        self.gemm_idx_for_tuning: int | None = None

    def get_cache_key_extras(self, inputs) -> tuple:
        return (torch.float32, torch.float32, torch.float32, TOP_K, 1, 1)

    def tactic_range(self, gemm_idx: int) -> range:
        if gemm_idx == 1:
            return range(self.gemm1_count)
        return range(self.gemm1_count, self.gemm1_count + self.gemm2_count)

    def get_valid_tactics(self, inputs, profile):
        stage = self.gemm_idx_for_tuning
        if stage in (1, 2):
            return list(self.tactic_range(stage))
        return list(range(self.gemm1_count + self.gemm2_count))

    def forward(self, inputs, tactic=-1, do_preparation=False, **kwargs):
        gemm_idx = kwargs["gemm_idx"]  # as the real MoERunner.forward: the profiler must pass it on
        if tactic != -1 and tactic not in self.tactic_range(gemm_idx):
            raise ValueError(f"tactic {tactic} is not a gemm{gemm_idx} tactic")
        x = inputs[0]
        if tactic == self.gemm1_failing and x.shape[0] >= self.failing_from:
            raise RuntimeError(f"GPU lacks the shared memory resources for tactic {tactic} (toy)")
        return x @ inputs[1][0].T if gemm_idx == 1 else x


def cutlass_fused_moe(runner: ToyCutlassMoERunner, inputs: list, config: TuningConfig | None = None):
    """The two ``choose_one`` calls of one CUTLASS MoE forward; returns (gemm1 tactic, gemm2 tactic)."""
    tuner, config = AutoTuner.get(), config or cutlass_config()
    tactics = []
    for gemm_idx in (1, 2):
        runner.gemm_idx_for_tuning = gemm_idx
        _, tactic = tuner.choose_one(f"trtllm::fused_moe::gemm{gemm_idx}", [runner], config, inputs,
                                     gemm_idx=gemm_idx)
        tactics.append(tactic)
    runner.gemm_idx_for_tuning = None
    return tuple(tactics)


def tune_cutlass(m: int, runner: ToyCutlassMoERunner | None = None):
    """One tuning forward (gemm1 then gemm2) at m tokens; returns (gemm1 tactic, gemm2 tactic)."""
    with autotune(True):
        return cutlass_fused_moe(runner or ToyCutlassMoERunner(), cutlass_inputs(m))


# -- unified MoE layer: rank_tactics per GEMM inside get_valid_tactics ---------------------------
class ToyUnifiedMoERunner(TunableRunner):
    """Compound ``(gemm1, gemm2)`` tactics from the top ``k`` of each GEMM, ranked by ``rank_tactics``."""

    def __init__(self, inner: ToyCutlassMoERunner | None = None, k: int = 2, op_prefix: str = "moe_toy_cutlass"):
        self.inner = inner or ToyCutlassMoERunner()
        self.k, self.op_prefix = k, op_prefix

    def get_valid_tactics(self, inputs, profile):
        tuner, stage_inputs = AutoTuner.get(), cutlass_inputs(inputs[0].shape[0])
        ranked = []
        try:
            for gemm_idx in (1, 2):
                self.inner.gemm_idx_for_tuning = gemm_idx
                ranked.append(tuner.rank_tactics(f"{self.op_prefix}_gemm{gemm_idx}", [self.inner], TuningConfig(),
                                                 stage_inputs, k=self.k, gemm_idx=gemm_idx))
        finally:
            self.inner.gemm_idx_for_tuning = None
        return [(int(a), int(b)) for a in ranked[0] for b in ranked[1]] or [-1]

    def forward(self, inputs, tactic=-1, do_preparation=False, **kwargs):
        gemm1, gemm2 = (-1, -1) if tactic == -1 else tactic
        stage_inputs = cutlass_inputs(inputs[0].shape[0])
        self.inner(stage_inputs, tactic=gemm1, gemm_idx=1)
        return self.inner(stage_inputs, tactic=gemm2, gemm_idx=2)


def tune_unified(m: int, runner: ToyUnifiedMoERunner | None = None, op: str = "moe_toy_cutlass"):
    """One tuning call of the unified layer's compound op at m tokens (bucketed as the layer does)."""
    config = TuningConfig(dynamic_tensor_specs=(DynamicTensorSpec((0,), (0,), (m,), make_hybrid_bucket_mapper(m)),))
    with autotune(True):
        return AutoTuner.get().choose_one(op, [runner or ToyUnifiedMoERunner()], config, [torch.randn(m, HIDDEN)])


# -- SM90 CuTe-DSL fused MoE: one choose_one, nested-tuple tactics -------------------------------
SM90_OP = "CuteDslFusedMoE::run_moe_sm90::Swiglu"
SM90_DEFAULT = (128, ((128, 64), 1), ((128, 64), (1, 1), False))


def sm90_tactics(tile_sizes=(64, 128), gemm1_ns=(128, 64), gemm2_ns=(128, 64)) -> list:
    """Nested tactics shaped as FlashInfer's SM90 MoE ones: (tile, ((tile, n1), swizzle), ((tile, n2), cluster, raster))."""
    return [(t, ((t, n1), 1), ((t, n2), (1, 1), False)) for t in tile_sizes for n1 in gemm1_ns for n2 in gemm2_ns
            if (t, ((t, n1), 1), ((t, n2), (1, 1), False)) != SM90_DEFAULT]


class ToySm90MoERunner(TunableRunner):
    """Shaped like ``CuteDslFusedMoESm90Runner``: inputs (x, expert ids, scales, w1, w2, out), the token
    dim of 0, 1, 2 and 5 on FlashInfer's hybrid buckets, a routing pre-hook, cold L2 and CUDA graphs;
    tactic -1 runs :data:`SM90_DEFAULT`. Tactics with a 64-row tile raise from ``failing_from`` tokens
    (``failing_from=0``: every tactic but -1 raises, as when no kernel builds)."""

    def __init__(self, tactics=None, failing_from: int | None = None):
        self.tactics = list(tactics or sm90_tactics())
        self.failing_from = failing_from
        spec = DynamicTensorSpec((0, 1, 2, 5), (0, 0, 0, 0), get_hybrid_num_tokens_buckets,
                                 map_to_hybrid_bucket_uncapped)
        self.tuning_config = TuningConfig(dynamic_tensor_specs=(spec,), inputs_pre_hook=self._routing,
                                          tensor_initializers=((1, _expert_ids),), use_cold_l2_cache=True,
                                          use_cuda_graph=True)

    def _routing(self, inputs):
        out = list(inputs)
        out[1] = torch.rand(inputs[1].shape[0], NUM_EXPERTS, generator=torch.Generator().manual_seed(515)) \
            .topk(TOP_K, dim=-1).indices.to(inputs[1].dtype)
        return out

    def get_cache_key_extras(self, inputs) -> tuple:
        return ("input_dtype", str(inputs[0].dtype), "use_fused_finalize", True)

    def get_valid_tactics(self, inputs, profile):
        return [-1, *self.tactics]

    def forward(self, inputs, tactic=-1, do_preparation=False, **kwargs):
        x, ids, scales, w1, w2, out = inputs
        tile = SM90_DEFAULT[0] if tactic in (None, -1) else tactic[0]
        if self.failing_from is not None and tactic != -1 and (tile == 64 or self.failing_from == 0) \
                and x.shape[0] >= self.failing_from:
            raise ValueError(f"SM90 MoE tactic {tactic} cannot be implemented for {x.shape[0]} tokens (toy)")
        out.copy_(x * scales.sum(-1, keepdim=True))
        return out


def sm90_inputs(m: int) -> list[torch.Tensor]:
    """(x, expert ids, scales, w1 (E, 2I, H), w2 (E, H, I), out) at m tokens."""
    return [torch.randn(m, HIDDEN), _expert_ids((m, TOP_K), torch.int32, "cpu"), torch.full((m, TOP_K), 1 / TOP_K),
            torch.randn(NUM_EXPERTS, 2 * INTERMEDIATE, HIDDEN), torch.randn(NUM_EXPERTS, HIDDEN, INTERMEDIATE),
            torch.empty(m, HIDDEN)]


def sm90_moe(m: int, runner: ToySm90MoERunner | None = None, inputs: list | None = None):
    """One call of the SM90-like MoE op at m tokens through the real ``choose_one``; returns (runner, tactic)."""
    runner = runner or ToySm90MoERunner()
    return AutoTuner.get().choose_one(SM90_OP, [runner], runner.tuning_config, inputs or sm90_inputs(m))


def tune_sm90(m: int, runner: ToySm90MoERunner | None = None):
    """A tuning call of the SM90-like MoE at m tokens: tunes every hybrid bucket up to m."""
    with autotune(True):
        return sm90_moe(m, runner)
