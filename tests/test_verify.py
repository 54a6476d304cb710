"""profkit verify / repair on the CPU: the steering hook, the analysis, the repaired cache file.

The GPU timing of verify runs only on a CUDA machine; here FlashInfer's real AutoTuner steers toy
runners (profkit.testing), the repair file goes through FlashInfer's own ``load_configs`` and
``choose_one``, and the analysis runs on hand-made verify tables.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from flashinfer.autotuner import AutoTuner, autotune
from flashinfer.autotuner.autotuner import _collect_metadata

import profkit
from profkit import schema
from profkit import testing as T
from profkit.analysis.verify import bucket_verdicts, op_summary, predict_step_from_verify, repair_picks, verify_plan
from profkit.bench.steer import Steering, SteeringError, tactic_from_text
from profkit.outputs.flashinfer_cache import cache_file

OP = "toy_gemm"


class ExactMRunner(T.ToyCublasRunner):
    """A cuBLASLt-like runner whose cache key holds M (extras), as FlashInfer's bf16 cuBLASLt does."""

    def get_cache_key_extras(self, inputs):
        return (int(inputs[0].shape[0]), "align16")


@pytest.fixture
def tuner():
    with T.cpu_autotuner() as t:
        yield t


def runners():
    return [T.ToyCublasRunner(), T.ToyCudnnRunner(), ExactMRunner(tactics=(5, 6), failing=())]


def choose(tuner, m, rs=None):
    runner, tactic = tuner.choose_one(OP, rs or runners(), T.gemm_config(), T.gemm_inputs(m))
    return type(runner).__name__, tactic


# -- the steering hook ---------------------------------------------------------------------------
def test_steering_returns_exactly_the_requested_runner_and_tactic(tuner):
    with Steering() as steering:
        for name, text in (("ToyCudnnRunner", "[1, [[2, 3]]]"), ("ExactMRunner", "6"), (None, "-1")):
            steering.aim(OP, name, tactic_from_text(text))
            runner, tactic = choose(tuner, 8)
            assert runner == (name or "ToyCublasRunner")
            assert schema.tactic_text(tactic) == text
            assert steering.calls[-1]["runner"] == runner


def test_steering_records_flashinfers_own_file_key(tuner):
    with Steering() as steering:
        steering.aim(OP, "ExactMRunner", 5)
        choose(tuner, 8)
        key = steering.calls[0]["file_key"]
    assert key.startswith("('toy_gemm', 'ExactMRunner', ((8, 8), (8, 4))") and "(8, 'align16')" in key


def test_steering_leaves_other_ops_and_unaimed_calls_to_flashinfer(tuner):
    with autotune(True):
        reference = {m: choose(tuner, m) for m in (1, 8, 32)}
    with Steering() as steering:
        steering.aim("another_op", "ExactMRunner", 5)
        assert {m: choose(tuner, m) for m in (1, 8, 32)} == reference
        steering.release()
        assert {m: choose(tuner, m) for m in (1, 8, 32)} == reference
        assert steering.calls == []


def test_steering_is_removed_on_exit_and_on_error(tuner):
    before = vars(AutoTuner)["choose_one"]
    with pytest.raises(SteeringError, match="has no runner 'NoSuchRunner'; its runners are ToyCublasRunner"):
        with Steering() as steering:
            steering.aim(OP, "NoSuchRunner", 0)
            choose(tuner, 4)
    assert vars(AutoTuner)["choose_one"] is before
    with Steering() as steering:
        steering.aim(OP, "ToyCudnnRunner", tactic_from_text("[4, []]"))
    assert vars(AutoTuner)["choose_one"] is before
    assert choose(tuner, 4) == ("ToyCublasRunner", -1)  # untuned: FlashInfer's fallback again


def test_decisions_with_and_without_a_steering_hook_are_identical(tuner):
    with autotune(True):
        first = {m: choose(tuner, m) for m in (1, 2, 4, 8, 16, 32)}
    tuner.clear_cache()
    with Steering():
        with autotune(True):
            second = {m: choose(tuner, m) for m in (1, 2, 4, 8, 16, 32)}
    assert first == second


