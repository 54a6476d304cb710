"""profkit advise: plans from CPU captures of FlashInfer's real AutoTuner, and the plan's switches on the real code."""

import json
import time

import pandas as pd
import pytest
from flashinfer.autotuner import AutoTuner, autotune
from flashinfer.tactics_blocklist import TacticsBlocklist

import profkit
import profkit.testing as T
from profkit.analysis.advise import advise, autotune_arguments, metadata_from_runs, plan_violations
from profkit.cli import main
from profkit.errors import ProfkitError
from profkit.outputs import engine_plans as writers
from profkit.views import advise as plan_views

from conftest import DATA

MEASURE_S = 0.004  # host seconds each candidate costs (slept in forward)
PREP_S = 0.03      # seconds the never-winning runner spends in get_valid_tactics per bucket, like cuDNN plan builds
M = 8              # hybrid buckets 1, 2, 4, 8


class SlowCublas(T.ToyCublasRunner):
    """cuBLAS-like: tactic 0 is fastest, 1 is slow, 2 fails."""

    def forward(self, inputs, tactic=-1, do_preparation=False, **kwargs):
        time.sleep(MEASURE_S)
        return super().forward(inputs, tactic=tactic, do_preparation=do_preparation, **kwargs)


class NeverWins(T.ToyCudnnRunner):
    """cuDNN-like: builds its plans in get_valid_tactics, and is always 25% slower than the winner."""

    prep_calls = 0

    def __init__(self):
        super().__init__(tactics=((1, ((2, 3),)), (5, ())), fallback=())

    def get_valid_tactics(self, inputs, profile):
        type(self).prep_calls += 1
        time.sleep(PREP_S)
        return super().get_valid_tactics(inputs, profile)

    def forward(self, inputs, tactic=-1, do_preparation=False, **kwargs):
        time.sleep(MEASURE_S)
        return super().forward(inputs, tactic=tactic, do_preparation=do_preparation, **kwargs)


# Relative times per op: (default = runners[0] tactic -1, tactic 0, tactic 1, the never-winning runner).
_NO_VERDICTS = pd.DataFrame({"op": pd.Series(dtype="string"), "recommendation": pd.Series(dtype="string")})
GAIN = {"gain_op": (1.10, 1.00, 1.15, 1.25), "noise_op": (1.005, 1.00, 1.003, 1.25)}


def time_fn_for(op):
    default, t0, t1, never = GAIN[op]

    def time_fn(runner, tactic, shapes):
        base = 0.01 + shapes[0][0] / 100.0  # grows with M, so big buckets gain most in absolute time
        if runner == "NeverWins":
            return base * never
        return base * {-1: default, 0: t0, 1: t1}[tactic]
    return time_fn


def runners():
    return [SlowCublas(), NeverWins()]


def tune_ops(ops=("gain_op", "noise_op"), m=M):
    for op in ops:
        AutoTuner.get().choose_one(op, runners(), T.gemm_config(), T.gemm_inputs(m))


def by_op_time_fn(runner, tactic, shapes):
    return time_fn_for(_current_op[0])(runner, tactic, shapes)


_current_op = ["gain_op"]


def capture_ops(ops=("gain_op", "noise_op"), m=M):
    """One capture of the toy ops through the real choose_one, each op with its own timings."""
    with T.cpu_autotuner(by_op_time_fn):
        with profkit.capture(tune=True) as cap:
            for op in ops:
                _current_op[0] = op
                tune_ops((op,), m)
        return cap.tables()


@pytest.fixture(scope="module")
def tables():
    return capture_ops()


def test_runner_that_never_wins_and_failing_tactic_are_blocked(tables):
    plan = advise(tables)
    t = plan.tactics.set_index(["op", "runner", "tactic"])
    assert plan.blocklist["gain_op::NeverWins"] == [[1, [[2, 3]]], [5, []]]
    assert plan.blocklist["gain_op::SlowCublas"] == [1, 2]  # 15% slower, and failing
    assert "failed" in t.loc[("gain_op", "SlowCublas", "2"), "reason"]
    assert not t.loc[("gain_op", "SlowCublas", "0"), "blocked"]  # the winner stays
    gain = plan.buckets[plan.buckets["op"] == "gain_op"]
    # a blocked tactic saves its measuring time in every bucket: 3 blocked candidates x MEASURE_S each
    assert (gain["blocked_s"] > 2.5 * MEASURE_S).all() and (gain["blocked_s"] < gain["measure_s"]).all()
    # ... but not the never-winning runner's get_valid_tactics (PREP_S per bucket stays planned)
    row = plan.ops.set_index("op").loc["gain_op"]
    assert row["prep_kept_s"] >= 4 * PREP_S and row["planned_s"] >= 4 * PREP_S
    assert row["planned_s"] < row["full_s"] and row["cost_ms"] == 0.0


