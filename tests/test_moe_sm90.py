"""FlashInfer's SM90 CuTe-DSL fused MoE, on the CPU: an MoE-shaped runner with nested-tuple tactics
(profkit.testing.moe.ToySm90MoERunner) through the real AutoTuner, and the MoE analysis on the shipped
H200 data (data/h200-moe).

Capture and decoding, the steering of verify, repair files through FlashInfer's own load_configs
(choose_one returns the repaired tuple; a bucket repaired back to -1), routings reproducible from a
seed, the all-candidates-failed headline, and the GPU programs' one-line exit without a GPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib

import numpy as np
import pandas as pd
import pytest
import torch
from flashinfer.autotuner import AutoTuner, autotune

import profkit
import profkit.cli
from conftest import DATA
from profkit import schema
from profkit.testing import moe as M
from profkit.analysis import decode_tactic, moe, tactic_words, winner_card
from profkit.analysis._frames import gemm_shape, moe_shape
from profkit.analysis.failures import tuning_failures
from profkit.analysis.verify import repair_picks, verify_plan
from profkit.bench.routing import default_routings, imbalance, route
from profkit.bench.steer import Steering, tactic_from_text

MOE = DATA / "h200-moe"
QWEN_R0 = MOE / "qwen3-30b-a3b-r0"


# -- routings ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tuner", "balanced", "zipf-0.3", "hot-4"])
def test_a_routing_is_reproducible_from_its_seed_and_gives_distinct_experts_per_token(name):
    a, b = route(name, 300, 128, 8, seed=7), route(name, 300, 128, 8, seed=7)
    assert torch.equal(a.ids, b.ids) and torch.equal(a.scales, b.scales)
    assert a.ids.dtype == torch.int32 and a.scales.dtype == torch.float32
    assert all(len(set(row.tolist())) == 8 for row in a.ids)
    assert torch.allclose(a.scales.sum(-1), torch.ones(300))


def test_skewed_routings_change_with_the_seed_and_the_tuner_routing_does_not():
    assert not torch.equal(route("zipf-0.3", 64, 128, 8, seed=0).ids, route("zipf-0.3", 64, 128, 8, seed=1).ids)
    assert torch.equal(route("tuner", 64, 128, 8, seed=0).ids, route("tuner", 64, 128, 8, seed=1).ids)


def test_routings_order_by_skew_as_named():
    skew = {name: route(name, 4096, 128, 8).imbalance(128) for name in default_routings(8)}
    assert skew["balanced"] == 1.0
    assert 1.0 < skew["tuner"] < skew["zipf-0.3"] < skew["hot-4"]
    assert imbalance(torch.tensor([[0, 1], [0, 2]]), 4) == 2.0  # expert 0: 2 of mean 1


@pytest.mark.parametrize("name", ["zipf-0", "hot-128", "hot-x", "uniform"])
def test_an_unknown_or_impossible_routing_is_refused_by_name(name):
    with pytest.raises(ValueError, match="unknown routing"):
        route(name, 8, 128, 8)


# -- capture, shapes, tactics ------------------------------------------------------------------
def _capture(runner=None, m=300):
    with profkit.capture(tune=True) as cap:
        M.sm90_moe(m, runner)
    return cap


def test_capture_keeps_nested_tactics_as_json_and_labels_the_moe_shape(tuner):
    cap = _capture()
    tactics = set(cap.candidates["tactic"])
    assert "-1" in tactics and "[64, [[64, 128], 1], [[64, 128], [1, 1], false]]" in tactics
    assert set(cap.winners["bucket"]) == {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
    label = moe_shape(cap.winners["profile"].iloc[-1])
    assert label == f"E={M.NUM_EXPERTS} top_k={M.TOP_K} H={M.HIDDEN} I={M.INTERMEDIATE}"
    # A bucket equal to the hidden size (M = H) must not read as a GEMM's (M, K) x (K, N).
    assert gemm_shape(f"(({M.HIDDEN}, {M.HIDDEN}), ({M.HIDDEN}, 2), ({M.HIDDEN}, 2), (4, 96, 64), (4, 64, 48), "
                      f"({M.HIDDEN}, {M.HIDDEN}))") is None


def test_sm90_moe_tactics_decode_into_tiles_cluster_and_raster_in_words():
    runner, tactic = "CuteDslFusedMoESm90Runner", "[64, [[64, 256], 8], [[64, 128], [1, 2], true]]"
    fields = decode_tactic(runner, tactic)
    assert fields["tactic_kind"] == "moe_tiles"
    assert fields["tactic_tile"] == "64 | 64x256 | 64x128" and fields["tactic_cluster"] == "1x2"
    words = tactic_words(runner, tactic)
    assert "64-row tiles" in words and "swizzle" not in words and "8 M-tiles per pass" in words
    assert "cluster 1x2" in words and "along M" in words
    assert tactic_words(runner, "-1") == "the runner's default (tactic -1)"
    assert decode_tactic(runner, "[1, 2]")["tactic_kind"] == "raw"  # not its format: the raw text


def test_tactic_parts_spell_out_each_pick_and_the_default_it_runs(tuner):
    cap = _capture(M.ToySm90MoERunner(tactics=M.sm90_tactics(tile_sizes=(64,))), m=8)
    parts = moe.tactic_parts(cap.winners)
    assert len(parts) == len(cap.winners)
    default = moe.tactic_parts(cap.winners.assign(tactic="-1")).iloc[0]
    assert (default["tile"], default["gemm1_tile"], default["gemm2_tile"], default["gemm2_cluster"],
            default["gemm2_raster"], bool(default["default"])) == (128, "128x64", "128x64", "1x1", "N", True)


# -- verify plan, steering, repair through FlashInfer's loader ---------------------------------
def test_verify_plan_times_the_top_k_the_pick_and_the_default_of_moe_buckets(tuner):
    cap = _capture()
    plan = verify_plan(cap.candidates, cap.winners, sizes=[3, 300], top_k=2)
    assert set(plan["m"]) == {3, 300} and set(plan["bucket"]) == {4, 512}
    assert plan["n"].isna().all() and plan["shape"].str.startswith("E=").all()
    for _, at_m in plan.groupby("m"):
        assert at_m["winner"].sum() == 1 and at_m["default"].sum() == 1 and (at_m["tuner_rank"] <= 2).sum() >= 2


def test_repaired_moe_file_loads_in_flashinfer_and_choose_one_returns_the_nested_tuples(tuner, tmp_path):
    """Per bucket a faster candidate (nested tuple) or nothing beyond noise (back to -1)."""
    fast = {1: "[64, [[64, 64], 1], [[64, 128], [1, 1], false]]", 8: "-1",
            64: "[128, [[128, 128], 1], [[128, 64], [1, 1], false]]"}
    rows = []
    with Steering() as steering:
        for m, wanted in fast.items():
            for tactic in {wanted, "-1", "[64, [[64, 128], 1], [[64, 64], [1, 1], false]]"}:
                steering.aim(M.SM90_OP, None, tactic_from_text(tactic))
                M.sm90_moe(m)
                quick = tactic == wanted and wanted != "-1"
                rows.append({"run_id": "r", "op": M.SM90_OP, "shape": "E=4", "m": m, "bucket": m,
                             "runner": "ToySm90MoERunner", "tactic": tactic, "tuner_ms": 1.0, "tuner_rank": 1,
                             "winner": tactic != "-1", "default": tactic == "-1", "routing": "tuner",
                             "serving_ms": 0.5 if quick else 1.0, "serving_p10_ms": 0.49 if quick else 0.99,
                             "serving_p90_ms": 0.51 if quick else 1.01, "file_key": steering.calls[-1]["file_key"]})
    verify = pd.DataFrame(rows)
    # Another routing where a different tactic wins must not leak into the tuner routing's picks.
    other = verify.assign(routing="hot-4", serving_ms=1.0, serving_p10_ms=0.99, serving_p90_ms=1.01)
    src = tmp_path / "verify.parquet"
    schema.frame("verify", pd.concat([verify, other]).to_dict("records")).to_parquet(src)
    like = tmp_path / "cache.json"
    with autotune(True, cache=str(like)):
        M.sm90_moe(64)
    out = tmp_path / "repaired.json"
    args = profkit.cli.build_parser().parse_args(["repair", str(src), "--like", str(like), "--out", str(out)])
    assert args.handler(args) == 0
    stored = json.loads(out.read_text())
    assert {v[1] if isinstance(v[1], int) else json.dumps(v[1]) for k, v in stored.items() if k != "_metadata"} == {
        -1, json.dumps(json.loads(fast[1])), json.dumps(json.loads(fast[64]))}
    tuner.clear_cache()
    assert tuner.load_configs(str(out)) is True
    for m, wanted in fast.items():
        _, tactic = M.sm90_moe(m)
        assert schema.tactic_text(tactic) == wanted
        assert tactic == tactic_from_text(wanted)  # nested tuples, as the runner takes them


def test_repair_of_moe_rows_names_the_routings_when_the_one_asked_for_is_missing():
    rows = pd.DataFrame([{"run_id": "r", "op": "o", "shape": "E=4", "m": 1, "bucket": 1, "runner": "R",
                          "tactic": "-1", "winner": True, "default": True, "serving_ms": 1.0, "serving_p10_ms": 1.0,
                          "serving_p90_ms": 1.0, "file_key": "k", "routing": "balanced"}])
    with pytest.raises(profkit.ProfkitError, match="routings timed: balanced"):
        repair_picks(rows)
    assert len(repair_picks(rows, routing="balanced")) == 1


# -- a tuning that did nothing -----------------------------------------------------------------
def test_every_candidate_failing_is_reported_as_not_tuned_with_its_cause(tuner):
    cap = _capture(M.ToySm90MoERunner(failing_from=0), m=8)
    assert set(cap.winners["tactic"]) == {"-1"}  # FlashInfer kept the default, silently
    row = tuning_failures(cap.winners, cap.candidates, cap.tuning).iloc[0]
    assert (row["status"], row["tuned"], row["default_kept"]) == ("not tuned", 0, 4)
    assert "cannot be implemented" in row["cause"]
    card = winner_card(cap.candidates, op=M.SM90_OP, bucket=8)
    assert any("every candidate but the default failed" in w for w in card.warnings)


def test_some_buckets_failing_is_partly_tuned_and_a_log_without_candidates_still_counts_skips(tuner):
    cap = _capture(M.ToySm90MoERunner(tactics=M.sm90_tactics(tile_sizes=(64,)), failing_from=8), m=16)
    row = tuning_failures(cap.winners, cap.candidates, cap.tuning).iloc[0]
    assert row["status"] == "partly tuned" and row["default_kept"] == 2 and row["tuned"] == 3
    tuning = cap.tuning.assign(n_skipped=cap.tuning["n_failed"])
    no_candidates = tuning_failures(cap.winners, None, tuning).iloc[0]
    assert no_candidates["default_kept"] == 2


# -- analysis on the shipped H200 data ---------------------------------------------------------
def test_shipped_moe_runs_tuned_every_bucket_with_no_failed_candidate():
    for name in ("qwen3-30b-a3b-r0", "gpt-oss-120b-r0", "mixtral-8x7b-r0", "qwen3-30b-a3b-r2"):
        t = schema.load(MOE / name / "capture")
        row = tuning_failures(t.winners, t.candidates, t.tuning).iloc[0]
        assert (row["status"], row["buckets"], row["failed_candidates"]) == ("tuned", 20, 0), name


def test_routing_sensitivity_has_every_routing_and_m_of_the_verify_table():
    verify = pd.read_parquet(QWEN_R0 / "verify.parquet")
    s = moe.routing_sensitivity(verify)
    assert set(s["routing"]) == set(verify["routing"]) == set(default_routings(8))
    assert len(s) == verify.groupby(["routing", "m"]).ngroups
    assert (s["regret"] >= 0).all() and s["pick_is_best"].eq(s["regret"] == 0).all()


def test_step_changes_compare_every_series_label_and_predictions_line_up_per_size():
    step = pd.read_json(MOE / "qwen3-30b-a3b-step-aa" / "step.jsonl", lines=True)
    changes = moe.step_changes(step)
    assert set(changes["state"]) == {"cache", "repaired", "untuned-2"}
    r0 = schema.load(QWEN_R0 / "capture")
    verify = pd.read_parquet(QWEN_R0 / "verify.parquet")
    pred = moe.step_predictions(step, r0.winners, verify, state="cache")
    assert len(pred) == 16 and pred["layers"].eq(4).all()
    # tokens 3000 run the bucket above (3072), as FlashInfer's hybrid mapping rounds up
    assert int(pred.loc[pred["tokens"] == 3000, "bucket"].iloc[0]) == 3072


def test_step_prediction_from_hand_made_rows():
    step = pd.DataFrame({"model": "m", "phase": "decode", "tokens": 8, "layers": 2, "state": ["untuned", "cache"] * 3,
                         "label": ["untuned", "cache"] * 3, "dtype": "bf16",
                         "step_ms": [1.0, 0.8, 1.0, 0.8, 1.0, 0.8]})
    winners = pd.DataFrame({"run_id": "r", "profile": "((8, 64), (8, 2), (8, 2), (4, 96, 64), (4, 64, 48), (8, 64))",
                            "bucket": [8], "time_ms": [0.5], "default_time_ms": [0.6], "source": "profiled"})
    verify = pd.DataFrame({"shape": "E=4 top_k=2 H=64 I=48", "m": 8, "bucket": 8, "routing": "tuner",
                           "tactic": ["-1", "[t]"], "default": [True, False], "cache_choice": [False, True],
                           "serving_ms": [0.3, 0.2]})
    row = moe.step_predictions(step, winners, verify, state="cache").iloc[0]
    assert row["measured_delta_ms"] == pytest.approx(-0.2)
    assert row["predicted_capture_ms"] == pytest.approx(-0.2)  # 2 layers x (0.5 - 0.6)
    assert row["predicted_verify_ms"] == pytest.approx(-0.2)   # 2 layers x (0.2 - 0.3)
    assert bool(row["sign_agrees"]) and row["verify_over_measured"] == pytest.approx(1.0)


def test_model_summary_counts_a_cache_repaired_cache_set_without_untuned():
    """moe.sh's ``repaired`` phase: cache twice (an A/A pair) around repaired, six passes, no untuned series."""
    rng = np.random.default_rng(0)
    rows = [{"model": "m", "dtype": "bf16", "phase": "decode", "tokens": tokens, "layers": 4, "state": label[:5],
             "label": label, "pass": p, "source": "set", "step_ms": ms * (1 + rng.normal(0, 0.002))}
            for tokens, repaired_ms in ((8, 1.05), (64, 1.0)) for p in range(6)
            for label, ms in (("cache", 1.0), ("repaired", repaired_ms), ("cache-2", 1.0)) for _ in range(3)]
    runs = pd.DataFrame({"run_id": ["r"], "model": ["m"], "tune_call_s": [1.0], "folder": ["m-r0"]})
    empty_frame = pd.DataFrame(columns=["run_id", "profile", "bucket", "tactic", "time_ms"])
    row = moe.model_summary(empty_frame, empty_frame, pd.DataFrame(), pd.DataFrame(rows), runs).iloc[0]
    assert (row["repaired_vs_cache_slower"], row["repaired_vs_cache_points"]) == (1, 2)
    assert (row["aa_points"], row["aa_beyond_noise"]) == (2, 0)
    assert pd.isna(row["repaired_points"]) and pd.isna(row["repaired_slower"])  # no untuned to compare with