# -- the plan ------------------------------------------------------------------------------------
def captured(tuner, m=32):
    with profkit.capture() as cap:
        with autotune(True):
            tuner.choose_one(OP, runners(), T.gemm_config(), [T.gemm_inputs(m)[0], T.gemm_inputs(m)[1]])
    return cap


def test_plan_times_top_k_winner_and_default_at_every_size_of_a_bucket(tuner):
    cap = captured(tuner)
    cap.winners["profile"]  # noqa: B018 - the capture has winners
    # Toy profiles are ((M, 8), (8, 4)): K=8, N=4.
    plan = verify_plan(cap.candidates, cap.winners, sizes=[1, 3, 4, 5, 32, 64], top_k=2)
    assert set(plan["m"]) == {1, 3, 4, 5, 32}  # 64 is above the largest tuned bucket
    assert plan.loc[plan["m"] == 3, "bucket"].eq(4).all() and plan.loc[plan["m"] == 5, "bucket"].eq(8).all()
    for m, g in plan.groupby("m"):
        assert g["winner"].sum() == 1 and g["default"].sum() == 1
        assert g.loc[g["default"], "runner"].iloc[0] == "ToyCublasRunner"
        assert g.loc[g["default"], "tactic"].iloc[0] == "-1"
        ranked = g["tuner_rank"].dropna()
        assert set(ranked) <= {1, 2} | set(g.loc[g["winner"] | g["default"], "tuner_rank"].dropna())
    winners = cap.winners.set_index("bucket")
    at4 = plan[(plan["m"] == 4) & plan["winner"]].iloc[0]
    assert (at4["runner"], at4["tactic"]) == (winners.loc[4, "runner"], winners.loc[4, "tactic"])


# -- analysis on hand-made verify tables -----------------------------------------------------------
def verify_rows(rows):
    base = {"run_id": "r", "op": "gemm", "shape": "N=4 K=8", "n": 4, "k": 8, "profile": "p", "status": "ok",
            "error": "", "timing": "t", "cache_choice": False, "tuner_rank": 1}
    return schema.frame("verify", [{**base, **row} for row in rows])


def cand(m, runner, tactic, tuner_ms, serving, *, winner=False, default=False, bucket=None, key=None, cache=False):
    med, lo, hi = serving
    return {"m": m, "bucket": bucket or m, "runner": runner, "tactic": tactic, "tuner_ms": tuner_ms,
            "serving_ms": med, "serving_p10_ms": lo, "serving_p90_ms": hi, "winner": winner, "default": default,
            "file_key": key or f"k-{runner}-{m}", "cache_choice": cache}


def test_verdicts_faster_slower_within_noise_and_missing_default():
    table = verify_rows([
        cand(1, "A", "0", 0.9, (0.80, 0.79, 0.81), winner=True), cand(1, "D", "-1", 1.0, (1.00, 0.99, 1.01), default=True),
        cand(2, "A", "0", 0.9, (1.20, 1.19, 1.21), winner=True), cand(2, "D", "-1", 1.0, (1.00, 0.99, 1.01), default=True),
        # a gain the size of the noise: bands overlap
        cand(4, "A", "0", 0.9, (0.99, 0.97, 1.02), winner=True), cand(4, "D", "-1", 1.0, (1.00, 0.98, 1.02), default=True),
        cand(8, "A", "0", 0.9, (0.9, 0.89, 0.91), winner=True),  # no default timed: no verdict
    ])
    v = bucket_verdicts(table).set_index("m")
    assert list(v.index) == [1, 2, 4]
    assert v.loc[1, "verdict"] == "faster" and v.loc[1, "serving_speedup"] == pytest.approx(1.25)
    assert v.loc[2, "verdict"] == "slower" and v.loc[2, "regret"] == pytest.approx(0.2)
    assert v.loc[2, "best_runner"] == "D"
    assert v.loc[4, "verdict"] == "within_noise"
    summary = op_summary(bucket_verdicts(table)).iloc[0]
    assert (summary["faster"], summary["slower"], summary["within_noise"]) == (1, 1, 1)


