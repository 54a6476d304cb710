"""profkit.analysis: hand-made frames with exact expectations, plus numbers from the shipped H200 data."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import profkit
from profkit import analysis, schema
from profkit.errors import ProfkitError, SchemaError

from conftest import DATA

GOLDEN = Path(__file__).resolve().parent / "data" / "golden"
P8 = "((8, 64), (64, 32))"
P16 = "((16, 64), (64, 32))"


def cands(*rows, **common) -> pd.DataFrame:
    base = {"run_id": "r1", "call": 1, "op": "gemm", "profile": P8, "bucket": 8, "source": "flashinfer",
            "status": "ok", "timing": "eager, hot L2, mean of 10", "host_s": 0.01, "jit_s": 0.0}
    out = []
    for i, row in enumerate(rows):
        r = {**base, **common, "seq": i + 1, **row}
        if r["profile"] == P16:
            r["bucket"] = 16
        out.append(r)
    return schema.frame("candidates", out)


def test_winner_first_argmin_runner_up_gap_and_default():
    c = cands({"runner": "A", "tactic": "0", "time_ms": 0.010}, {"runner": "B", "tactic": "[0, []]", "time_ms": 0.008},
              {"runner": "A", "tactic": "1", "time_ms": 0.008}, {"runner": "A", "tactic": "2", "time_ms": 0.0081},
              {"runner": "B", "tactic": "3", "time_ms": float("nan"), "status": "failed"},
              {"runner": "A", "tactic": "-1", "time_ms": 0.009, "source": "default"})
    w = analysis.winners(c)
    assert len(w) == 1
    row = w.iloc[0]
    # Tie at 0.008: FlashInfer's strict < keeps the first measured (seq 2).
    assert (row["runner"], row["tactic"], row["time_ms"]) == ("B", "[0, []]", 0.008)
    assert (row["runner_up_runner"], row["runner_up_tactic"], row["runner_up_ms"]) == ("A", "1", 0.008)
    assert row["gap_ms"] == 0 and row["gap_pct"] == 0
    assert (row["n_candidates"], row["n_failed"]) == (4, 1)
    assert row["n_within_noise"] == 2  # A:1 and A:2 are within the 2% threshold
    assert (row["noise_pct"], row["noise_source"]) == (2.0, "threshold")
    assert (row["default_runner"], row["default_ms"], row["shape"]) == ("A", 0.009, "N=32 K=64")


def test_noise_from_repeats_and_threshold_otherwise():
    rows = []
    for run, scale in (("r1", 1.00), ("r2", 1.01), ("r3", 0.99)):
        rows += [{"run_id": run, "runner": "A", "tactic": "0", "time_ms": 0.010 * scale},
                 {"run_id": run, "runner": "A", "tactic": "1", "time_ms": 0.020 * scale}]
    rows.append({"run_id": "r1", "profile": P16, "runner": "A", "tactic": "0", "time_ms": 0.03})
    n = analysis.noise(cands(*rows))
    assert list(n["bucket"]) == [8, 16]
    assert list(n["noise_source"]) == ["repeats", "threshold"]
    assert list(n["n_runs"]) == [3, 1] and list(n["n_pairs"]) == [2, 0]
    assert n["noise_pct"].iloc[0] == pytest.approx(200 * 0.01)  # 2 x the relative std of (1, 1.01, 0.99)
    assert n["noise_pct"].iloc[1] == 2.0
    assert analysis.noise(cands(*rows), rel_threshold=0.05)["noise_pct"].iloc[1] == 5.0


def test_speedup_flags_slower_and_within_noise():
    c = cands({"runner": "A", "tactic": "0", "time_ms": 0.0101},
              {"runner": "A", "tactic": "-1", "time_ms": 0.0100, "source": "default"},
              {"profile": P16, "runner": "A", "tactic": "0", "time_ms": 0.010},
              {"profile": P16, "runner": "A", "tactic": "-1", "time_ms": 0.020, "source": "default"})
    s = analysis.speedup_vs_default(c)
    assert list(s["bucket"]) == [8, 16]
    assert s["speedup"].tolist() == pytest.approx([0.0100 / 0.0101, 2.0])
    assert s["slower_than_default"].tolist() == [True, False]
    # One run and no repeats: the winner and the default are one timing each, so the rule cannot
    # tell a change from run-to-run drift (docs/comparison_rule.md); nothing is beyond noise.
    assert s["verdict"].tolist() == ["not_measurable", "not_measurable"]
    assert s["within_noise"].tolist() == [True, True]
    assert s["saved_us"].tolist() == pytest.approx([-0.1, 10.0])
    # With a spread measured by repeated runs (noise_pct 2% = two relative sds): +1% is within it, 2x is not.
    measured = analysis.noise(c).assign(noise_pct=2.0, noise_source="repeats")
    r = analysis.speedup_vs_default(c, noise=measured)
    assert r["verdict"].tolist() == ["within_noise", "faster"] and r["within_noise"].tolist() == [True, False]
    assert r["effect"].tolist() == pytest.approx([0.01, -0.5])
    assert (r["effect_lo"] < r["effect"]).all() and (r["effect"] < r["effect_hi"]).all()
    # The same from a winners table (FlashInfer's decisions + default_time_ms).
    w = schema.frame("winners", [{"run_id": "r1", "op": "gemm", "profile": P8, "bucket": 8, "runner": "A",
                                  "tactic": "0", "time_ms": 0.0101, "default_time_ms": 0.0100}])
    t = analysis.speedup_vs_default(w)
    assert t["speedup"].tolist() == pytest.approx([0.0100 / 0.0101]) and t["slower_than_default"].tolist() == [True]


def test_empty_inputs_give_empty_frames_with_columns():
    empty = schema.empty("candidates")
    for fn in (analysis.winners, analysis.noise, analysis.speedup_vs_default, analysis.runner_cost,
               analysis.rank_divergence):
        out = fn(empty)
        assert out.empty and len(out.columns) > 3, fn.__name__
    assert analysis.tuning_breakdown(schema.empty("tuning")).empty
    assert analysis.winner_stability(analysis.winners(empty)).empty
    assert analysis.between_buckets(schema.empty("op_timings")).empty


def test_inputs_are_not_modified():
    c = cands({"runner": "A", "tactic": "0", "time_ms": 0.01}, {"runner": "A", "tactic": "-1", "time_ms": 0.02,
                                                                "source": "default"})
    before = c.copy()
    analysis.speedup_vs_default(c)
    analysis.decode_tactics(c)
    pd.testing.assert_frame_equal(c, before)


def test_missing_columns_are_named():
    with pytest.raises(SchemaError, match="missing columns time_ms"):
        analysis.winners(cands({"runner": "A", "tactic": "0", "time_ms": 0.1}).drop(columns="time_ms"))


def test_decode_tactics_registry_and_fallback():
    frame = pd.DataFrame({"runner": ["CublasFp8GemmRunner", "CudnnBf16GemmRunner", "CudnnFp8GemmRunner",
                                     "CutlassFooRunner", "MysteryRunner", "CublasFp8GemmRunner"],
                          "tactic": ["3", "[7, [[9, 2], [12, 21]]]", "[0, []]", "[[128, 64, 64], [2, 1, 1], 0]",
                                     "[1, 2]", "-1"]})
    d = analysis.decode_tactics(frame)
    assert d["tactic_kind"].tolist() == ["index", "engine_knobs", "engine_knobs", "tiles", "raw", "default"]
    assert d["tactic_index"].iloc[0] == 3
    assert d["tactic_engine"].iloc[1] == 7 and d["tactic_knobs"].iloc[1] == "SPLIT_K_SLC=2, KERNEL_CFG=21"
    assert d["tactic_desc"].iloc[2] == "e0"
    assert (d["tactic_tile"].iloc[3], d["tactic_cluster"].iloc[3]) == ("128x64x64", "2x1x1")
    assert d["tactic_desc"].iloc[4] == "[1, 2]"
    analysis.register_decoder(r"^MysteryRunner$", lambda v: {"tactic_kind": "tiles", "tactic_desc": f"m{v[0]}"})
    assert analysis.decode_tactics(frame)["tactic_desc"].iloc[4] == "m1"


def tuning_rows():
    common = {"run_id": "r1", "call": 1, "op": "gemm", "jit_s": 0.0, "n_candidates": 3, "n_failed": 0}
    return schema.frame("tuning", [
        {**common, "kind": "profile", "profile": P8, "bucket": 8, "wall_s": 2.0, "measure_s": 0.5, "prep_s": 1.2},
        {**common, "kind": "profile", "profile": P16, "bucket": 16, "wall_s": 1.0, "measure_s": 0.5, "prep_s": 0.4,
         "jit_s": 0.05},
        {**common, "kind": "call", "profile": "", "wall_s": 3.1, "measure_s": 1.0, "prep_s": 1.6, "n_candidates": 6},
    ])


def test_tuning_breakdown_bucket_and_call():
    b = analysis.tuning_breakdown(tuning_rows())
    assert b["bucket"].tolist() == [8, 16] and b["shape"].tolist() == ["N=32 K=64"] * 2
    assert b["other_s"].tolist() == pytest.approx([0.3, 0.05])
    c = analysis.tuning_breakdown(tuning_rows(), by="call")
    assert len(c) == 1 and c["other_s"].iloc[0] == pytest.approx(0.5) and c["shape"].iloc[0] == "N=32 K=64"
    with pytest.raises(ProfkitError, match="by must be"):
        analysis.tuning_breakdown(tuning_rows(), by="runner")


def test_tuning_value_and_worth():
    c = cands({"runner": "A", "tactic": "0", "time_ms": 0.010}, {"runner": "A", "tactic": "-1", "time_ms": 0.012,
                                                                 "source": "default"},
              {"profile": P16, "runner": "A", "tactic": "0", "time_ms": 0.020},
              {"profile": P16, "runner": "A", "tactic": "-1", "time_ms": 0.021, "source": "default"})
    s = analysis.speedup_vs_default(c)
    v = analysis.tuning_value(s, tuning_rows())
    assert v["cum_tuning_s"].tolist() == pytest.approx([2.0, 3.0])
    assert v["cum_saved_us"].tolist() == pytest.approx([2.0, 3.0])
    w = analysis.worth_tuning(s, tuning_rows())
    assert len(w) == 1
    row = w.iloc[0]
    assert row["tuning_s"] == pytest.approx(3.1) and row["saved_us_per_pass"] == pytest.approx(3.0)
    assert row["break_even_passes"] == pytest.approx(3.1e6 / 3.0)
    assert row["saved_pct_per_pass"] == pytest.approx(100 * 3.0 / 33.0)


def test_runner_cost():
    c = cands({"runner": "A", "tactic": "0", "time_ms": 0.01, "host_s": 0.2},
              {"runner": "A", "tactic": "1", "time_ms": float("nan"), "host_s": 0.3, "status": "failed"},
              {"runner": "B", "tactic": "0", "time_ms": 0.02, "host_s": 0.1, "jit_s": 0.05})
    r = analysis.runner_cost(c)
    assert r["runner"].tolist() == ["A", "B"]
    assert r["n_candidates"].tolist() == [2, 1] and r["n_failed"].tolist() == [1, 0]
    assert r["measure_s"].tolist() == pytest.approx([0.5, 0.05]) and r["best_ms"].tolist() == pytest.approx([0.01, 0.02])


def three_runs():
    rows = []
    for run, rank, fast in (("r1", 0, "0"), ("r2", 1, "0"), ("r3", 2, "1")):
        rows += [{"run_id": run, "rank": rank, "runner": "A", "tactic": "0", "time_ms": 0.0100 if fast == "0" else 0.0102},
                 {"run_id": run, "rank": rank, "runner": "A", "tactic": "1", "time_ms": 0.0101 if fast == "0" else 0.0100}]
    return cands(*rows)


def test_winner_stability_flip_rate_and_regret():
    c = three_runs()
    s = analysis.winner_stability(analysis.winners(c), candidates=c)
    row = s.iloc[0]
    assert (row["n_tunings"], row["n_distinct"]) == (3, 2)
    assert (row["modal_runner"], row["modal_tactic"], row["modal_share"]) == ("A", "0", pytest.approx(2 / 3))
    assert row["flip_rate"] == pytest.approx(2 / 3)  # 2 of the 3 run pairs disagree
    assert row["winners"] == "A:0 x2; A:1 x1"
    assert row["regret_pct"] == pytest.approx(2.0)  # r3 running A:0 (0.0102) instead of A:1 (0.0100)
    assert not analysis.winner_stability(analysis.winners(c))["regret_pct"].notna().any()


def test_rank_divergence():
    d = analysis.rank_divergence(three_runs())
    row = d.iloc[0]
    assert (row["ranks"], row["n_ranks"], row["agree"]) == ("0,1,2", 3, False)
    assert row["winners"] == "0: A:0 | 1: A:0 | 2: A:1"
    assert row["regret_pct"] == pytest.approx(2.0)
    assert analysis.rank_divergence(three_runs().assign(rank=pd.NA)).empty


def test_diff_winners_changes_and_cost():
    a = schema.frame("winners", [{"op": "gemm", "profile": P8, "bucket": 8, "runner": "A", "tactic": "0",
                                  "time_ms": 0.010, "run_id": "r1"},
                                 {"op": "gemm", "profile": P16, "bucket": 16, "runner": "A", "tactic": "0",
                                  "time_ms": 0.020, "run_id": "r1"}])
    b = schema.frame("winners", [{"op": "gemm", "profile": P8, "bucket": 8, "runner": "B", "tactic": "5",
                                  "time_ms": 0.011, "run_id": "r2"}])
    d = analysis.diff_winners(a, b)
    assert d["change"].tolist() == ["runner", "only_a"]
    assert d["cost_us"].iloc[0] == pytest.approx(1.0) and d["priced_on"].iloc[0] == "own runs"
    priced = analysis.diff_winners(a, b, candidates=cands({"runner": "A", "tactic": "0", "time_ms": 0.010},
                                                          {"runner": "B", "tactic": "5", "time_ms": 0.0105}))
    assert priced["cost_pct"].iloc[0] == pytest.approx(5.0) and priced["priced_on"].iloc[0] == "candidates"
    with pytest.raises(ProfkitError, match="pass one run"):
        analysis.diff_winners(pd.concat([a, a.assign(run_id="r9")]), b)


# -- the vectorised comparisons give what their per-group loops gave -------------------------------
# winner_stability, rank_divergence and diff_winners' pricing once looped in Python per bucket (4 ms
# each: minutes for a capture of 250 ops); these loops are the old code, kept as the reference.
def _loop_regret(rows, prices):
    if prices is None or len(rows) < 2:
        return (np.nan, np.nan) if prices is None else (0.0, 0.0)
    picks = list(rows[["runner", "tactic"]].drop_duplicates().itertuples(index=False))
    worst_pct, worst_us = 0.0, 0.0
    for row in rows.itertuples(index=False):
        for runner, tactic in picks:
            t = prices.get((row.run_id, row.op, row.profile, runner, tactic), np.nan)
            if np.isfinite(t) and np.isfinite(row.time_ms) and row.time_ms > 0:
                worst_pct = max(worst_pct, 100.0 * (t / row.time_ms - 1.0))
                worst_us = max(worst_us, 1000.0 * (t - row.time_ms))
    return worst_pct, worst_us


def _loop_verdict(regret_pct, rows):
    from profkit.analysis.decisions import tuner_ratio_sd
    from profkit.analysis.verdict import compare_values

    if not np.isfinite(regret_pct):
        return pd.NA, np.nan
    sd = tuner_ratio_sd(rows)
    rule = compare_values([1.0 + regret_pct / 100.0], [1.0],
                          ratio_sd=float(np.nanmax(sd)) if np.isfinite(sd).any() else np.nan).iloc[0]
    return str(rule["verdict"]), float(rule["detectable"])


def _loop_stability(winners, candidates=None):
    from profkit.analysis import compare

    w = compare._as_winners(winners, "winners").sort_values(["run_id"], kind="stable")
    prices = compare._price_table(candidates)
    rows = []
    for key, group in w.groupby(compare._KEY, dropna=False, observed=True, sort=False):
        labels = list(zip(group["runner"].astype(str), group["tactic"].astype(str)))
        counts: dict = {}
        for label in labels:
            counts[label] = counts.get(label, 0) + 1
        modal = max(counts, key=lambda k: (counts[k], -labels.index(k)))
        n = len(labels)
        times = group["time_ms"].to_numpy(dtype=float)
        finite = times[np.isfinite(times)]
        band = group["noise_pct"].to_numpy(dtype=float)
        regret_pct, regret_us = _loop_regret(group, prices)
        verdict, detectable = _loop_verdict(regret_pct, group)
        rows.append({
            **dict(zip(compare._KEY, key)), "n_tunings": n, "n_distinct": len(counts), "modal_runner": modal[0],
            "modal_tactic": modal[1], "modal_share": counts[modal] / n,
            "flip_rate": 1.0 - sum(c * (c - 1) for c in counts.values()) / (n * (n - 1)) if n >= 2 else np.nan,
            "winners": "; ".join(f"{r}:{t} x{c}" for (r, t), c in sorted(counts.items(), key=lambda kv: -kv[1])),
            "spread_pct": 100.0 * (finite.max() / finite.min() - 1.0) if len(finite) >= 2 else np.nan,
            "regret_pct": regret_pct, "regret_us": regret_us,
            "noise_pct": float(np.nanmax(band)) if np.isfinite(band).any() else analysis.DEFAULT_NOISE_PCT,
            "within_noise": verdict != "slower" if verdict is not pd.NA else pd.NA, "verdict": verdict,
            "detectable": detectable})
    out = schema.conform_columns(pd.DataFrame(rows), compare.STABILITY_COLUMNS)
    return out.sort_values(["op", "shape", "bucket", "profile"], kind="stable").reset_index(drop=True)


def _loop_ranks(candidates, noise=None):
    from profkit.analysis import compare

    ranked = candidates[candidates["rank"].notna().to_numpy(dtype=bool)]
    w = analysis.winners(ranked, noise=noise)
    prices = compare._price_table(ranked)
    rows = []
    for key, group in w.groupby(compare._KEY, dropna=False, observed=True, sort=False):
        ranks = sorted(int(r) for r in group["rank"].dropna().unique())
        if len(ranks) < 2:
            continue
        group = group.sort_values(["rank", "run_id"], kind="stable")
        picks = set(zip(group["runner"].astype(str), group["tactic"].astype(str)))
        regret_pct, regret_us = _loop_regret(group, prices)
        verdict, detectable = _loop_verdict(regret_pct, group)
        rows.append({
            **dict(zip(compare._KEY, key)), "ranks": ",".join(map(str, ranks)), "n_ranks": len(ranks),
            "n_distinct": len(picks), "agree": len(picks) == 1,
            "winners": " | ".join(f"{int(r)}: {ru}:{t}" for r, ru, t in
                                  zip(group["rank"], group["runner"], group["tactic"])),
            "regret_pct": regret_pct, "regret_us": regret_us, "noise_pct": float(group["noise_pct"].max()),
            "within_noise": verdict != "slower" if verdict is not pd.NA else pd.NA, "verdict": verdict,
            "detectable": detectable})
    out = schema.conform_columns(pd.DataFrame(rows), compare.RANK_COLUMNS)
    return out.sort_values(["op", "shape", "bucket", "profile"], kind="stable").reset_index(drop=True)


def awkward_winners() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Decisions with count ties, runs out of order, NA buckets and runners, inf and zero times, unpriced picks."""
    s = lambda *v: pd.array(v, dtype="string")  # noqa: E731
    w = pd.DataFrame({
        "run_id": s("r3", "r1", "r2", "r4", "r1", "r2", "r1", "r2", "r1", "r2", "r3"),
        "op": s(*["gemm"] * 11),
        "profile": s(P8, P8, P8, P8, P16, P16, P8, P8, P16, P16, P16),
        "bucket": pd.array([8, 8, 8, 8, 16, 16, None, None, 16, 16, 16], dtype="Int64"),
        "shape": s(*["N=32 K=64"] * 6, None, None, "x", "x", "x"),
        "runner": s("B", "A", "B", "A", "A", "A", "A", None, "A", "A", "B"),
        "tactic": s("1", "0", "1", "0", "0", "1", "0", "0", "0", "0", "2"),
        "time_ms": [0.010, 0.011, np.inf, 0.0105, 0.020, 0.0, 0.5, 0.4, np.nan, 0.03, 0.031],
        "noise_pct": [1.0, np.nan, 3.0, 0.5, np.nan, np.nan, 2.0, 1.0, 4.0, np.nan, 2.5],
        "noise_source": s("repeats", None, "repeats", "threshold", None, None, "repeats", "repeats",
                          "repeats", "threshold", "repeats"),
    })
    c = cands(*[{"run_id": r, "profile": p, "runner": ru, "tactic": t, "time_ms": ms} for r, p, ru, t, ms in (
        ("r1", P8, "A", "0", 0.011), ("r1", P8, "B", "1", 0.0108), ("r2", P8, "A", "0", 0.0100),
        ("r3", P8, "A", "0", 0.0125), ("r3", P8, "B", "1", 0.010), ("r4", P8, "B", "1", np.inf),
        ("r2", P16, "A", "0", 0.019), ("r1", P16, "A", "1", 0.025), ("r2", P16, "B", "2", 0.02),
        ("r3", P16, "A", "0", 0.05), ("r3", P16, "A", "0", 0.04))])
    return w, c


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # the loop's spread over a zero time
@pytest.mark.parametrize("priced", [True, False])
def test_winner_stability_equals_the_loop_on_awkward_rows(priced):
    w, c = awkward_winners()
    c = c if priced else None
    got = analysis.winner_stability(w, candidates=c)
    pd.testing.assert_frame_equal(got, _loop_stability(w, c), check_exact=True)
    assert got["winners"].iloc[0] == "A:0 x2; B:1 x2"  # a tie: the first in run order leads
    assert got["modal_runner"].iloc[0] == "A"