def test_picks_across_runs_count_distinct_picks_and_their_spread():
    profile = "((1, 64), (1, 2), (1, 2), (4, 96, 64), (4, 64, 48), (1, 64))"
    winners = pd.DataFrame({"run_id": ["a", "b", "c"], "profile": profile, "bucket": 1, "tactic": ["x", "y", "x"],
                            "source": "profiled"})
    candidates = pd.DataFrame({"run_id": "a", "bucket": 1, "tactic": ["x", "y"], "time_ms": [1.0, 1.05]})
    row = moe.picks_across_runs(winners, candidates).iloc[0]
    assert (row["runs"], row["distinct_picks"]) == (3, 2)
    assert row["spread_pct"] == pytest.approx(5.0)


# -- GPU programs without a GPU ----------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["-m", "profkit.bench.moe_sweep", "--model", "qwen3-30b-a3b", "--out", "{tmp}"],
    ["-m", "profkit", "step", "--model", "qwen3-30b-a3b", "--dtype", "bf16", "--out", "{tmp}"],
])
def test_moe_gpu_programs_exit_2_with_one_line_without_a_cuda_gpu(argv, tmp_path):
    proc = subprocess.run([sys.executable, *[a.format(tmp=tmp_path) for a in argv]], capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "a CUDA GPU is needed" in lines[0]


def test_flashinfer_autotuner_is_left_clean(tuner):
    assert AutoTuner.get() is tuner


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in MOE.glob("*/capture")))
def test_shipped_moe_captures_keep_flashinfers_argmin_and_their_provenance(folder):
    t = schema.load(MOE / folder / "capture")
    won = t.winners[t.winners["source"] == "profiled"]
    assert sorted(won["bucket"]) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 768, 1024, 1280, 1536, 1792, 2048,
                                     2560, 3072, 3584, 4096]
    best = t.candidates.groupby("profile")["time_ms"].min()
    assert (won.set_index("profile")["time_ms"] == best.reindex(won["profile"]).to_numpy()).all()
    env = t.env
    assert env["gpu"] == "NVIDIA H200" and env["flashinfer"] == "0.7.2.post1" and env["command"]