def test_tuner_verdict_judges_the_tuners_own_times_with_the_spread_its_repeats_measured():
    rows = []
    for m, pick_ms in ((1, 0.80), (2, 0.995)):  # the tuner timed its pick 20% and 0.5% faster than the default
        rows += [{**cand(m, "A", "0", pick_ms, (0.90, 0.89, 0.91), winner=True), "profile": f"p{m}"},
                 {**cand(m, "D", "-1", 1.0, (1.00, 0.99, 1.01), default=True), "profile": f"p{m}"}]
    noise = pd.DataFrame({"op": "gemm", "profile": ["p1", "p2"], "noise_pct": 2.0, "noise_source": "repeats"})
    v = bucket_verdicts(verify_rows(rows), noise=noise)
    assert v["tuner_verdict"].tolist() == ["faster", "within_noise"]
    assert v["verdict"].tolist() == ["faster", "faster"]  # serving's own verdict is untouched
    # One tuning's timing with no repeats (or only the threshold band) has no measured spread.
    assert set(bucket_verdicts(verify_rows(rows))["tuner_verdict"]) == {"not_measurable"}
    threshold = noise.assign(noise_source="threshold")
    assert set(bucket_verdicts(verify_rows(rows), noise=threshold)["tuner_verdict"]) == {"not_measurable"}


def test_rank_agreement_is_spearman_of_tuner_and_serving_order():
    rows = [cand(1, "D", "-1", 1.0, (0.05, 0.05, 0.05), default=True)]
    rows += [cand(1, "A", str(i), 0.1 * i, (0.1 * (5 - i), 0.1 * (5 - i), 0.1 * (5 - i)), winner=i == 1) for i in range(1, 5)]
    v = bucket_verdicts(verify_rows(rows)).iloc[0]
    assert v["rank_agreement"] == pytest.approx(-1.0)  # serving reverses the tuner's order exactly


def test_repair_keeps_only_gains_beyond_noise_and_breaks_ties_by_the_tuners_order():
    table = verify_rows([
        # bucket 1: B beats the default beyond noise; A (the tuner's pick) does not
        cand(1, "A", "0", 0.8, (0.99, 0.98, 1.00), winner=True), cand(1, "B", "3", 0.9, (0.90, 0.89, 0.91)),
        cand(1, "D", "-1", 1.0, (1.00, 0.995, 1.01), default=True),
        # bucket 2: a noise-sized gain only -> back to the default
        cand(2, "A", "0", 0.8, (0.995, 0.98, 1.01), winner=True), cand(2, "D", "-1", 1.0, (1.0, 0.99, 1.01), default=True),
        # bucket 4: two candidates tie on the median; the tuner's better-ranked one is kept
        {**cand(4, "B", "1", 0.7, (0.8, 0.79, 0.81)), "tuner_rank": 2},
        {**cand(4, "C", "2", 0.6, (0.8, 0.79, 0.81), winner=True), "tuner_rank": 1},
        cand(4, "D", "-1", 1.0, (1.0, 0.99, 1.01), default=True),
        # between-bucket M is not used for repair
        cand(3, "B", "3", 0.9, (0.1, 0.1, 0.1), bucket=4), cand(3, "D", "-1", 1.0, (1.0, 0.99, 1.01), bucket=4, default=True),
    ])
    picks = repair_picks(table).set_index("bucket")
    assert (picks.loc[1, "runner"], picks.loc[1, "tactic"]) == ("B", "3")
    assert (picks.loc[2, "runner"], picks.loc[2, "tactic"]) == ("D", "-1")
    assert picks.loc[2, "reason"] == "nothing beats the default beyond noise"
    assert (picks.loc[4, "runner"], picks.loc[4, "tactic"]) == ("C", "2")


