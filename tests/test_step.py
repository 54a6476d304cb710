"""profkit step: model shapes, the step prediction and break-even, and the CLI without a GPU."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import profkit
from profkit import models, schema
from profkit.analysis.step import break_even, linear_deltas, measured_step_change, predict_step_change
from profkit.bench.step import picks_text
from conftest import DATA


def test_llama_shapes_and_parameter_count_match_the_public_config():
    llama = models.load_model("llama3-8b")
    assert [(l.name, l.n, l.k) for l in models.linear_layers(llama)] == [
        ("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096), ("down", 4096, 14336)]
    assert models.parameter_count(llama) == 8_030_261_248  # Llama-3.1-8B's published count


def test_wider_models_shapes():
    qwen = models.load_model("qwen2.5-32b")
    assert [(l.n, l.k) for l in models.linear_layers(qwen)] == [(7168, 5120), (5120, 5120), (55296, 5120),
                                                               (5120, 27648)]
    assert round(models.parameter_count(qwen) / 1e9, 1) == 32.8  # 32.8B on its model page (biases aside)
    oss = models.load_model("gpt-oss-120b")
    assert [(l.name, l.n, l.k) for l in models.linear_layers(oss)] == [("qkv", 5120, 2880), ("o", 2880, 4096)]
    with pytest.raises(Exception, match="mixture of experts"):
        models.parameter_count(oss)
    with pytest.raises(Exception, match="no model config 'llama9'"):
        models.load_model("llama9")


def winners(rows):
    """Hand-made winners of a bf16 op for N=8, K=4 at buckets 1, 2, 4, 8 (only what the analysis reads)."""
    return schema.frame("winners", [
        {"op": "bf16_gemm", "profile": f"(({b}, 4), (4, 8), (0,))", "bucket": b, "runner": r, "tactic": "0",
         "time_ms": t, "default_time_ms": d, "source": "profiled"} for b, r, t, d in rows])


W = winners([(1, "CudnnBf16GemmRunner", 1.0, 1.5), (2, "CudnnBf16GemmRunner", 2.0, 1.5),  # 2: slower than default
             (4, "CublasltBf16GemmRunner", 3.0, 4.0), (8, "CudnnBf16GemmRunner", 4.0, math.nan)])


def test_linear_deltas_follow_flashinfers_bucket_lookup():
    d = linear_deltas(W, shapes=[(8, 4)], tokens=[1, 2, 3, 4, 5, 9]).set_index("tokens")
    assert d.loc[1, "delta_ms"] == -0.5 and d.loc[1, "applies"]
    assert d.loc[2, "delta_ms"] == 0.5  # a winner slower than the default is predicted as a loss
    assert d.loc[3, "bucket"] == 4 and not d.loc[3, "applies"] and d.loc[3, "delta_ms"] == 0  # cuBLASLt at M != 4
    assert d.loc[4, "delta_ms"] == -1.0
    assert d.loc[5, "bucket"] == 8 and math.isnan(d.loc[5, "delta_ms"])  # the default was not timed
    assert not d.loc[9, "applies"] and "above the largest tuned bucket" in d.loc[9, "note"]
    assert linear_deltas(W, shapes=[(16, 4)], tokens=[1]).empty


def test_prediction_sums_linears_times_layers():
    two = pd.concat([W, W.assign(profile=W["profile"].str.replace("(4, 8)", "(4, 16)", regex=False))])
    p = predict_step_change(two, shapes=[(8, 4), (16, 4)], tokens=[1, 2, 5], layers=3).set_index("tokens")
    assert p.loc[1, "predicted_delta_ms"] == pytest.approx(2 * -0.5 * 3)
    assert p.loc[2, "predicted_delta_ms"] == pytest.approx(2 * 0.5 * 3)
    assert math.isnan(p.loc[5, "predicted_delta_ms"]) and p.loc[5, "n_missing_default"] == 2
    assert (p["n_linears"] == 2).all()


def step_rows(state, times):
    return [{"engine": "profkit-step", "model": "m", "dtype": "bf16", "phase": "decode", "tokens": 8,
             "state": state, "repetition": i, "step_ms": t} for i, t in enumerate(times)]


def interleaved(*passes, tokens=8):
    """Step rows of states timed pass after pass in one process: ((state, times), ...) in time order."""
    return [{**r, "tokens": tokens} for state, times in passes for r in step_rows(state, times)]


def three_passes(**times):
    """Each state's three passes interleaved (a, b, a, b, a, b): times[state] = three passes of repetitions."""
    return interleaved(*[(state, reps[i]) for i in range(3) for state, reps in times.items()])


