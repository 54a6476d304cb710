"""scripts/verify_targets.py: what it prints for each target, on hand-made step rows and provenance."""

import importlib.util
import types

import pandas as pd

from conftest import ROOT

spec = importlib.util.spec_from_file_location("verify_targets", ROOT / "scripts" / "verify_targets.py")
targets = importlib.util.module_from_spec(spec)
spec.loader.exec_module(targets)


def rows(source, state, times, tokens):
    return [{"source": source, "model": "m", "dtype": "fp8", "phase": "decode", "tokens": tokens, "state": state,
             "repetition": i, "step_ms": t} for i, t in enumerate(times)]


def interleaved(times: dict, tokens: int) -> list[dict]:
    """Each state's three passes in one process, a, b, c, a, b, c, a, b, c: times[state] = pass medians."""
    return [r for i in range(3) for state, medians in times.items()
            for r in rows("set/a", state, [medians[i], medians[i] + 0.01], tokens)]


def test_repaired_target_counts_sizes_slower_than_untuned_and_than_the_best(capsys):
    # Three interleaved passes per state: one pass each would be not measurable under the rule.
    frame = pd.DataFrame(interleaved({"untuned": [1.0, 1.01, 1.005], "cache": [0.9, 0.905, 0.91],
                                      "repaired": [0.95, 0.955, 0.96]}, 8)
                         + interleaved({"untuned": [2.0, 2.01, 2.005], "cache": [2.0, 2.005, 2.01],
                                        "repaired": [2.1, 2.11, 2.1]}, 24))
    targets.repaired_targets(frame)
    out = capsys.readouterr().out
    assert "m fp8 (set): vs untuned 1 of 2 [decode 24 (+4.9%)]; vs best 2 of 2 [decode 8 (+5.5%)" in out and "MISSED" in out


def test_repaired_target_counts_nothing_a_single_pass_design_cannot_measure(capsys):
    frame = pd.DataFrame(rows("set/a", "untuned", [1.0, 1.01], 8) + rows("set/a", "cache", [0.9, 0.91], 8)
                         + rows("set/a", "repaired", [0.95, 0.96], 8))
    targets.repaired_targets(frame)
    assert "vs untuned 0 of 1 [none]; vs best 0 of 1 [none]" in capsys.readouterr().out


def test_cost_target_splits_a_shapes_first_tuning_in_a_process_from_later_ones(capsys):
    run = {"policy": "autotune", "n": 1, "k": 2, "tune_call_s": 20.0, "verify_s": 2.0}
    data = types.SimpleNamespace(provenance={"p": {"runs": [run, {**run, "policy": "v2-graph", "tune_call_s": 2.0}]}})
    targets.cost_targets(data)
    out = capsys.readouterr().out
    assert "first tuning of the shape, autotune: 1 shapes, ratio 0.10-0.10" in out
    assert "later tuning of the shape, v2-graph: 1 shapes, ratio 1.00-1.00 (median 1.00); at most 0.5 in 0 of 1" in out