def test_winner_stability_and_rank_divergence_equal_the_loops_on_shipped_repeats(repeats):
    c = repeats.candidates
    w = analysis.winners(c)
    for got, want in ((analysis.winner_stability(w, candidates=c), _loop_stability(w, c)),
                      (analysis.winner_stability(repeats.winners, candidates=c), _loop_stability(repeats.winners, c)),
                      (analysis.rank_divergence(c), _loop_ranks(c))):
        assert len(got) >= 40
        pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_diff_winners_prices_equal_lookups_one_by_one():
    w, c = awkward_winners()
    a = w[w["run_id"] == "r1"].drop_duplicates(["op", "profile"])
    b = w[w["run_id"] == "r2"].drop_duplicates(["op", "profile"])
    d = analysis.diff_winners(a, b, candidates=c)
    per_pick = c.groupby(["run_id", "op", "profile", "runner", "tactic"], observed=True)["time_ms"].min()
    per_pick = per_pick[np.isfinite(per_pick)].groupby(level=["op", "profile", "runner", "tactic"]).mean()
    for row in d.itertuples():
        ta = per_pick.get((row.op, row.profile, row.runner_a, row.tactic_a), np.nan)
        tb = per_pick.get((row.op, row.profile, row.runner_b, row.tactic_b), np.nan)
        priced = row.change not in ("only_a", "only_b") and np.isfinite(ta) and np.isfinite(tb)
        assert (row.priced_on == "candidates") == priced
        if priced:
            assert row.cost_us == 1000.0 * (tb - ta)