def test_measured_change_and_break_even():
    bench = schema.frame("bench", three_passes(untuned=[[10.0, 10.2, 10.1], [10.1, 10.0, 10.2], [10.2, 10.3, 10.1]],
                                               tuned=[[9.0, 9.1, 9.2], [9.1, 9.0, 9.0], [9.2, 9.1, 9.0]],
                                               torch=[[10.1, 10.3, 10.2], [9.9, 10.0, 10.1], [10.2, 10.0, 10.3]]))
    m = measured_step_change(bench).set_index("state")
    assert m.loc["tuned", "delta_ms"] == pytest.approx(-1.07, abs=0.01) and m.loc["tuned", "verdict"] == "faster"
    assert m.loc["tuned", "beyond_noise"] and (m["n"] == 3).all() and (m["design"] == "paired").all()
    assert m.loc["torch", "verdict"] == "within_noise" and not m.loc["torch", "beyond_noise"]
    tuned = m.loc["tuned"]
    assert tuned["effect_lo"] < tuned["effect"] < tuned["effect_hi"] < 0
    assert tuned["noise_ms"] == pytest.approx(tuned["detectable"] * tuned["baseline_ms"])
    b = break_even(m.reset_index(), tuning_s=90.0).set_index("state")
    assert b.loc["tuned", "steps_to_break_even"] == pytest.approx(90_000 / -tuned["delta_ms"])
    assert b.loc["tuned", "serving_s_to_break_even"] == pytest.approx(b.loc["tuned", "steps_to_break_even"]
                                                                       * tuned["step_ms"] / 1e3)
    assert math.isinf(b.loc["torch", "steps_to_break_even"])


def test_one_pass_of_each_state_is_not_measurable():
    # Three tight repetitions each and a 10% gap: still one pass of A then one of B, which cannot
    # tell a change from drift between passes (the old rule called it slower beyond noise).
    bench = schema.frame("bench", step_rows("untuned", [5.0, 5.01]) + step_rows("tuned", [5.5, 5.52]))
    m = measured_step_change(bench)
    assert m["verdict"].tolist() == ["not_measurable"] and m["slower"].tolist() == [False]
    assert m["delta_pct"].iloc[0] == pytest.approx(10.0, abs=0.3) and math.isnan(m["noise_ms"].iloc[0])


def test_slower_than_untuned_is_flagged():
    bench = schema.frame("bench", three_passes(untuned=[[5.0, 5.01], [5.02, 5.0], [5.01, 5.03]],
                                               tuned=[[5.5, 5.52], [5.51, 5.5], [5.53, 5.52]]))
    assert measured_step_change(bench)["slower"].tolist() == [True]


def test_a_state_given_twice_is_an_aa_pair_of_its_own():
    rows = pd.DataFrame(three_passes(untuned=[[5.0], [5.1], [5.05]], **{"untuned-2": [[5.01], [5.09], [5.06]]}))
    rows["series"] = rows["state"]
    rows["state"] = "untuned"
    m = measured_step_change(rows)
    assert m["state"].tolist() == ["untuned-2"] and m["verdict"].tolist() == ["within_noise"]


def test_shipped_step_results_are_real_and_complete():
    files = sorted((DATA / "h200" / "step").glob("*/step.jsonl"))
    bench = profkit.read_bench(files)  # the same reader as engine results
    assert len(bench) == sum(1 for f in files for _ in open(f)) and (bench["engine"] == "profkit-step").all()
    assert set(bench["model"]) == {"llama3-8b", "qwen2.5-32b"} and set(bench["dtype"]) == {"bf16", "fp8"}
    assert set(bench["state"]) == {"untuned", "tuned", "cache", "torch"} and set(bench["phase"]) == {"decode", "prefill"}
    assert (bench.groupby(["model", "dtype", "phase", "tokens", "state"]).size() == 3).all()
    assert bench["step_ms"].notna().all() and (bench["gpu"] == "NVIDIA H200").all()