def test_op_whose_gains_are_all_within_noise_is_not_tuned(tables):
    plan = advise(tables)
    assert plan.skip_ops == ("noise_op",)
    row = plan.ops.set_index("op").loc["noise_op"]
    assert row["decision"] == "skip" and row["planned_s"] == 0.0 and row["cost_ms"] == 0.0
    assert row["verdict"].startswith("do not tune noise_op on this GPU: full tuning") and "buys 0.0 us" in row["verdict"]
    assert "noise_op" not in {k.split("::")[0] for k in plan.blocklist}
    assert plan.tuning_buckets is None  # gain_op's 10% gain is beyond noise at every bucket


def test_budget_forces_a_trade_off(tables):
    free = advise(tables)
    gain_full = free.ops.set_index("op").loc["gain_op", "planned_s"]
    budget = 0.6 * gain_full
    plan = advise(tables, budget_s=budget)
    assert plan.planned_s <= budget
    assert plan.cost_pct > 0 and plan.ops.set_index("op").loc["gain_op", "decision"] == "some buckets"
    b = plan.buckets[plan.buckets["op"] == "gain_op"].set_index("bucket")
    assert set(b.index[b["tuned"]]) == set(plan.tuning_buckets)
    # No swap of a tuned bucket for a dropped one fits the budget and risks less (costs are measured seconds).
    seconds = b["tuning_s"] - b["jit_s"] - b["blocked_s"]
    for kept in b.index[b["tuned"]]:
        for dropped in b.index[~b["tuned"]]:
            fits = plan.planned_s - seconds[kept] + seconds[dropped] <= budget
            assert not (fits and b.loc[dropped, "value_ms"] > b.loc[kept, "value_ms"])
    loose = advise(tables, max_slowdown_pct=100.0)
    assert loose.skip_ops == ("gain_op", "noise_op") and loose.planned_s == 0.0  # everything fits 100%
    tight = advise(tables, max_slowdown_pct=0.0)
    assert tight.planned_s == pytest.approx(free.planned_s)


def test_batch_size_mix_keeps_only_the_buckets_it_hits(tables):
    plan = advise(tables, mix={3: 1.0, 100000: 5.0})  # M=3 runs bucket 4; beyond the range the default runs
    assert plan.tuning_buckets == (4,)
    w = plan.buckets[plan.buckets["op"] == "gain_op"].set_index("bucket")["weight"]
    assert w.loc[4] == pytest.approx(1 / 6) and w.drop(4).eq(0).all()


def test_serving_verdicts_override_the_tuner(tables):
    verdicts = pd.DataFrame({"op": "gain_op", "n": 4, "k": 8, "bucket": [1, 2, 4, 8],
                             "serving_speedup": [1.01, 0.99, 1.0, 1.3], "serving_noise": 0.03})
    plan = advise(tables, verify=verdicts)
    assert plan.gain_source == "serving"
    assert plan.tuning_buckets == (8,)
    b = plan.buckets[plan.buckets["op"] == "gain_op"].set_index("bucket")
    assert b.loc[8, "gain_source"] == "serving" and b.loc[8, "noise_pct"] == pytest.approx(3.0)
    assert not b.loc[[1, 2, 4], "beyond_noise"].any()
    # bucket_verdicts' own layout: shape labels, serving default_ms, rows between buckets (at_bucket False) ignored
    between = verdicts.assign(serving_speedup=2.0, at_bucket=False)
    own = pd.concat([verdicts.assign(at_bucket=True), between]).drop(columns=["n", "k"]).assign(
        shape="N=4 K=8", default_ms=1.3)
    same = advise(tables, verify=own)
    assert same.tuning_buckets == (8,)
    assert same.buckets.set_index(["op", "bucket"]).loc[("gain_op", 8), "tuned_ms"] == pytest.approx(1.0)