def serving_pair():
    common = {"engine": "sglang", "max_concurrency": 512, "successful_requests": 2560,
              "total_input_tokens": 2621440, "total_output_tokens": 2621440}
    return schema.frame("bench", [
        {**common, "label": "main", "autotune": False, "output_tok_s": 16225.25, "mean_ttft_ms": 2632.67,
         "mean_itl_ms": 28.98},
        {**common, "label": "pr", "autotune": True, "output_tok_s": 18950.11, "mean_ttft_ms": 2658.05,
         "mean_itl_ms": 24.43}])


def test_assign_bucket_round_up_and_clamp():
    buckets = [1, 2, 4, 512, 768, 4096]
    assert analysis.assign_bucket([1, 3, 333, 600, 5000], buckets).tolist() == [1, 4, 512, 768, 4096]
    assert analysis.assign_bucket([3, 600, 0], buckets, round_up=False).tolist() == [2, 512, 1]


def test_engine_batches_and_e2e_delta_of_the_seed_pair():
    b = analysis.engine_batches(serving_pair(), prefill_chunk=8192)
    assert b["phase"].tolist() == ["decode", "prefill"] * 2
    assert b["m"].tolist()[:2] == [512, 8192] and b["calls"].iloc[0] == pytest.approx(5120.0)
    d = analysis.e2e_delta(serving_pair())
    got = dict(zip(d["metric"], d["improvement_pct"]))
    assert got["output_tok_s"] == pytest.approx(16.79, abs=0.01)       # the PR's "+16.8%"
    assert got["mean_itl_ms"] == pytest.approx(100 * (28.98 / 24.43 - 1))
    assert got["mean_ttft_ms"] < 0                                      # TTFT unchanged (slightly worse)
    with pytest.raises(ProfkitError, match="expected one serving row with label 'x'"):
        analysis.e2e_delta(serving_pair(), baseline="x")


