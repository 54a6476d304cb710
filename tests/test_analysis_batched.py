"""Analyses that measure many comparisons in one call give what each comparison measured alone gives."""

from __future__ import annotations

import pandas as pd
import pytest

from profkit.analysis import step
from profkit.analysis.step_sets import NEW_STATES, TUNED_STATES, all_step_rows, comparison_changes, step_set_changes


def rows_of(source, passes, *, lines=None, model="m", tokens=8):
    """Step rows of ``passes`` ((state, times), ...) in time order; ``lines`` their line numbers (None: none)."""
    out = [{"engine": "profkit-step", "model": model, "dtype": "bf16", "phase": "decode", "tokens": tokens,
            "state": state, "step_ms": t, "source": source} for state, times in passes for t in times]
    for row, line in zip(out, lines or []):
        row["line"] = line
    return out


def test_measured_by_source_is_each_source_measured_alone():
    passes = [("untuned", [10.0, 10.1]), ("cache", [9.0, 9.1]), ("untuned", [10.2, 10.1]), ("cache", [9.2, 9.0]),
              ("untuned", [10.1, 10.0]), ("cache", [9.1, 9.1])]
    # a: written out of time order, its line numbers say the order; b: no line numbers, so row order counts;
    # c: two models in one file, their passes interleaved.
    a = rows_of("a", passes, lines=[5, 6, 3, 4, 1, 2, 11, 12, 9, 10, 7, 8])
    b = rows_of("b", passes[::-1])
    c = [r for i in range(0, 6, 2) for m in ("m", "n") for r in rows_of("c", passes[i:i + 2], model=m)]
    rows = pd.DataFrame(a + b + c)
    together = step.measured_step_change(rows, by=["source"])
    assert together.columns[0] == "source" and set(together["source"]) == {"a", "b", "c"}
    for source, alone in rows.groupby("source"):
        own = step.measured_step_change(alone.dropna(axis=1, how="all"))
        mine = together[together["source"] == source].drop(columns="source").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, own)
    # a's passes pair in time order, as its lines give it: three paired passes
    assert together.set_index("source").loc["a", "design"] == "paired"


def test_same_kernels_and_fallback_by_comparison_meet_their_own_baseline():
    untuned, tuned = "qkv=Cublas:-1", "qkv=Cublas:1"
    rows = pd.DataFrame([{**r, "picks": p, "_c": c} for c, p_untuned in ((0, untuned), (1, tuned))
                         for state, p in (("untuned", p_untuned), ("repaired", tuned))
                         for r in rows_of("s", [(state, [1.0])])])
    same = step.same_kernels(rows, by=["_c"]).set_index("_c")["same"]
    assert same.to_dict() == {0: False, 1: True}  # pooled, either untuned would answer for both
    fallback = step.fallback_sizes(rows, by=["_c"]).set_index(["_c", "state"])["fallback"]
    assert fallback.to_dict() == {(0, "repaired"): False, (0, "untuned"): True, (1, "repaired"): False,
                                  (1, "untuned"): False}


def one_by_one(rows):
    """comparison_changes as each comparison measured alone gives it (the definition)."""
    out = []
    for where, model, dtype, g in step.step_comparisons(rows):
        states = set(g["state"].astype(str))
        files = g[g["loaded_cache"].fillna("").astype(str) != ""].drop_duplicates("state")
        loaded = dict(zip(files["state"].astype(str), files["loaded_cache"].astype(str)))
        tuned = next((s for s in TUNED_STATES if s in states), None)
        for baseline in [b for b in ("untuned", tuned) if b is not None and b in states]:
            m = step.measured_step_change(g, baseline=baseline)
            if baseline != "untuned":
                m = m[m["state"].isin(NEW_STATES).to_numpy(dtype=bool)]
            if len(m):
                out.append(m.assign(where=where, baseline=baseline,
                                    loaded_cache=[loaded.get(str(x), "") for x in m["state"]]))
    return pd.concat(out, ignore_index=True)


@pytest.fixture(scope="module")
def shipped_steps(shipped_whole):
    return all_step_rows(shipped_whole)