def test_budgets_are_checked(tables):
    with pytest.raises(ProfkitError, match="either"):
        advise(tables, budget_s=1.0, max_slowdown_pct=1.0)
    with pytest.raises(ProfkitError, match="negative"):
        advise(tables, budget_s=-1.0)


def test_metadata_from_runs_refuses_mixed_environments():
    runs = pd.DataFrame({"flashinfer": ["0.7.2.post1", "0.6.16"], "gpu": ["NVIDIA H200", "NVIDIA H200"]})
    with pytest.raises(ProfkitError, match="flashinfer_version"):
        metadata_from_runs(runs)
    meta = metadata_from_runs(runs.iloc[:1])
    assert meta["gpu"] == "NVIDIA H200" and meta["cudnn_version"] == "*"


def test_blocklist_removes_exactly_the_named_tactics_in_a_tuning_run(tables, tmp_path, monkeypatch):
    plan = advise(tables)
    path = tmp_path / "blocklist.json"
    path.write_text(writers.blocklist_json(plan))
    reader = TacticsBlocklist()
    assert reader.load(str(path))  # the CPU capture's metadata matches this machine
    kwargs, env = autotune_arguments(plan, str(path))
    assert env == {"FLASHINFER_TACTICS_BLOCKLIST": str(path)}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(AutoTuner, "_instance", None)  # FlashInfer reads the variable in __init__
    NeverWins.prep_calls = 0
    with T.cpu_autotuner(by_op_time_fn):
        _current_op[0] = "gain_op"
        with profkit.capture() as cap, autotune(True, **kwargs):
            tune_ops(("gain_op",))
        c = cap.candidates
    before = tables.candidates[(tables.candidates["op"] == "gain_op") & (tables.candidates["source"] == "flashinfer")]
    blocked = {(k.split("::")[1], json.dumps(t, separators=(", ", ": "))) for k, ts in plan.blocklist.items()
               if k.startswith("gain_op::") for t in ts}
    seen = lambda f: set(zip(f["runner"], f["tactic"]))  # noqa: E731
    assert seen(c[c["source"] == "flashinfer"]) == seen(before) - blocked
    assert plan_violations(plan, cap.tables()).empty
    found = plan_violations(plan, tables)  # the full tuning run did time them
    assert set(found["what"]) == {"blocked tactic timed", "skipped op profiled"}
    assert NeverWins.prep_calls == 4  # get_valid_tactics still runs in every bucket: its prep is not saved


def test_blocklist_with_another_gpus_metadata_is_skipped_by_flashinfer(tmp_path):
    out = tmp_path / "advise"
    assert main(["advise", str(DATA / "h200" / "step" / "llama3-8b-fp8" / "capture"), "--out", str(out)]) == 0
    data = json.loads((out / "blocklist.json").read_text())
    assert data["_metadata"]["gpu"] == "NVIDIA H200" and data["_metadata"]["cutlass_dsl_version"] == "unknown"
    assert data["invalid_tactics"]
    assert TacticsBlocklist().load(str(out / "blocklist.json")) is False  # this CPU is not an H200


def test_plan_switches_tune_exactly_the_planned_buckets_and_ops(tables):
    plan = advise(tables, mix={3: 1.0, 8: 1.0})
    assert plan.tuning_buckets == (4, 8) and plan.skip_ops == ("noise_op",)
    kwargs, env = autotune_arguments(plan)
    assert kwargs == {"tuning_buckets": (4, 8), "skip_ops": {"noise_op"}} and env == {}
    with T.cpu_autotuner(by_op_time_fn) as tuner:
        with profkit.capture() as cap, autotune(True, **kwargs):
            for op in ("gain_op", "noise_op"):
                _current_op[0] = op
                tune_ops((op,))
        tuning, candidates = cap.tuning, cap.candidates
        assert set(candidates["op"]) == {"gain_op"}
        assert sorted(candidates["bucket"].unique()) == [4, 8]
        # this run set no blocklist: only the blocked tactics show up, no bucket or op outside the plan
        assert set(plan_violations(plan, cap.tables())["what"]) == {"blocked tactic timed"}
        assert "bucket not planned" in set(plan_violations(plan, tables)["what"])
        calls = tuning[tuning["kind"] == "call"].set_index("op")["status"]
        assert calls.loc["noise_op"] == "skipped"
        # outside the context FlashInfer maps M to its own bucket: 3 -> 4 (tuned), 2 -> 2 (not tuned: default)
        rs = runners()
        chosen = lambda m: tuner.choose_one("gain_op", rs, T.gemm_config(), T.gemm_inputs(m))  # noqa: E731
        runner, tactic = chosen(3)
        assert (type(runner).__name__, tactic) == ("SlowCublas", 0)
        runner, tactic = chosen(2)
        assert runner is rs[0] and tactic == -1