def test_weighted_speedup_and_kernel_vs_e2e():
    c = cands({"profile": "((512, 64), (64, 32))", "bucket": 512, "runner": "A", "tactic": "0", "time_ms": 0.010},
              {"profile": "((512, 64), (64, 32))", "bucket": 512, "runner": "A", "tactic": "-1", "time_ms": 0.012,
               "source": "default"},
              {"profile": "((4096, 64), (64, 32))", "bucket": 4096, "runner": "A", "tactic": "0", "time_ms": 0.020},
              {"profile": "((4096, 64), (64, 32))", "bucket": 4096, "runner": "A", "tactic": "-1", "time_ms": 0.040,
               "source": "default"})
    s = analysis.speedup_vs_default(c)
    w = analysis.weighted_speedup(s, analysis.engine_batches(serving_pair().iloc[[1]], prefill_chunk=8192))
    assert w["phase"].tolist() == ["decode", "prefill", "total"]
    assert w["bucket"].tolist()[:2] == [512, 4096] and w["clamped"].tolist() == [False, True, True]
    assert w["speedup"].iloc[1] == 1.0  # M=8192 is beyond the tuned range: the default runs, bucket 4096's 2x is not had
    decode_w, prefill_w = 5120 * 0.012, 320 * 0.040 * 2
    assert w["speedup"].iloc[2] == pytest.approx((decode_w + prefill_w) / (decode_w / 1.2 + prefill_w))
    k = analysis.kernel_vs_e2e(s, serving_pair(), prefill_chunk=8192)
    assert k["kind"].tolist()[0] == "kernel" and "decode M=512 -> bucket 512" in k["note"].iloc[0]
    assert k["improvement_pct"].iloc[0] == pytest.approx(100 * (w["speedup"].iloc[2] - 1))


