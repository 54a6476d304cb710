"""A tuning carried to another GPU: its picks timed there against the target's own picks and default."""

from __future__ import annotations

import pandas as pd
import pytest

from profkit.analysis.portability import carried_picks, portability

H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"


def _rows(capture_gpu, m, pick, pick_ms, default_ms):
    base = {"op": "fp8_gemm", "shape": "N=4096 K=4096", "m": m, "bucket": m, "capture_gpu": capture_gpu,
            "timed_gpu": H100}
    return [{**base, "runner": "Cublas", "tactic": pick, "winner": True, "default": False, "serving_ms": pick_ms},
            {**base, "runner": "Cublas", "tactic": "-1", "winner": False, "default": True, "serving_ms": default_ms}]


def _verify():
    return pd.DataFrame(_rows(H200, 64, "3", 0.90, 1.00) + _rows(H100, 64, "5", 0.80, 1.00)
                        + _rows(H200, 128, "7", 1.02, 2.00) + _rows(H100, 128, "7", 1.00, 2.04))


def test_a_carried_pick_is_priced_against_the_targets_own_pick_and_default():
    c = carried_picks(_verify()).set_index("m")
    assert list(c.index) == [64, 128] and set(c["source_gpu"]) == {H200} and set(c["target_gpu"]) == {H100}
    at64 = c.loc[64]
    assert at64["regret"] == pytest.approx(0.9 / 0.8 - 1) and at64["regret_verdict"] == "slower"
    assert at64["vs_default"] == pytest.approx(-0.1) and at64["vs_default_verdict"] == "faster"
    assert not at64["top1_agrees"]
    at128 = c.loc[128]  # the same pick on both GPUs: no regret, whatever the two processes' drift
    assert at128["top1_agrees"] and at128["regret"] == 0 and at128["regret_verdict"] == "same_pick"


def test_portability_counts_points_agreement_and_the_worst_regret():
    p = portability(carried_picks(_verify())).iloc[0]
    assert (p["points"], p["slower_than_own"], p["faster_than_default"]) == (2, 1, 2)
    assert p["top1_agreement"] == pytest.approx(0.5)
    assert p["worst_regret"] == pytest.approx(0.125) and p["worst_regret_at"] == "N=4096 K=4096 M=64"


def test_small_differences_are_within_noise_and_no_cross_rows_give_nothing():
    close = pd.DataFrame(_rows(H200, 64, "3", 0.81, 1.00) + _rows(H100, 64, "5", 0.80, 1.00))
    assert list(carried_picks(close)["regret_verdict"]) == ["within_noise"]
    own_only = pd.DataFrame(_rows(H100, 64, "5", 0.80, 1.00))
    assert carried_picks(own_only).empty and portability(carried_picks(own_only)).empty