def test_writers_name_the_switches_and_versions(tables):
    plan = advise(tables, mix={3: 1.0, 8: 1.0})
    snippet = writers.python_snippet(plan, "/x/blocklist.json")
    assert "flashinfer.autotune(True, tuning_buckets=(4, 8), skip_ops={'noise_op'})" in snippet
    assert "FLASHINFER_TACTICS_BLOCKLIST" in snippet and "0.7.2.post1" in snippet
    compile(snippet, "plan.py", "exec")
    assert "--flashinfer-autotune-skip-ops noise_op" in writers.sglang_flags(plan)
    assert "export VLLM_FLASHINFER_AUTOTUNE_SKIP_OPS=noise_op" in writers.vllm_env(plan)
    nothing = advise(tables, max_slowdown_pct=100.0)
    assert "--disable-flashinfer-autotune" in writers.sglang_flags(nothing)
    assert "Do not tune" in writers.python_snippet(nothing)


def test_plan_md_names_why_each_runner_lost_its_tactics(tables):
    plan = advise(tables)
    line = next(l for l in writers.plan_markdown(plan).splitlines() if l.startswith("- blocklist:"))
    slow = line.split("gain_op::SlowCublas: ")[1].split(" s of measuring")[0]
    assert slow.startswith("2 of 3 tactics (") and "failed" in slow  # the tactics' own reasons, not a stock phrase
    t = plan.tactics[(plan.tactics["runner"] == "SlowCublas") & plan.tactics["blocked"]]
    assert all(reason in slow for reason in t["reason"])


def test_report_section_lays_out_the_plan_analysis_computed(tables):
    from types import SimpleNamespace

    from profkit.analysis.advise import budget_frontier
    from profkit import report

    plan = advise(tables)  # what the report's Results hold: the plan is computed there, the view only draws it
    ctx = SimpleNamespace(results=SimpleNamespace(plan=plan, plan_error="", frontier=budget_frontier(plan),
                                                  op_verdicts=_NO_VERDICTS))
    section = report.plan_section(ctx)
    assert isinstance(section, report.Section) and "do not tune noise_op" in section.text
    assert [f.name for f in section.figures] == ["advise_gain_op", "advise_noise_op"]
    assert section.figures[0].draw().axes and plan_views.plot_plan(plan).axes
    assert "planned" in report.markdown_table(section.tables[0]) and len(section.tables[1].frame) == 5
    empty = SimpleNamespace(results=SimpleNamespace(plan=None, plan_error="", frontier=None, op_verdicts=_NO_VERDICTS))
    assert report.plan_section(empty) is None


def test_report_plan_of_many_ops_is_one_figure(tables, monkeypatch):
    from types import SimpleNamespace

    from profkit.report import _detail

    monkeypatch.setattr(_detail, "MAX_PLAN_FIGURES", 1)  # the toy plan has two ops: above the limit
    plan = advise(tables)
    section = _detail.plan_section(SimpleNamespace(results=SimpleNamespace(plan=plan, plan_error="", frontier=None,
                                                                               op_verdicts=_NO_VERDICTS)))
    assert [f.name for f in section.figures] == ["advise_all"] and "all 2 ops" in section.figures[0].title
    assert section.figures[0].draw().axes


@pytest.mark.parametrize("path", ["fp8", "bf16", "step/llama3-8b-bf16/capture"])
def test_cli_on_shipped_data(path, tmp_path, capsys):
    out = tmp_path / "a"
    assert main(["advise", str(DATA / "h200" / path), "--max-slowdown", "1", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["blocklist.json", "plan.json", "plan.md", "plan.py",
                                                    "sglang_flags.txt", "vllm_env.sh"]
    printed = capsys.readouterr().out
    assert "full_tuning_s" in printed and "planned_tuning_s" in printed