def test_step_prediction_uses_flashinfers_choice_at_m_and_the_repaired_key_rules():
    table = verify_rows([
        cand(8, "A", "0", 0.8, (0.8, 0.8, 0.8), winner=True, cache=True),
        cand(8, "D", "-1", 1.0, (1.0, 1.0, 1.0), default=True),
        # M=5 runs bucket 8's pick only if its key holds at M=5: here it does not (keyed by M)
        cand(5, "A", "0", 0.8, (0.7, 0.7, 0.7), winner=True, bucket=8, key="k-A-5"),
        cand(5, "D", "-1", 1.0, (0.9, 0.9, 0.9), default=True, bucket=8, cache=True),
    ])
    tuned = predict_step_from_verify(table, shapes=[(4, 8)], tokens=[5, 8], layers=2).set_index("tokens")
    assert tuned.loc[8, "predicted_delta_ms"] == pytest.approx(2 * (0.8 - 1.0))
    assert tuned.loc[5, "predicted_delta_ms"] == pytest.approx(0.0)
    picks = repair_picks(table)
    repaired = predict_step_from_verify(table, shapes=[(4, 8)], tokens=[5, 8], layers=2, picks=picks).set_index("tokens")
    assert repaired.loc[8, "predicted_delta_ms"] == pytest.approx(-0.4)
    assert repaired.loc[5, "predicted_delta_ms"] == pytest.approx(0.0)  # key-8 pick does not hold at M=5


def test_verify_step_changes_per_verified_capture_and_their_sign_agreement():
    from profkit.analysis.step import sign_agreement
    from profkit.analysis.verify import verify_step_changes

    table = verify_rows([
        cand(8, "A", "0", 0.8, (0.8, 0.8, 0.8), winner=True, cache=True),   # tuned runs A at M=8: faster
        cand(8, "D", "-1", 1.0, (1.0, 1.0, 1.0), default=True),
        cand(16, "A", "0", 0.8, (1.1, 1.1, 1.1), winner=True, cache=True),  # ... and slower at M=16
        cand(16, "D", "-1", 1.0, (1.0, 1.0, 1.0), default=True),
    ])
    step = pd.DataFrame({"model": ["m", "m", "other"], "dtype": "fp8", "tokens": [8, 16, 8], "layers": 3})
    captures = {("m", "fp8"): "r", ("other", "fp8"): "not-verified"}
    predicted = verify_step_changes(table, step, captures=captures, linears={"m": [(4, 8)], "other": [(4, 8)]})
    assert predicted[["model", "tokens"]].values.tolist() == [["m", 8], ["m", 16]]  # no rows for 'other'
    assert predicted["predicted_delta_ms"].tolist() == pytest.approx([3 * -0.2, 3 * 0.1])
    measured = pd.DataFrame({"model": "m", "dtype": "fp8", "phase": ["decode", "decode", "prefill"],
                             "tokens": [8, 16, 16], "state": "tuned", "delta_ms": [-0.5, -0.01, 0.3],
                             "beyond_noise": [True, False, True]})
    agreement = sign_agreement(measured, predicted).iloc[0]
    # decode 8 agrees (beyond noise), decode 16 does not (within noise), prefill 16 agrees (beyond noise)
    assert agreement[["sizes", "agree", "beyond_noise", "agree_beyond_noise"]].tolist() == [3, 2, 2, 2]


# -- the repaired cache file through FlashInfer's own loader ------------------------------------
def test_repair_file_loads_in_flashinfer_and_choose_one_returns_the_repaired_picks(tuner, tmp_path):
    buckets = (1, 2, 4, 8)
    wanted = {1: ("ExactMRunner", "6"), 2: ("ToyCublasRunner", "-1"), 4: ("ToyCudnnRunner", "[1, [[2, 3]]]"),
              8: ("ToyCublasRunner", "1")}
    rows = []
    with Steering() as steering:
        for m in buckets:
            for runner, tactic in {wanted[m], ("ToyCublasRunner", "-1")}:
                steering.aim(OP, runner, tactic_from_text(tactic))
                choose(tuner, m)
                fast = (runner, tactic) == wanted[m]
                rows.append(cand(m, runner, tactic, 1.0, (0.5, 0.49, 0.51) if fast else (1.0, 0.99, 1.01),
                                 default=(runner, tactic) == ("ToyCublasRunner", "-1"), winner=fast,
                                 key=steering.calls[-1]["file_key"]))
    picks = repair_picks(verify_rows(rows))
    path = tmp_path / "repaired.json"
    path.write_text(json.dumps(cache_file(picks, metadata=_collect_metadata())))
    tuner.clear_cache()
    assert tuner.load_configs(str(path)) is True
    got = {m: choose(tuner, m) for m in buckets}
    assert {m: (r, schema.tactic_text(t)) for m, (r, t) in got.items()} == wanted
    # The M-keyed pick holds only at its own M (FlashInfer's key rule): M=1 -> bucket 1 only.
    tuner.clear_cache()
    with autotune(False, cache=str(path)):
        assert choose(tuner, 1)[0] == "ExactMRunner"