def test_between_buckets():
    t = schema.frame("op_timings", [
        {"op": "gemm", "n": 32, "k": 64, "m": m, "bucket": b, "state": state, "runner": r, "tactic": tac,
         "time_ms": ms, "time_ms_p10": ms * 0.99, "time_ms_p90": ms * 1.01, "run_id": "r1"}
        for m, b, state, r, tac, ms in ((8, 8, "untuned", "A", "-1", 0.012), (8, 8, "tuned", "A", "0", 0.010),
                                        (5, 8, "untuned", "A", "-1", 0.012), (5, 8, "tuned", "B", "-1", 0.0121))])
    s = analysis.speedup_vs_default(cands({"runner": "A", "tactic": "0", "time_ms": 0.010},
                                          {"runner": "A", "tactic": "-1", "time_ms": 0.0125, "source": "default"}))
    b = analysis.between_buckets(t, speedups=s)
    assert b["m"].tolist() == [5, 8] and b["at_bucket"].tolist() == [False, True]
    assert b["speedup"].tolist() == pytest.approx([0.012 / 0.0121, 1.2])
    assert b["within_noise"].tolist() == [True, False]
    assert b["config_applied"].tolist() == [False, True]
    assert b["bucket_speedup"].tolist() == pytest.approx([1.25, 1.25])


