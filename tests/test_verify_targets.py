"""profkit.analysis.targets: the verify issue's targets on hand-made step rows and provenance.

scripts/verify_targets.py prints these tables; the tests check the tables themselves.
"""

import pandas as pd

from profkit.analysis import targets


def rows(source, state, times, tokens):
    return [{"source": source, "model": "m", "dtype": "fp8", "phase": "decode", "tokens": tokens, "state": state,
             "repetition": i, "step_ms": t} for i, t in enumerate(times)]


def interleaved(times: dict, tokens: int) -> list[dict]:
    """Each state's three passes in one process, a, b, c, a, b, c, a, b, c: times[state] = pass medians."""
    return [r for i in range(3) for state, medians in times.items()
            for r in rows("set/a", state, [medians[i], medians[i] + 0.01], tokens)]


def test_repaired_target_counts_sizes_slower_than_untuned_and_than_the_best():
    # Three interleaved passes per state: one pass each would be not measurable under the rule.
    frame = pd.DataFrame(interleaved({"untuned": [1.0, 1.01, 1.005], "cache": [0.9, 0.905, 0.91],
                                      "repaired": [0.95, 0.955, 0.96]}, 8)
                         + interleaved({"untuned": [2.0, 2.01, 2.005], "cache": [2.0, 2.005, 2.01],
                                        "repaired": [2.1, 2.11, 2.1]}, 24))
    table = targets.repaired_targets(frame)
    assert list(table.columns) == list(targets.REPAIRED_COLUMNS)
    assert table.to_dict("records") == [{
        "where": "set", "model": "m", "dtype": "fp8", "sizes": 2, "slower": 1, "slower_at": "decode 24 (+4.9%)",
        "best_sizes": 2, "slower_than_best": 2, "slower_than_best_at": "decode 8 (+5.5%), decode 24 (+4.9%)",
        "met": False}]


def test_repaired_target_counts_nothing_a_single_pass_design_cannot_measure():
    frame = pd.DataFrame(rows("set/a", "untuned", [1.0, 1.01], 8) + rows("set/a", "cache", [0.9, 0.91], 8)
                         + rows("set/a", "repaired", [0.95, 0.96], 8))
    r = targets.repaired_targets(frame).iloc[0]
    assert (r["sizes"], r["slower"], r["slower_at"], r["best_sizes"], r["slower_than_best"]) == (1, 0, "", 1, 0)
    assert r["met"]


def test_repaired_target_without_a_cache_state_has_no_best_and_no_rows_no_table():
    frame = pd.DataFrame(rows("set/a", "untuned", [1.0, 1.01], 8) + rows("set/a", "repaired", [0.95, 0.96], 8))
    r = targets.repaired_targets(frame).iloc[0]
    assert r["sizes"] == 1 and pd.isna(r["best_sizes"]) and pd.isna(r["slower_than_best_at"])
    for empty in (frame[frame["state"] != "repaired"], frame.iloc[:0]):
        table = targets.repaired_targets(empty)
        assert table.empty and list(table.columns) == list(targets.REPAIRED_COLUMNS)


def test_cost_target_splits_a_shapes_first_tuning_in_a_process_from_later_ones():
    run = {"policy": "autotune", "n": 1, "k": 2, "tune_call_s": 20.0, "verify_s": 2.0}
    table = targets.cost_targets({"p": {"runs": [run, {**run, "policy": "v2-graph", "tune_call_s": 2.0}]}})
    assert table.to_dict("records") == [
        {"tuning": "first", "policy": "autotune", "shapes": 1, "ratio_min": 0.1, "ratio_max": 0.1,
         "ratio_median": 0.1, "at_most_half": 1},
        {"tuning": "later", "policy": "v2-graph", "shapes": 1, "ratio_min": 1.0, "ratio_max": 1.0,
         "ratio_median": 1.0, "at_most_half": 0}]


def test_cost_target_without_a_policy_study_is_an_empty_table():
    table = targets.cost_targets({"p": {"runs": [{"policy": "autotune"}]}, "q": {}})
    assert table.empty and list(table.columns) == list(targets.COST_COLUMNS)


def test_sign_target_checks_the_shipped_step_and_each_comparison_that_loaded_the_verified_cache():
    step = pd.DataFrame(interleaved({"untuned": [1.0, 1.01, 1.005], "cache": [0.9, 0.905, 0.91]}, 1)
                        + interleaved({"untuned": [2.0, 2.01, 2.005], "cache": [2.1, 2.11, 2.1]}, 2))
    verified = step.assign(command="profkit step --cache cache=data/h200/step/m-fp8/cache.json")
    predicted = pd.DataFrame({"model": "m", "dtype": "fp8", "tokens": [1, 2], "predicted_delta_ms": [-1.0, -1.0]})
    shipped = pd.DataFrame({"model": "m", "dtype": "fp8", "tokens": [1], "state": "tuned", "delta_ms": [-0.1],
                            "beyond_noise": [False]})
    first = {"against": "shipped tuned step", "model": "m", "dtype": "fp8", "sizes": 1, "agree": 1,
             "beyond_noise": 0, "agree_beyond_noise": 0, "met": False}
    # the cache is faster at 1 token (as predicted) and slower at 2 (predicted faster), both beyond noise
    assert targets.sign_targets(verified, predicted, shipped=shipped).to_dict("records") == [first, {
        "against": "set", "model": "m", "dtype": "fp8", "sizes": 2, "agree": 1, "beyond_noise": 2,
        "agree_beyond_noise": 1, "met": False}]
    other_cache = step.assign(command="profkit step --cache cache=elsewhere.json")
    assert targets.sign_targets(other_cache, predicted, shipped=shipped).to_dict("records") == [first]
    many = pd.DataFrame({"model": "m", "dtype": "fp8", "tokens": range(16), "state": "tuned", "delta_ms": -0.1,
                         "beyond_noise": False})
    ahead = predicted.iloc[:0].reindex(range(16)).assign(model="m", dtype="fp8", tokens=range(16),
                                                         predicted_delta_ms=[-1.0] * 13 + [1.0] * 3)
    assert targets.sign_targets(step.iloc[:0], ahead, shipped=many)["met"].tolist() == [True]
