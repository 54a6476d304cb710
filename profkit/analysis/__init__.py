"""Pure analysis of profkit tables: frames in, frames out (no I/O, no plotting, no global state).

Decisions: :func:`winners`, :func:`noise`, :func:`speedup_vs_default`, :func:`winner_card`.
Tactics: :func:`decode_tactics`, :func:`register_decoder`.
Cost: :func:`tuning_breakdown`, :func:`runner_cost`, :func:`tuning_value`, :func:`worth_tuning`.
Comparisons: :func:`winner_stability`, :func:`diff_winners`, :func:`rank_divergence`, :func:`first_runs`,
:func:`repeat_diff`, :func:`cache_agreement`. Step: :mod:`profkit.analysis.step`. Everything the report
shows, computed once: :func:`profkit.analysis.results.analyse`; the recommendation:
:mod:`profkit.analysis.recommend`.
End to end: :func:`engine_batches`, :func:`weighted_speedup`, :func:`e2e_delta`,
:func:`kernel_vs_e2e`, :func:`assign_bucket`. Outside tuning: :func:`between_buckets`.
Rows and shapes: :func:`default_rows`, :func:`flashinfer_rows`, :func:`shapes_of`, :func:`gemm_shape`,
:func:`moe_shape`.
Every frame-returning function returns an empty frame with the same columns when nothing matches.
"""

from profkit.analysis._frames import (DEFAULT_NOISE_PCT, default_rows, flashinfer_rows, gemm_shape, moe_shape,
                                     shapes_of)
from profkit.analysis.card import CandidateLine, WinnerCard, winner_card
from profkit.analysis.compare import (cache_agreement, diff_winners, first_runs, rank_divergence, repeat_diff,
                                      winner_stability)
from profkit.analysis.cost import runner_cost, tuning_breakdown, tuning_value, worth_tuning
from profkit.analysis.decisions import noise, speedup_vs_default, winners
from profkit.analysis.engine import assign_bucket, e2e_delta, engine_batches, kernel_vs_e2e, weighted_speedup
from profkit.analysis.op_timings import between_buckets
from profkit.analysis.tactics import decode_tactic, decode_tactics, register_decoder, tactic_label, tactic_words

__all__ = [
    "DEFAULT_NOISE_PCT", "CandidateLine", "WinnerCard", "assign_bucket", "between_buckets", "cache_agreement",
    "decode_tactic", "tactic_words", "first_runs", "repeat_diff",
    "decode_tactics", "default_rows", "diff_winners", "e2e_delta", "engine_batches", "flashinfer_rows", "gemm_shape",
    "kernel_vs_e2e", "moe_shape", "noise",
    "rank_divergence", "register_decoder", "runner_cost", "shapes_of", "speedup_vs_default", "tactic_label",
    "tuning_breakdown", "tuning_value", "weighted_speedup", "winner_card", "winner_stability", "winners",
    "worth_tuning",
]