# -- the card -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fp8():
    return profkit.load(DATA / "h200" / "fp8")


@pytest.fixture(scope="module")
def repeats(fp8):
    return profkit.concat([fp8] + [profkit.load(DATA / "h200" / f"fp8-repeat-r{i}") for i in (1, 2, 3)])


def test_winner_card_matches_golden(fp8, repeats):
    card = analysis.winner_card(fp8.candidates, op="fp8_gemm", bucket=128, shape="N=4096 K=4096",
                                tuning=fp8.tuning, runs=fp8.runs, noise=analysis.noise(repeats.candidates))
    assert card.winner.runner == "CublasFp8GemmRunner" and card.winner.tactic == "3"
    assert card.speedup == pytest.approx(card.default_ms / card.winner.time_ms)
    assert card.noise_source == "repeats" and len(card.top) == 5
    text = repr(card)
    assert text.startswith("WinnerCard fp8_gemm  bucket=128  profile=((1, 128, 4096)")
    assert " at 0x" not in text  # no memory address
    golden = GOLDEN / "winner_card_fp8_llama3-8b-o_b128.txt"
    if os.environ.get("PROFKIT_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text + "\n")
    assert text + "\n" == golden.read_text(), "rerun with PROFKIT_UPDATE_GOLDEN=1 to regenerate"


def test_winner_card_warnings_last_and_errors():
    c = cands({"runner": "A", "tactic": "0", "time_ms": 0.0100}, {"runner": "A", "tactic": "1", "time_ms": 0.0101},
              {"runner": "A", "tactic": "-1", "time_ms": 0.0099, "source": "default"})
    card = analysis.winner_card(c, op="gemm", bucket=8)
    assert card.within_noise and card.slower_than_default
    lines = repr(card).splitlines()
    # One timing each in one run: the rule cannot judge the gaps (docs/comparison_rule.md), and the card says so
    # instead of calling the 1% runner-up "within run-to-run noise" by a stated 2% band.
    assert lines[-1].startswith("  WARNING: the tuned choice measured 1.00% slower") and "not measurable" in lines[-1]
    assert "within run-to-run noise" not in repr(card) and "gaps are not measurable" in repr(card)
    assert card == analysis.winner_card(c, op="gemm", bucket=8)
    with pytest.raises(ProfkitError, match="buckets of gemm: \\[8\\]"):
        analysis.winner_card(c, op="gemm", bucket=4)
    with pytest.raises(ProfkitError, match="pass run_id= one of r1, r2"):
        analysis.winner_card(pd.concat([c, c.assign(run_id="r2")]), op="gemm", bucket=8)


# -- the shipped H200 data --------------------------------------------------------------------------
def test_shipped_fp8_winners_agree_with_flashinfer(fp8):
    w = analysis.winners(fp8.candidates)
    fi = fp8.winners.merge(w, on=["run_id", "call", "op", "profile"], suffixes=("_fi", ""))
    assert len(fi) == 120
    assert (fi["runner_fi"] == fi["runner"]).all() and (fi["tactic_fi"] == fi["tactic"]).all()
    assert np.allclose(fi["default_time_ms"], fi["default_ms"])


def test_shipped_speedups_and_tuning(fp8):
    s = analysis.speedup_vs_default(fp8.candidates)
    assert len(s) == 120 and int(s["slower_than_default"].sum()) == 17
    assert s["speedup"].max() == pytest.approx(1.1534, abs=1e-4)
    calls = analysis.tuning_breakdown(fp8.tuning, by="call")
    assert calls["wall_s"].min() == pytest.approx(19.32, abs=0.01) and calls["wall_s"].max() == pytest.approx(49.0, abs=0.01)
    assert (calls["prep_s"] > calls["measure_s"]).sum() == 5  # cuDNN plan building dominates but for llama down


def test_shipped_repeats_noise_and_ranks(repeats):
    n = analysis.noise(repeats.candidates)
    rep = n[n["noise_source"] == "repeats"]
    assert len(rep) == 40 and rep["noise_pct"].between(0.4, 2.5).all()
    d = analysis.rank_divergence(repeats.candidates)
    assert len(d) == 40 and int((~d["agree"]).sum()) == 4 and d["within_noise"].all()