def test_step_without_a_gpu_says_so_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "profkit.cli.step", "--model", "llama3-8b", "--dtype", "bf16",
                             "--out", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "profkit step: a CUDA GPU is needed (torch.cuda.is_available() is False on this machine)"]


def test_step_rows_are_written_atomically_with_nan_as_null(tmp_path, monkeypatch, capsys):
    """The rows a (here stubbed) GPU run returns land in step.jsonl through the atomic writer: no half file."""
    from profkit.bench import graphs, step as bench_step
    from profkit.cli import main
    from profkit.outputs import atomic

    rows = [{"state": "untuned", "tokens": 1, "step_ms": 0.5}, {"state": "tuned", "tokens": 1, "step_ms": math.nan}]
    monkeypatch.setattr(graphs, "no_cuda", lambda program: False)
    monkeypatch.setattr(bench_step, "run_step", lambda *a, out, **k: (Path(out).mkdir(parents=True), rows)[1])
    written, write_text = [], atomic.write_text
    monkeypatch.setattr(atomic, "write_text", lambda path, text, **k: written.append(path) or write_text(path, text))
    out = tmp_path / 'a"$(touch pwned)\x1b[31m\n<tag>'  # a hostile folder name: written as given, shown escaped
    assert main(["step", "--model", "llama3-8b", "--dtype", "bf16", "--out", str(out)]) == 0
    assert written == [out / "step.jsonl"]
    got = [json.loads(line) for line in (out / "step.jsonl").read_text().splitlines()]
    assert got == [rows[0], {**rows[1], "step_ms": None}]
    assert sorted(p.name for p in out.iterdir()) == ["step.jsonl"]  # no temporary file left
    said = capsys.readouterr().out
    assert said.endswith("step.jsonl\n") and "\x1b" not in said and said.count("\n") == 1 and "\\x1b[31m" in said


# -- what FlashInfer ran per linear (picks_text), on hand-made choices ---------------------------
PICK_NAMES = ["qkv", "o", "gate_up", "down"]


def choice(runner: str, tactic: str) -> dict:
    return {"op": "fp8_gemm", "runner": runner, "tactic": tactic}


def test_the_captured_forward_names_each_linear_of_its_first_layer():
    warm = [choice("CublasFp8GemmRunner", "-1")] * 8  # 2 layers x 4 linears, per eager warm-up
    captured = [choice("CudnnFp8GemmRunner", "[0, []]"), choice("CublasFp8GemmRunner", "1"),
                choice("CublasFp8GemmRunner", "0"), choice("CublasFp8GemmRunner", "-1")] * 2
    text = picks_text(warm + warm + captured, PICK_NAMES, layers=2)
    assert text == ("qkv=CudnnFp8GemmRunner:[0, []] o=CublasFp8GemmRunner:1 gate_up=CublasFp8GemmRunner:0 "
                    "down=CublasFp8GemmRunner:-1")


def test_choices_that_do_not_match_the_linear_calls_are_said_not_guessed():
    assert picks_text([choice("CublasFp8GemmRunner", "-1")] * 5, PICK_NAMES, layers=1) == (
        "unattributed: 5 choices for 12 linear calls")
    assert picks_text([], PICK_NAMES, layers=1) == ""  # torch linears: FlashInfer chose nothing


def with_picks(rows, picks, tokens=8):
    return [{**r, "picks": picks, "tokens": tokens} for r in rows]


def test_same_kernels_says_where_a_state_ran_the_baselines_picks():
    from profkit.analysis.step import same_kernels

    default, tuned = "qkv=Cublas:-1 o=Cublas:-1", "qkv=Cublas:1 o=Cublas:-1"
    rows = (with_picks(step_rows("untuned", [1.0, 1.0]), default) + with_picks(step_rows("repaired", [1.0, 1.0]), default)
            + with_picks(step_rows("untuned", [2.0]), default, tokens=24)
            + with_picks(step_rows("repaired", [2.0]), tuned, tokens=24)
            + with_picks(step_rows("cache", [2.0]), "unattributed: 5 choices for 12 linear calls", tokens=24))
    same = same_kernels(pd.DataFrame(rows)).set_index(["state", "tokens"])["same"]
    assert same.to_dict() == {("repaired", 8): True, ("repaired", 24): False}  # unattributed picks say nothing
    assert same_kernels(pd.DataFrame(step_rows("untuned", [1.0]))).empty  # no picks recorded


