"""The one comparison rule behind the plan's gains and tactics and the winner card (docs/comparison_rule.md)."""

import numpy as np
import pandas as pd
import pytest

from profkit.analysis.verdict import compare_ratios, compare_two


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
