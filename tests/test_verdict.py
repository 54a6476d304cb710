"""analysis.verdict: the one comparison rule, on synthetic A/A and shifted data and on the shipped A/A steps."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import profkit
from profkit.analysis import verdict
from profkit.analysis.verdict import compare_samples, compare_two, compare_values
from profkit.errors import ProfkitError, SchemaError
from conftest import DATA


def interleaved(rng, points: int, *, shift: float = 0.0, passes: int = 3, reps: int = 3, drift: float = 0.008,
                common: float = 0.01, rep_sd: float = 0.003) -> pd.DataFrame:
    """Step-like rows: states a and b timed in ``passes`` interleaved passes of ``reps`` repetitions.

    Each pass pair shares a drift (sd ``common``), each state's pass has its own (sd ``drift``; the
    shipped dense interleaved sets move a median 0.84% between passes) and each repetition its noise.
    b is a's time times (1 + shift).
    """
    rows = []
    for point in range(points):
        base = rng.uniform(0.5, 20.0)
        for p in range(passes):
            both = rng.normal(0, common)
            for state, factor in (("a", 1.0), ("b", 1.0 + shift)):
                own = rng.normal(0, drift)
                rows += [(point, state, p, base * factor * math.exp(both + own + rng.normal(0, rep_sd)))
                         for _ in range(reps)]
    return pd.DataFrame(rows, columns=["point", "state", "pass", "step_ms"])


def rule(frame: pd.DataFrame, **kw) -> pd.DataFrame:
    return compare_samples(frame, by=["point"], label_col="state", baseline="a", value_col="step_ms",
                           unit_col="pass", **kw)


def test_aa_data_is_within_noise_at_no_more_than_5_percent_of_points_over_many_seeds():
    called = []
    for seed in range(8):
        out = rule(interleaved(np.random.default_rng(seed), 150))
        assert (out["design"] == "paired").all() and (out["n"] == 3).all()
        called += out["verdict"].isin(["faster", "slower"]).tolist()
    assert len(called) == 1200 and np.mean(called) <= 0.05


def test_a_real_shift_is_detected_and_its_interval_holds_the_true_effect():
    out = rule(interleaved(np.random.default_rng(11), 200, shift=0.05))
    assert (out["verdict"] == "slower").mean() > 0.8 and not (out["verdict"] == "faster").any()  # power at 5%: 0.87
    covered = (out["effect_lo"] <= 0.05) & (0.05 <= out["effect_hi"])
    assert covered.mean() >= 0.9  # a 95% interval, over 200 points
    faster = rule(interleaved(np.random.default_rng(12), 50, shift=-0.05))
    assert (faster["verdict"] == "faster").mean() > 0.8


def test_one_pass_of_each_is_not_measurable_never_slower():
    one = interleaved(np.random.default_rng(3), 20, shift=0.10, passes=1)
    out = rule(one)
    assert (out["verdict"] == "not_measurable").all() and (out["design"] == "too_few_units").all()
    assert out["effect"].between(0.05, 0.15).all() and out["effect_lo"].isna().all() and out["detectable"].isna().all()
    assert "fewer than 3 per side" in out["note"].iloc[0]
    # Repetitions are not units: without a unit column, each row counts; with it, a pass does.
    two = c = compare_two([1.1, 1.1], [1.0, 1.0])
    assert c.verdict == "not_measurable" and two.n == 2


def test_unpaired_units_use_welch_and_the_floor_stops_tiny_changes():
    frame = pd.DataFrame({"point": 0, "state": ["a"] * 4 + ["b"] * 4,
                          "pass": ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3"],
                          "step_ms": [1.0, 1.001, 0.999, 1.0, 1.003, 1.004, 1.002, 1.003]})
    out = rule(frame).iloc[0]
    assert out["design"] == "unpaired" and out["effect_lo"] > 0  # the interval excludes 0 ...
    assert out["verdict"] == "within_noise" and out["detectable"] == pytest.approx(0.005)  # ... but 0.3% < the floor
    assert rule(frame, floor=0.0).iloc[0]["verdict"] == "slower"


def test_calibrated_spread_judges_one_unit_each():
    c = compare_two([1.10], [1.0], ratio_sd=0.02)
    assert c.design == "calibrated" and c.verdict == "slower"
    assert c.effect_lo == pytest.approx(1.1 * math.exp(-1.959964 * 0.02) - 1, abs=1e-6)
    assert c.detectable == pytest.approx(math.exp(1.959964 * 0.02) - 1, abs=1e-6)
    assert compare_two([1.03], [1.0], ratio_sd=0.02).verdict == "within_noise"
    values = compare_values([1.0, 0.8, 1.0, np.nan], [1.0, 1.0, 1.0, 1.0], ratio_sd=[0.02, 0.02, np.nan, 0.02])
    assert values["verdict"].tolist() == ["within_noise", "faster", "not_measurable", "not_measurable"]
    assert verdict.within_noise(values["verdict"]).tolist() == [True, False, True, True]


def test_the_effect_is_the_ratio_of_geometric_means_of_the_unit_medians():
    frame = pd.DataFrame({"point": 0, "state": ["a"] * 6 + ["b"] * 6, "pass": [0, 0, 1, 1, 2, 2] * 2,
                          "step_ms": [1.0, 9.0, 2.0, 2.0, 4.0, 4.0, 2.0, 2.0, 4.0, 4.0, 8.0, 8.0]})
    out = rule(frame).iloc[0]
    # unit medians a: 5, 2, 4; b: 2, 4, 8
    assert out["value"] == pytest.approx((2 * 4 * 8) ** (1 / 3))
    assert out["baseline_value"] == pytest.approx(40 ** (1 / 3))
    assert out["effect"] == pytest.approx(out["value"] / out["baseline_value"] - 1)


def test_t_quantiles_match_the_tables():
    for df, q in ((1, 12.7062), (2, 4.3027), (3, 3.1824), (10, 2.2281), (30, 2.0423)):
        assert verdict.t_quantile(0.975, df) == pytest.approx(q, abs=1e-4)
    assert verdict.t_quantile(0.975, math.inf) == pytest.approx(1.95996, abs=1e-5)
    assert verdict.t_quantile(0.025, 2) == pytest.approx(-4.3027, abs=1e-4)


def test_rows_without_a_baseline_are_left_out_and_empty_input_keeps_the_columns():
    frame = pd.DataFrame({"point": [0, 0, 1], "state": ["a", "b", "b"], "pass": [0, 0, 0], "step_ms": [1.0, 1.1, 1.2]})
    assert rule(frame)["point"].tolist() == [0]
    empty = rule(frame.iloc[:0])
    assert empty.empty
    assert {"effect", "effect_lo", "effect_hi", "verdict", "n", "n_baseline", "detectable"} <= set(empty)


def test_bad_input_is_named():
    frame = pd.DataFrame({"point": 0, "state": ["a", "b"], "pass": 0, "step_ms": [1.0, 0.0]})
    with pytest.raises(ProfkitError, match="1 step_ms values are <= 0"):
        rule(frame)
    with pytest.raises(SchemaError, match="missing columns pass"):
        rule(frame.drop(columns="pass"))
    with pytest.raises(ProfkitError, match="confidence must lie between 0 and 1"):
        compare_two([1.0], [1.0], confidence=95)
    with pytest.raises(ProfkitError, match="paired samples need equal lengths"):
        compare_two([1.0, 2.0], [1.0], paired=True)


def test_comparison_prints_its_verdict_effect_and_interval():
    c = compare_two([1.1, 1.12, 1.09], [1.0, 1.01, 0.99], paired=True)
    assert str(c).startswith("slower: +10.33% [+9.13%, +11.55%] (3 vs 3 units, paired; detectable")
    assert str(compare_two([1.1], [1.0])).startswith("not measurable (1 vs 1 units, too few units)")


def test_ratio_sd_from_repeats_matches_the_95th_percentile():
    diffs = np.linspace(-0.1, 0.1, 201)
    expected = np.quantile(np.abs(diffs), 0.95) / (1.959964 * 2 ** 0.5)
    assert verdict.ratio_sd_from_repeats(diffs) == pytest.approx(expected, rel=1e-5)
    assert math.isnan(verdict.ratio_sd_from_repeats([0.01] * 5))


def test_shipped_moe_aa_pairs_are_within_noise():
    files = sorted((DATA / "h200-moe").glob("*-step-aa/step.jsonl"))
    bench = pd.concat([profkit.read_bench(f, format="profkit-step").assign(source=str(f)) for f in files])
    aa = verdict.aa_step_points(bench)
    series = aa[aa["kind"] == "series"]
    assert len(series) == 48 and (series["design"] == "paired").all()
    assert series["verdict"].isin(["faster", "slower"]).mean() <= 0.05
    single = aa[aa["kind"] == "single_pass"]
    assert (single["verdict"] == "not_measurable").all() and single["old_beyond_noise"].mean() > 0.15


def test_the_a_a_rate_counts_calls_among_measurable_points_only():
    points = pd.DataFrame({"kind": ["series"] * 4 + ["single_pass"] * 2, "old_beyond_noise": [True, False] * 3,
                           "verdict": ["faster", "within_noise", "not_measurable", "not_measurable",
                                       "not_measurable", "not_measurable"]})
    rates = verdict.aa_rates(points, by=["kind"]).set_index("kind")
    assert rates.loc["series", ["points", "measurable", "calls"]].tolist() == [4, 2, 1]
    assert rates.loc["series", "called"] == 0.5 and rates.loc["series", "not_measurable"] == 0.5
    assert math.isnan(rates.loc["single_pass", "called"]) and rates.loc["single_pass", "old_beyond_noise"] == 0.5


def test_sensitivity_holds_the_rule_at_its_own_setting_and_a_lower_floor_never_calls_fewer():
    path = DATA / "h200-moe" / "qwen3-30b-a3b-step-repaired" / "step.jsonl"
    bench = profkit.read_bench(path, format="profkit-step")
    grid = verdict.aa_sensitivity(bench, confidences=(0.90, verdict.CONFIDENCE), floors=(0.0, verdict.DRIFT_FLOOR))
    assert len(grid) == 4 and grid["measurable"].nunique() == 1
    rule_rate = verdict.aa_rates(verdict.aa_step_points(bench, kinds=("series", "same_kernels")), by=["kind"])
    own = grid[(grid["confidence"] == verdict.CONFIDENCE) & (grid["floor"] == verdict.DRIFT_FLOOR)].iloc[0]
    assert own["calls"] == rule_rate["calls"].sum() and own["measurable"] == rule_rate["measurable"].sum()
    for _, g in grid.groupby("confidence"):
        assert g.sort_values("floor")["calls"].is_monotonic_decreasing
    assert (grid.groupby("floor")["calls"].apply(lambda c: c.is_monotonic_decreasing)).all()