def test_fallback_sizes_flag_steps_that_ran_tactic_minus_one_everywhere():
    from profkit.analysis.step import fallback_sizes

    rows = (with_picks(step_rows("v2-graph", [1.0]), "qkv=Cudnn:-1 o=Cudnn:-1")
            + with_picks(step_rows("v2-graph", [2.0]), "qkv=Cudnn:-1 o=Cublaslt:3", tokens=24))
    flags = fallback_sizes(pd.DataFrame(rows)).set_index("tokens")["fallback"]
    assert flags.to_dict() == {8: True, 24: False}


def test_pass_drift_measures_a_state_between_its_passes_in_one_process():
    from profkit.analysis.step import pass_drift

    def run(source, *passes):
        return [{**r, "source": source} for state, times in passes for r in step_rows(state, times)]

    # untuned, cache, untuned in one file: untuned's two passes sit 0.4 ms apart, each only 0.1 ms wide.
    rows = pd.DataFrame(run("a", ("untuned", [10.0, 10.1]), ("cache", [9.0, 9.0]), ("untuned", [10.4, 10.5]))
                        + run("b", ("untuned", [20.0, 20.0]), ("cache", [19.0])))  # one pass each: no drift
    drift = pass_drift(rows)
    assert drift[["source", "state", "passes"]].values.tolist() == [["a", "untuned", 2]]
    row = drift.iloc[0]
    assert row["drift_ms"] == pytest.approx(0.4) and row["within_ms"] == pytest.approx(0.1)
    assert row["drift_pct"] == pytest.approx(100 * 0.4 / 10.25)


def test_against_best_takes_the_faster_baseline_per_size():
    from profkit.analysis.step import against_best

    at_8 = three_passes(untuned=[[10.0, 10.1]] * 3, cache=[[9.0, 9.1], [9.05, 9.1], [9.0, 9.05]],
                        repaired=[[9.5, 9.6], [9.55, 9.6], [9.5, 9.55]])
    at_24 = [{**r, "tokens": 24} for r in three_passes(untuned=[[5.0, 5.1], [5.05, 5.1], [5.0, 5.05]],
                                                       cache=[[6.0, 6.1]] * 3,
                                                       repaired=[[5.05, 5.1], [5.0, 5.1], [5.05, 5.05]])]
    rows = pd.DataFrame(at_8 + with_picks(at_24, "", tokens=24)
                        + with_picks(step_rows("repaired", [1.0]), "", tokens=64))  # no baseline at 64: left out
    best = against_best(rows).set_index("tokens")
    assert best["best"].to_dict() == {8: "cache", 24: "untuned"}
    assert best.loc[8, "slower"] and not best.loc[24, "slower"]  # +5% against cache; within noise of untuned
    assert best.loc[24, "verdict"] == "within_noise"
    assert best.loc[8, "best_ms"] == pytest.approx(9.05, abs=0.01)


def test_step_comparisons_keep_each_process_with_its_own_untuned():
    from profkit.analysis.step import step_comparisons

    def run(source, *states):
        return [{**r, "source": source} for state in states for r in step_rows(state, [1.0])]

    rows = pd.DataFrame(run("set/a", "untuned", "v2-graph") + run("set/b", "untuned", "v2-eager")
                        + run("three/untuned", "untuned") + run("three/cache", "cache"))
    where = [w for w, _, _, _ in step_comparisons(rows)]
    assert where == ["set/a", "set/b", "three"]  # a set without untuned in every run is pooled
    assert step_comparisons(rows.iloc[:0]) == []  # no rows: nothing to compare, not a KeyError


def test_cache_change_only_where_the_cache_state_loaded_the_named_file():
    from profkit.analysis.step import cache_change

    loaded = [{**r, "command": "profkit step --cache cache=data/h200/step/m-bf16/cache.json"}
              for r in step_rows("untuned", [10.0, 10.1]) + step_rows("cache", [9.0, 9.1])]
    change = cache_change(pd.DataFrame(loaded), cache="h200/step/m-bf16/cache.json")
    assert change["state"].tolist() == ["cache"] and change["delta_ms"].iloc[0] == pytest.approx(-1.0)
    assert cache_change(pd.DataFrame(loaded), cache="h200/step/other/cache.json").empty
    assert cache_change(pd.DataFrame(loaded[:2]), cache="h200/step/m-bf16/cache.json").empty  # no cache rows
