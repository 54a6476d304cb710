"""The one comparison rule behind the plan's gains and tactics and the winner card (docs/comparison_rule.md)."""

import numpy as np
import pandas as pd
import pytest

import profkit
from profkit import analysis, schema
from profkit.analysis.advise import advise
from profkit.analysis.verdict import VERIFY_RATIO_SD, compare_ratios, compare_two, compare_values
from profkit.analysis.verify import bucket_verdicts
from profkit.sources.verify import read_verify

from conftest import DATA


# -- compare_ratios: compare_two(paired=True) on many groups at once --------------------------------
def _units(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for g in range(60):
        n = int(rng.integers(1, 6))
        shift = float(rng.choice([0.0, 0.05, -0.03]))
        sd = float(rng.choice([np.nan, 0.02]))
        a, b = np.exp(rng.normal(shift, 0.02, n)), np.exp(rng.normal(0.0, 0.02, n))
        rows += [{"op": "gemm", "bucket": g, "a": x, "b": y, "sd": sd} for x, y in zip(a, b)]
    return pd.DataFrame(rows).assign(log_ratio=lambda f: np.log(f["a"] / f["b"]))


def test_compare_ratios_is_compare_two_paired_on_every_group():
    units = _units()
    rows = compare_ratios(units, by=["op", "bucket"], ratio_sd_col="sd")
    assert rows["bucket"].tolist() == sorted(units["bucket"].unique())
    assert set(rows["design"]) == {"paired", "calibrated", "too_few_units"}  # every branch of the rule is met
    for row in rows.itertuples(index=False):
        mine = units[units["bucket"] == row.bucket]
        sd = mine["sd"].iloc[0]
        c = compare_two(mine["a"], mine["b"], paired=True, ratio_sd=None if np.isnan(sd) else sd)
        assert (row.verdict, row.design, row.n, row.note) == (c.verdict, c.design, c.n, c.note)
        assert [row.effect, row.effect_lo, row.effect_hi, row.detectable] == pytest.approx(
            [c.effect, c.effect_lo, c.effect_hi, c.detectable], nan_ok=True)


def test_compare_ratios_without_units_or_spread():
    empty = compare_ratios(pd.DataFrame({"op": pd.Series(dtype="string"), "log_ratio": pd.Series(dtype=float)}),
                           by=["op"])
    assert empty.empty and "verdict" in empty.columns
    one = compare_ratios(pd.DataFrame({"op": ["a", "a", "b"], "log_ratio": [np.log(0.7), np.nan, np.nan]}), by=["op"])
    assert one["op"].tolist() == ["a"]  # a group without a finite ratio has no comparison
    assert one["verdict"].iloc[0] == "not_measurable" and one["effect"].iloc[0] == pytest.approx(-0.3)
    assert "fewer than 3 per side" in one["note"].iloc[0]


# -- the winner card ----------------------------------------------------------------------------------
P8 = "((8, 64), (64, 32))"


def _cands(*rows) -> pd.DataFrame:
    base = {"run_id": "r1", "call": 1, "op": "gemm", "profile": P8, "bucket": 8, "source": "flashinfer",
            "status": "ok", "timing": "eager, hot L2, mean of 10", "host_s": 0.01, "jit_s": 0.0}
    return schema.frame("candidates", [{**base, "seq": i + 1, **row} for i, row in enumerate(rows)])


def _card(gap: float, default: float, *, repeats: bool):
    c = _cands({"runner": "A", "tactic": "0", "time_ms": 0.0100},
               {"runner": "A", "tactic": "1", "time_ms": 0.0100 * gap},
               {"runner": "A", "tactic": "-1", "time_ms": default, "source": "default"})
    measured = analysis.noise(c).assign(noise_pct=2.0, noise_source="repeats") if repeats else None
    return analysis.winner_card(c, op="gemm", bucket=8, noise=measured)


def test_card_of_one_run_says_not_measurable_instead_of_a_band():
    card = _card(1.01, 0.0099, repeats=False)
    assert card.runner_up_verdict.verdict == card.default_verdict.verdict == "not_measurable"
    assert np.isnan(card.ratio_sd) and card.within_noise  # not beyond noise: nothing is called
    text = repr(card)
    assert "noise band" not in text and "within noise" not in text and "beyond noise" not in text
    assert "+1.00%  not measurable" in text and "gaps are not measurable" in text
    assert text.splitlines()[-1] == ("  WARNING: the tuned choice measured 1.00% slower than the default "
                                     "(flashinfer#3537); one timing of each in one run: not measurable.")


@pytest.mark.parametrize(("gap", "verdict", "flip"), [(1.01, "within_noise", True), (1.10, "slower", False)])
def test_card_with_repeated_runs_follows_the_rule(gap, verdict, flip):
    card = _card(gap, 0.0102, repeats=True)
    sd = np.sqrt(2.0) * 2.0 / 200.0  # noise_pct from repeats is two relative sds of one timing
    assert card.ratio_sd == pytest.approx(sd)
    assert card.runner_up_verdict == compare_two([0.0100 * gap], [0.0100], ratio_sd=sd)
    assert card.runner_up_verdict.verdict == verdict and card.within_noise == flip
    assert card.default_verdict.verdict == "within_noise"  # -2.0% against a 1.96 x 1.41% = 2.8% band
    text = repr(card)
    assert ("the choice may flip between runs" in text) == flip
    assert ("within noise" in text.splitlines()[6]) == flip  # the runner-up's line in the list of contenders
    assert "a gap beyond 2.81% is beyond noise" in text  # expm1(1.96 x sd)
    assert not card.warnings or "flip" in card.warnings[-1]  # the default is no slower


def test_card_calls_the_default_as_speedup_vs_default_does(fp8, repeats):
    noise = analysis.noise(repeats.candidates)
    card = analysis.winner_card(fp8.candidates, op="fp8_gemm", bucket=128, shape="N=4096 K=4096", noise=noise)
    s = analysis.speedup_vs_default(fp8.candidates, noise=noise)
    row = s[(s["bucket"] == 128) & (s["shape"] == "N=4096 K=4096")].iloc[0]
    assert card.default_verdict.verdict == row["verdict"] == "faster"
    assert [card.default_verdict.effect, card.default_verdict.effect_lo, card.default_verdict.detectable] == \
        pytest.approx([row["effect"], row["effect_lo"], row["detectable"]])


# -- the plan: gains and tactics under the rule -------------------------------------------------------
@pytest.fixture(scope="module")
def fp8():
    return profkit.load(DATA / "h200" / "fp8")


@pytest.fixture(scope="module")
def repeats():
    return profkit.concat([profkit.load(DATA / "h200" / f"fp8-repeat-r{i}") for i in (1, 2, 3)])


def test_tuner_gains_of_one_run_are_not_measurable_and_the_threshold_says_so(fp8):
    plan = advise(fp8)
    b = plan.buckets
    assert (b["verdict"] == "not_measurable").all() and not b["beyond_noise"].any() and b["effect_lo"].isna().all()
    gap = (b["gain_ms"] / b["tuned_ms"]).abs()
    assert b["counted"].tolist() == (gap > 0.02).tolist()  # the stated threshold, named as such
    assert (b["value_ms"][~b["counted"]] == 0).all()
    verdict = plan.ops["verdict"].iloc[0]
    assert "beyond noise" not in verdict and "120 not measurable" in verdict and "stated 2% threshold" in verdict
    assert any(n.startswith("Tuner timings without repeated runs") for n in plan.notes)
    reasons = set(plan.tactics["reason"])
    assert all("not measurable" in r for r in reasons if "within" in r)
    # the plan is the one the old 2% band chose on this capture: one timing each, nothing else to go by
    assert plan.tuning_buckets == (1, 2, 4, 8, 32, 64, 128, 256, 512, 768, 1024, 1280, 1536, 1792, 2048, 2560,
                                   3072, 3584, 4096)
    assert sum(len(v) for v in plan.blocklist.values()) == 44


def test_tuner_gains_of_repeated_runs_follow_the_rule(repeats):
    plan = advise(repeats)
    b = plan.buckets.set_index(["shape", "bucket"])
    assert set(b["verdict"]) <= {"faster", "slower", "within_noise"}  # three runs: a paired t per bucket
    assert (b["beyond_noise"] == b["verdict"].isin(["faster", "slower"])).all()
    assert (b["counted"] == b["beyond_noise"]).all()
    s = analysis.speedup_vs_default(repeats.candidates, noise=analysis.noise(repeats.candidates))
    one = s[(s["shape"] == "N=4096 K=4096") & (s["bucket"] == 8)].sort_values("run_id")
    c = compare_two(one["time_ms"], one["default_ms"], paired=True)
    row = b.loc[("N=4096 K=4096", 8)]
    assert (row["verdict"], row["effect"], row["detectable"]) == (c.verdict, pytest.approx(c.effect),
                                                                  pytest.approx(c.detectable))
    assert "per bucket and shape, by the comparison rule" in plan.ops["verdict"].iloc[0]
    assert set(plan.tactics["reason"]) == {"within noise of the winner at least once",
                                           "never within noise of the winner"}
    assert not any(n.startswith("Tuner timings without repeated runs") for n in plan.notes)


def test_serving_gains_follow_the_rule_not_the_replay_band():
    capture = profkit.load(DATA / "h200" / "step" / "llama3-8b-fp8" / "capture")
    verdicts = bucket_verdicts(read_verify(DATA / "h200-verify" / "step" / "llama3-8b-fp8"))
    plan = advise(capture, verify=verdicts, budget_s=25)
    b = plan.buckets.set_index(["shape", "bucket"])
    at = verdicts[verdicts["at_bucket"].fillna(False)].set_index(["shape", "bucket"])
    both = b.join(at[["verdict", "effect"]].add_suffix("_v"), how="inner")
    assert len(both) == len(b) and (both["gain_source"] == "serving").all()
    assert (both["verdict"] == both["verdict_v"]).all() and np.allclose(both["effect"], both["effect_v"])
    assert (both["counted"] == both["verdict"].isin(["faster", "slower"])).all()
    # e.g. 6% faster at 4096 with a tight replay band is within the rule's one-process noise (detectable 7%)
    row = b.loc[("N=28672 K=4096", 4096)]
    assert row["verdict"] == "within_noise" and row["value_ms"] == 0 and row["gain_ms"] > 0.05 * row["tuned_ms"]
    assert "17 faster, 63 within noise" in plan.ops["verdict"].iloc[0]
    assert plan.tuning_buckets == (1536, 1792, 2048, 3584)
    # Without bucket_verdicts' own verdict the rule runs on serving_speedup, with the one-process spread.
    bare = verdicts.drop(columns=["verdict", "effect", "effect_lo", "effect_hi", "detectable"])
    again = advise(capture, verify=bare, budget_s=25).buckets
    rule = compare_values(1 / at["serving_speedup"].to_numpy(), np.ones(len(at)), ratio_sd=VERIFY_RATIO_SD)
    assert sorted(again["verdict"].value_counts().items()) == sorted(rule["verdict"].value_counts().items())


# -- the plan's figure: it draws the plan analysis computed, in the plan's own terms -------------------
def test_plan_figure_names_what_its_gains_rest_on(fp8):
    from profkit.views.advise import plot_plan

    capture = profkit.load(DATA / "h200" / "step" / "llama3-8b-fp8" / "capture")
    serving = advise(capture, verify=bucket_verdicts(read_verify(DATA / "h200-verify" / "step" / "llama3-8b-fp8")))
    tuner = advise(fp8)  # one run: the rule cannot judge one timing each, the stated threshold counts
    label = {name: plot_plan(plan).axes[-1].get_ylabel() for name, plan in (("serving", serving), ("tuner", tuner))}
    assert label["serving"].endswith("(beyond noise)") and "threshold" not in label["serving"]
    assert "not measurable:\nabove the stated threshold" in label["tuner"]


def test_the_plan_view_computes_no_plan():
    """views.advise only draws: the plan comes from analysis (advise, the report's Results)."""
    import ast
    import inspect

    from profkit.views import advise as plan_views

    tree = ast.parse(inspect.getsource(plan_views))
    names = {a.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
    assert names.isdisjoint({"advise", "budget_frontier", "compare_two", "compare_values", "compare_ratios"})
    assert not hasattr(plan_views, "advise_report_section") and not hasattr(plan_views, "advise_section")