def test_the_debug_log_of_a_real_moe_tuning_reads_as_its_capture():
    from profkit.sources.logs import read_log

    log = read_log(QWEN_R0 / "debug.log")
    cap = schema.load(QWEN_R0 / "capture")
    assert len(log.candidates) == len(cap.candidates) == 1840
    both = log.winners.merge(cap.winners, on="bucket", suffixes=("_log", "_cap"))
    assert len(both) == 20 and (both["tactic_log"] == both["tactic_cap"]).all()
    cache = profkit.read_cache(QWEN_R0 / "cache.json")
    assert set(cache.winners["tactic"]) == set(cap.winners["tactic"])  # list-of-list tactics in FlashInfer's JSON


def test_advise_blocks_nested_moe_tactics_and_flashinfer_then_never_times_them(tuner, tmp_path, monkeypatch):
    """A plan of the SM90-like op: the slowest nested tactics blocked, the blocklist loaded by FlashInfer."""
    from profkit.analysis.advise import advise, autotune_arguments
    from profkit.outputs import engine_plans as writers
    from profkit.testing import cpu_autotuner

    def slow_128(runner, tactic, shapes):  # 64-row tiles win by far; the default runs a 128-row tile too
        m = shapes[0][0]
        spread = (zlib.crc32(str(tactic).encode()) % 5) / 1000  # the 64-row tactics within 0.5% of each other
        return (2.0 if tactic == -1 or tactic[0] == 128 else 1.0 + spread) * (1 + m / 100)

    with cpu_autotuner(slow_128):
        with profkit.capture(tune=True) as cap:
            M.sm90_moe(8)
    plan = advise(cap.tables())
    blocked = plan.blocklist.get(f"{M.SM90_OP}::ToySm90MoERunner", [])
    assert blocked and all(isinstance(t, list) and t[0] == 128 for t in blocked)  # nested lists, as FlashInfer's JSON
    path = tmp_path / "blocklist.json"
    path.write_text(writers.blocklist_json(plan))
    kwargs, env = autotune_arguments(plan, str(path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(AutoTuner, "_instance", None)  # FlashInfer reads the blocklist when it creates its tuner
    with cpu_autotuner(slow_128):
        with profkit.capture() as again, autotune(True, **kwargs):
            M.sm90_moe(8)
    timed = set(again.candidates["tactic"])
    assert not timed & {json.dumps(t, separators=(", ", ": ")) for t in blocked}
    assert "-1" in timed