def test_comparison_changes_are_each_comparison_measured_alone(shipped_steps):
    changes = comparison_changes(shipped_steps)
    pd.testing.assert_frame_equal(changes, one_by_one(shipped_steps))
    assert set(changes["baseline"]) == {"untuned", "cache"}  # against the tuned cache too


def test_step_set_changes_count_each_comparisons_verdicts(shipped_steps):
    changes = comparison_changes(shipped_steps)
    sets = step_set_changes(shipped_steps, changes=changes)
    counts = changes.groupby(["where", "model", "dtype", "state", "baseline"])["verdict"].value_counts()
    for row in sets.itertuples(index=False):
        key = (row.where, row.model, row.dtype, row.state, row.baseline)
        assert row.sizes == counts.loc[key].sum()
        assert row.faster == counts.loc[key].get("faster", 0) and row.slower == counts.loc[key].get("slower", 0)
    assert sets["same_kernels"].notna().any() and sets["fallback"].notna().any()


@pytest.fixture(scope="module")
def moe_runs(shipped_whole):
    return shipped_whole.moe


def test_moe_step_changes_by_set_are_each_set_measured_alone(moe_runs):
    from profkit.analysis import moe

    every = moe.step_changes(moe_runs.step, by=["source"])
    for source, rows in moe_runs.step.groupby("source"):
        mine = every[every["source"] == source].drop(columns="source").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, moe.step_changes(rows))
    assert (every["state"] == "untuned-2").any()  # the A/A pairs are among them


def test_model_summary_from_its_own_or_a_given_routing_sensitivity(moe_runs):
    from profkit.analysis import moe
    from profkit.analysis.moe_models import _sweeps

    t = moe_runs.tables
    verify = _sweeps(moe_runs.verify, dict(zip(moe_runs.runs["run_id"], moe_runs.runs["model"])))
    own = moe.model_summary(t.winners, t.candidates, verify, moe_runs.step, moe_runs.runs)
    given = moe.model_summary(t.winners, t.candidates, verify, moe_runs.step, moe_runs.runs,
                              sensitivity=moe.routing_sensitivity(verify))
    pd.testing.assert_frame_equal(own, given)
    # each model's sweep alone gives its row: the shared sensitivity is sliced to its run and routings
    for model, row in own.set_index("model").iterrows():
        runs = moe_runs.runs[moe_runs.runs["model"] == model]
        alone = moe.model_summary(t.winners, t.candidates, verify[verify["run_id"].isin(runs["run_id"])],
                                  moe_runs.step, runs).set_index("model").loc[model]
        pd.testing.assert_series_equal(alone, row)
    assert own["aa_points"].notna().all() and own["predicted_beyond_noise"].notna().any()


def test_diff_winners_by_capture_is_each_capture_diffed_alone(shipped_whole):
    from profkit.analysis.compare import cache_agreement, diff_winners

    w, cached = shipped_whole.tables.winners, shipped_whole.cache_winners
    agreement = cache_agreement(w, cached)
    assert agreement["run_id"].nunique() > 1
    for run, rows in agreement.groupby("run_id", sort=False):
        mine = w[w["run_id"] == run].sort_values("call", kind="stable").drop_duplicates(["op", "profile"])
        theirs = cached[(cached["capture_run_id"] == run) & cached["profile"].isin(mine["profile"])]
        alone = diff_winners(mine, theirs.drop_duplicates(["op", "profile"]).drop(columns="capture_run_id"))
        pd.testing.assert_frame_equal(rows.drop(columns="run_id").reset_index(drop=True), alone)
    # a capture and its cache file that disagree: by= keeps the two diffs apart
    a = pd.DataFrame({"op": "o", "profile": ["p", "p"], "runner": "R", "tactic": ["1", "2"], "pair": ["x", "y"]})
    b = a.assign(tactic=["1", "3"])
    diff = diff_winners(a, b, by=["pair"])
    assert diff[["pair", "change"]].values.tolist() == [["x", "same"], ["y", "tactic"]]