def test_repair_file_with_other_metadata_is_skipped_by_flashinfer(tuner, tmp_path):
    picks = pd.DataFrame([{"op": OP, "runner": "ToyCudnnRunner", "tactic": "[4, []]", "file_key": "x"}])
    meta = {**_collect_metadata(), "gpu": "Some Other GPU"}
    path = tmp_path / "other.json"
    path.write_text(json.dumps(cache_file(picks, metadata=meta)))
    assert tuner.load_configs(str(path)) is False


def test_repair_cli_writes_the_file_and_names_what_it_did(tmp_path):
    table = verify_rows([cand(1, "A", "0", 0.8, (0.5, 0.49, 0.51), winner=True),
                         cand(1, "D", "-1", 1.0, (1.0, 0.99, 1.01), default=True)])
    src = tmp_path / "verify.parquet"
    table.to_parquet(src)
    like = tmp_path / "cache.json"
    like.write_text(json.dumps({"_metadata": {"gpu": "G"}, "('gemm', 'A', ((1,),), ())": ["A", 1, ["p", 1]]}))
    out = tmp_path / "repaired.json"
    proc = subprocess.run([sys.executable, "-m", "profkit.cli.repair", str(src), "--like", str(like), "--out", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "1 buckets (0 back to the default, 1 serving-best" in proc.stderr
    content = json.loads(out.read_text())
    assert content == {"_metadata": {"gpu": "G"}, "k-A-1": ["A", 0, ["p", 1]]}


def test_verify_without_a_cuda_gpu_exits_non_zero_with_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "profkit", "verify", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "profkit verify: a CUDA GPU is needed (torch.cuda.is_available() is False on this machine)"]


def test_shipped_verify_tables_are_complete():
    from conftest import DATA

    tables = [pd.read_parquet(p) for p in sorted((DATA / "h200-verify" / "sweep").glob("*/verify.parquet"))]
    assert len(tables) == 12
    for t in tables:
        schema.validate(t, "verify")
        assert t["status"].eq("ok").all() and t["serving_ms"].gt(0).all()
        per_m = t.groupby(["op", "shape", "m"])
        assert per_m["winner"].sum().eq(1).all() and per_m["default"].sum().eq(1).all()
        assert np.all(t["serving_p10_ms"] <= t["serving_ms"]) and np.all(t["serving_ms"] <= t["serving_p90_ms"])


def test_policy_table_counts_per_policy_and_sums_tuning_time():
    rows = [cand(1, "A", "0", 0.9, (0.8, 0.79, 0.81), winner=True), cand(1, "D", "-1", 1.0, (1.0, 0.99, 1.01), default=True),
            cand(2, "A", "0", 0.9, (1.2, 1.19, 1.21), winner=True), cand(2, "D", "-1", 1.0, (1.0, 0.99, 1.01), default=True)]
    graph = verify_rows(rows).assign(policy="v2-graph")
    eager = verify_rows(rows[:2]).assign(policy="v2-eager")
    tuning = pd.DataFrame({"policy": ["v2-graph", "v2-graph", "v2-eager"], "op": ["gemm"] * 3, "tuning_s": [10.0, 5.0, 7.0]})
    from profkit.analysis.verify import policy_table

    table = policy_table(pd.concat([graph, eager]), tuning).set_index("policy")
    assert (table.loc["v2-graph", "slower"], table.loc["v2-graph", "faster"]) == (1, 1)
    assert table.loc["v2-graph", "tuning_s"] == 15.0 and table.loc["v2-eager", "tuning_s"] == 7.0
    assert (table.loc["v2-eager", "buckets"], table.loc["v2-eager", "slower"]) == (1, 0)


def test_rank_agreement_is_spearman_with_ties_at_their_average_rank():
    import numpy as np
    import pandas as pd

    from profkit.analysis.verify import _spearman_by

    rng = np.random.default_rng(0)
    samples, want = [], []
    for n in (1, 2, 3, 5, 8, 30):
        for _ in range(50):
            a, b = rng.integers(0, 4, n).astype(float), rng.normal(size=n)
            a[rng.integers(0, n)] = np.nan
            keep = ~(np.isnan(a) | np.isnan(b))
            want.append(pd.Series(a[keep]).rank().corr(pd.Series(b[keep]).rank()) if keep.sum() >= 3 else np.nan)
            samples.append((a, b))
    samples.append((np.ones(5), np.arange(5.0)))  # a constant side ranks nothing
    want.append(np.nan)
    order = rng.permutation(sum(len(a) for a, _ in samples))  # each group's rows spread over the table
    g = np.repeat(np.arange(len(samples)), [len(a) for a, _ in samples])[order]
    a, b = (np.concatenate([s[i] for s in samples])[order] for i in (0, 1))
    got = _spearman_by(a, b, g, len(samples))
    assert got == pytest.approx(np.array(want), nan_ok=True, abs=1e-12)


def test_a_categorical_read_holds_the_plain_read_with_sorted_categories_shared_by_every_file():
    from conftest import DATA
    from profkit.cli.compare import _VERIFY_COLUMNS
    from profkit.sources.verify import read_verify

    paths = (DATA / "h200-verify" / "sweep", DATA / "h200-moe")  # dense tables (no routing), then MoE ones
    plain, few = read_verify(*paths, columns=_VERIFY_COLUMNS), read_verify(*paths, columns=_VERIFY_COLUMNS,
                                                                           categorical=True)
    assert list(few.columns) == list(plain.columns)
    text = [c for c, t in few.dtypes.items() if isinstance(t, pd.CategoricalDtype)]
    assert set(text) == {"run_id", "op", "shape", "profile", "runner", "tactic", "routing", "source"}
    for name in text:
        assert list(few[name].cat.categories) == sorted(plain[name].dropna().unique())
        back = few[name].astype(object).where(few[name].notna(), None).astype(plain[name].dtype)
        pd.testing.assert_series_equal(back, plain[name], check_exact=True)
    pd.testing.assert_frame_equal(few.drop(columns=text), plain.drop(columns=text), check_exact=True)


def test_bucket_verdicts_are_the_same_in_slices_of_any_size_and_from_a_categorical_read(monkeypatch):
    import profkit.analysis.verify as verify
    from conftest import DATA
    from profkit.cli.compare import _VERIFY_COLUMNS
    from profkit.sources.verify import read_verify

    tables = [read_verify(DATA / "h200-verify" / "sweep"), verify.of_routing(read_verify(DATA / "h200-moe"))]
    # A slice costs some milliseconds: slices of a few rows cut every 5th size M (each op, shape, routing and verdict).
    sizes = [t[t["m"].isin(t["m"].unique()[::5])] for t in tables]
    whole, whole_sizes = ([verify.bucket_verdicts(t) for t in inputs] for inputs in (tables, sizes))
    for rows, inputs, wanted in ((1, sizes, whole_sizes), (7, sizes, whole_sizes), (500, tables, whole)):
        monkeypatch.setattr(verify, "_SLICE_ROWS", rows)  # a group per slice, groups larger, several per slice
        for table, want in zip(inputs, wanted):
            pd.testing.assert_frame_equal(verify.bucket_verdicts(table), want, check_exact=True)
    few = read_verify(DATA / "h200-moe", columns=_VERIFY_COLUMNS, categorical=True)
    pd.testing.assert_frame_equal(verify.bucket_verdicts(verify.of_routing(few)), whole[1], check_exact=True)
