"""shortlist_reach: how far a port's shortlist of the source tuner's top-k lands from the target's own pick."""

from __future__ import annotations

import pandas as pd
import pytest

from profkit.analysis.shortlist import SHORTLIST_COLUMNS, shortlist_reach


def _rows(gpu: str, profile: str, times: dict[int, float], bucket: int = 8, repeats: int = 1) -> list[dict]:
    return [{"gpu": gpu, "op": "gemm", "profile": profile, "bucket": bucket, "runner": "R", "tactic": tactic,
             "time_ms": ms, "status": "ok"} for tactic, ms in times.items() for _ in range(repeats)]


def test_regret_is_the_best_shortlisted_candidate_timed_on_the_target_over_its_own_pick():
    # Profile p: the source ranks tactics 0 < 1 < 2 < 3; the target's own pick is tactic 3 (1.0 ms).
    rows = (_rows("A", "p", {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0}) + _rows("B", "p", {0: 1.5, 1: 1.2, 2: 2.0, 3: 1.0})
            # Profile q: both GPUs pick tactic 0; tactic 1 failed on B (not ok: never timed there).
            + _rows("A", "q", {0: 1.0, 1: 1.1}, bucket=64) + _rows("B", "q", {0: 2.0}, bucket=64)
            + [{"gpu": "B", "op": "gemm", "profile": "q", "bucket": 64, "runner": "R", "tactic": 1,
                "time_ms": 0.1, "status": "failed"}])
    table = shortlist_reach(pd.DataFrame(rows), top_ks=(1, 2, 4))
    assert list(table.columns) == list(SHORTLIST_COLUMNS)
    a_to_b = table[table["source_gpu"] == "A"].set_index("top_k")
    assert a_to_b["points"].tolist() == [2, 2, 2]
    assert a_to_b["own_in_shortlist"].tolist() == [1, 1, 2]
    assert a_to_b.loc[1, "worst_regret"] == pytest.approx(0.5)   # p: tactic 0 on B (1.5) over its own (1.0)
    assert a_to_b.loc[2, "worst_regret"] == pytest.approx(0.2)   # p: tactic 1 (1.2)
    assert a_to_b.loc[4, "worst_regret"] == pytest.approx(0.0)
    assert a_to_b.loc[1, "worst_at"] == "bucket 8"
    assert a_to_b.loc[2, "median_regret"] == pytest.approx(0.1)  # (0.2 + 0.0) / 2
    b_to_a = table[table["source_gpu"] == "B"].set_index("top_k")
    assert b_to_a.loc[1, "worst_regret"] == pytest.approx(3.0)   # p: B's top-1 is tactic 3, 4.0 ms on A over 1.0


def test_medians_over_repeats_and_a_shortlist_never_timed_on_the_target_is_counted_not_dropped():
    rows = (_rows("A", "p", {0: 1.0, 1: 3.0}, repeats=3) + _rows("A", "p", {0: 5.0})  # A: tactic 0 median 1.0
            + _rows("B", "p", {1: 2.0}))                                                  # B timed tactic 1 only
    table = shortlist_reach(pd.DataFrame(rows), top_ks=(1, 2)).set_index(["source_gpu", "top_k"])
    assert table.loc[("A", 1), "none_timed"] == 1 and table.loc[("A", 1), "points"] == 1
    assert table.loc[("A", 2), "none_timed"] == 0 and table.loc[("A", 2), "own_in_shortlist"] == 1


def test_one_gpu_or_no_rows_give_an_empty_table_with_its_columns():
    assert shortlist_reach(pd.DataFrame(_rows("A", "p", {0: 1.0}))).empty
    empty = shortlist_reach(pd.DataFrame())
    assert empty.empty and list(empty.columns) == list(SHORTLIST_COLUMNS)
