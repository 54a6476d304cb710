"""MoE-shaped tuning through FlashInfer's real AutoTuner on the CPU: capture, debug log, report, explorer.

The toy runners and TuningConfigs (profkit.testing.moe) have the shape of FlashInfer's fused MoE:
several inputs tied on the token dimension, a ConstraintSpec, ``[tile_n, config]`` list tactics,
gemm1/gemm2 ``choose_one`` calls with ``gemm_idx``, and ``rank_tactics`` inside a runner.
Public MoE log lines found on GitHub are read under tests/data/log_moe_public (see SOURCE.md there).
"""

from __future__ import annotations

import contextlib
import io
import logging

import pandas as pd
import pytest
from flashinfer.autotuner import AutoTuner, autotune
from flashinfer.jit.core import logger as flashinfer_logger

import profkit
from conftest import TEST_DATA
from profkit import testing as T
from profkit.testing import moe as M
from profkit import views
from profkit import report
from profkit import catalog

CANDIDATE_KEY = ["op", "profile", "bucket", "runner", "tactic", "time_ms", "status"]
WINNER_KEY = ["op", "profile", "bucket", "runner", "tactic", "time_ms", "status", "extras"]
FLASHINFER_FORMAT = "%(asctime)s - %(levelname)s - %(filename)s:%(lineno)d - flashinfer.jit: %(message)s"
PUBLIC = TEST_DATA / "log_moe_public"


@pytest.fixture
def tuner():
    with T.cpu_autotuner() as t:
        yield t


@contextlib.contextmanager
def flashinfer_debug_log():
    """FlashInfer's debug log of what runs inside, as FLASHINFER_LOGGING_LEVEL=debug writes it."""
    stream, level = io.StringIO(), flashinfer_logger.level
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(FLASHINFER_FORMAT))
    flashinfer_logger.addHandler(handler)
    set_level(logging.DEBUG)
    try:
        yield stream
    finally:
        flashinfer_logger.removeHandler(handler)
        set_level(level)


def set_level(level: int) -> None:
    """setLevel on FlashInfer's logger; it is not in logging's manager, so its isEnabledFor cache is ours to clear."""
    flashinfer_logger.setLevel(level)
    flashinfer_logger._cache.clear()


def sorted_rows(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return frame[columns].sort_values(columns, kind="stable").reset_index(drop=True).astype("object")


def moe_forwards():
    """One trtllm-gen-like MoE tuning call and one CUTLASS forward (gemm1 + gemm2) at 20 tokens."""
    return M.tune_trtllm_gen(20)[1], M.tune_cutlass(20)


@pytest.fixture
def captured_and_logged(tuner):
    with flashinfer_debug_log() as stream, profkit.capture() as cap:
        decided = moe_forwards()
    return cap, profkit.read_log(stream.getvalue()), decided


# -- the configs are MoE-shaped and tune for real ------------------------------------------------
def test_trtllm_gen_profiles_tie_tokens_and_constrain_the_scale(tuner):
    with profkit.capture(time_default=False) as cap:
        _, tactic = M.tune_trtllm_gen(20)
    c = cap.candidates
    assert sorted(c["bucket"].unique()) == [1, 2, 4, 8, 16, 32]  # fixed hybrid buckets up to 32, not up to M
    row = c[c["bucket"] == 8].iloc[0]
    assert row["profile"] == "((8, 64), (8, 2), (8, 2), (8, 64), (-1,))"  # constrained dim is -1 in the key
    assert set(c["tactic"]) == {"[8, 3]", "[16, 7]", "[32, 15]", "[64, 5]"}
    failed = c[c["status"] == "failed"]
    assert sorted(failed["bucket"]) == [1, 2] and failed["tactic"].eq("[64, 5]").all()
    assert failed["error"].str.contains("tile_N 64 has no launcher").all()
    assert tactic == [32, 15]  # a list tactic comes back as FlashInfer chose it
    w = cap.winners
    assert len(w) == 6 and w["tactic"].eq("[32, 15]").all() and w["extras"].eq("(2, 4, 64, 48)").all()


def test_cutlass_forward_tunes_gemm1_and_gemm2_with_their_own_tactics(tuner):
    with profkit.capture(time_default=False) as cap:
        gemm1, gemm2 = M.tune_cutlass(20)
    c = cap.candidates
    assert c.groupby("op")["call"].nunique().to_dict() == {"trtllm::fused_moe::gemm1": 1, "trtllm::fused_moe::gemm2": 1}
    tactics = c.groupby("op")["tactic"].agg(lambda s: sorted(set(s))).to_dict()
    assert tactics == {"trtllm::fused_moe::gemm1": ["0", "1", "2", "3"], "trtllm::fused_moe::gemm2": ["4", "5", "6"]}
    failed = c[c["status"] == "failed"]  # gemm_idx reached forward: only the shared-memory failure remains
    assert set(failed["op"]) == {"trtllm::fused_moe::gemm1"} and set(failed["bucket"]) == {16, 32}
    w = cap.winners.set_index(["op", "bucket"])
    assert w.loc[("trtllm::fused_moe::gemm1", 32), "tactic"] == str(gemm1)
    assert w.loc[("trtllm::fused_moe::gemm2", 32), "tactic"] == str(gemm2)
    assert int(gemm1) in range(4) and int(gemm2) in range(4, 7)


def test_same_decisions_with_and_without_capture(tuner):
    plain = moe_forwards()
    before = dict(tuner.profiling_cache.items())
    tuner.clear_cache()
    with profkit.capture():
        captured = moe_forwards()
    assert captured == plain
    assert {(k.custom_op, k.nearest_profile, k.extras): v[0] for k, v in tuner.profiling_cache.items()} == \
        {(k.custom_op, k.nearest_profile, k.extras): v[0] for k, v in before.items()}


# -- capture and FlashInfer's debug log of the same run agree ------------------------------------
def test_capture_and_debug_log_give_equal_candidates(captured_and_logged):
    cap, log, _ = captured_and_logged
    theirs = cap.candidates[cap.candidates["source"] == "flashinfer"]  # profkit's default timings never hit the log
    assert len(theirs) == 24 + 24 + 18
    pd.testing.assert_frame_equal(sorted_rows(log.candidates, CANDIDATE_KEY), sorted_rows(theirs, CANDIDATE_KEY))
    failed = log.candidates[log.candidates["status"] == "failed"]
    assert len(failed) == 4 and failed["time_ms"].isna().all()


def test_capture_and_debug_log_give_equal_winners(captured_and_logged):
    cap, log, (trtllm_tactic, cutlass_tactics) = captured_and_logged
    pd.testing.assert_frame_equal(sorted_rows(log.winners, WINNER_KEY), sorted_rows(cap.winners, WINNER_KEY))
    assert log.winners.groupby("op").size().to_dict() == {
        "flashinfer::toy_trtllm_moe": 6, "trtllm::fused_moe::gemm1": 6, "trtllm::fused_moe::gemm2": 6}
    last = log.winners[log.winners["bucket"] == 32].set_index("op")["tactic"]
    assert last["flashinfer::toy_trtllm_moe"] == profkit.schema.tactic_text(trtllm_tactic)
    assert (last["trtllm::fused_moe::gemm1"], last["trtllm::fused_moe::gemm2"]) == tuple(map(str, cutlass_tactics))


def test_debug_log_counts_calls_like_the_capture(captured_and_logged):
    cap, log, _ = captured_and_logged
    key = ["op", "n_candidates", "n_failed"]
    calls = lambda t: t[t["kind"] == "call"]  # noqa: E731
    pd.testing.assert_frame_equal(sorted_rows(calls(log.tuning), key), sorted_rows(calls(cap.tuning), key))


# -- rank_tactics inside a runner's get_valid_tactics (unified MoE layer) -------------------------
def test_rank_tactics_inside_get_valid_tactics_is_captured_with_its_parent(tuner):
    with profkit.capture(time_default=False) as cap:
        _, tactic = M.tune_unified(8)
    calls = cap.tuning[cap.tuning["kind"] == "call"].set_index("op")
    assert calls.loc["moe_toy_cutlass_gemm1", "api"] == calls.loc["moe_toy_cutlass_gemm2", "api"] == "rank_tactics"
    outer = calls.loc["moe_toy_cutlass", "call"]
    assert calls.loc["moe_toy_cutlass_gemm1", "parent_call"] == calls.loc["moe_toy_cutlass_gemm2", "parent_call"] == outer
    c = cap.candidates
    assert c.groupby("op").size().to_dict() == {"moe_toy_cutlass": 4, "moe_toy_cutlass_gemm1": 4,
                                                "moe_toy_cutlass_gemm2": 3}
    pairs = c.loc[c["op"] == "moe_toy_cutlass", "tactic"].tolist()
    assert len(set(pairs)) == 4 and all(p.startswith("[") for p in pairs)  # the k=2 x k=2 compound tactics
    w = cap.winners.set_index("op")
    assert w.loc["moe_toy_cutlass", "tactic"] == profkit.schema.tactic_text(tactic)
    stage = w.loc["moe_toy_cutlass_gemm1"]  # rank_tactics' best is FlashInfer's cached winner for the stage
    gemm1 = c[c["op"] == "moe_toy_cutlass_gemm1"]
    assert stage["tactic"] == gemm1.loc[gemm1["time_ms"].idxmin(), "tactic"]


# -- report and explorer on a MoE capture ---------------------------------------------------------
@pytest.fixture
def saved_moe_capture(tuner, tmp_path):
    with profkit.capture() as cap:
        moe_forwards()
    cap.save(tmp_path / "moe" / "capture")
    return tmp_path


def test_report_builds_on_a_moe_capture(saved_moe_capture, tmp_path_factory):
    data = catalog.open(saved_moe_capture)
    assert set(data.tables.winners["op"]) == {"flashinfer::toy_trtllm_moe", "trtllm::fused_moe::gemm1",
                                              "trtllm::fused_moe::gemm2"}
    out = tmp_path_factory.mktemp("moe_report")
    files = report.build_report(data, out, formats=("png",), progress=False)
    names = {p.name for p in files}
    assert {"index.md", "index.html", "tactic_map.png", "candidates.png"} <= names
    md = (out / "index.md").read_text()
    for op in ("trtllm::fused_moe::gemm1", "trtllm::fused_moe::gemm2", "flashinfer::toy_trtllm_moe"):
        assert op in md


def test_explorer_builds_on_a_moe_capture(saved_moe_capture):
    tables = profkit.load(saved_moe_capture / "moe" / "capture")
    with pytest.warns(UserWarning, match="candidates omitted: their time_ms is not finite"):  # the toy OOM tactics
        ex = views.explorer(tables)
        assert set(ex.op.options) == {"flashinfer::toy_trtllm_moe", "trtllm::fused_moe::gemm1",
                                      "trtllm::fused_moe::gemm2"}
        ex.op.value = "flashinfer::toy_trtllm_moe"
        ex.bucket.value = 1
    assert "WinnerCard flashinfer::toy_trtllm_moe  bucket=1" in ex.card.value and not ex.status.value
    assert "[32, 15]" in ex.card.value and "[64, 5]" in ex.table.value
    ex.op.value = "trtllm::fused_moe::gemm2"
    ex.bucket.value = 32
    assert "ToyCutlassMoERunner" in ex.table.value and ex.image.value[:4] == b"\x89PNG"


# -- list tactics through FlashInfer's cache file ------------------------------------------------
def test_cache_file_round_trip_keeps_moe_winners(tuner, tmp_path):
    """FlashInfer writes [32, 15] as a JSON list and reads it back as the tuple (32, 15): same winner text."""
    path = str(tmp_path / "moe.json")
    key = ["op", "profile", "runner", "tactic", "extras"]
    with profkit.capture(time_default=False) as tuned, autotune(True, cache=path):
        moe_forwards()
    tuner.clear_cache()
    with profkit.capture(tune=True, cache=path) as replayed:
        trtllm = AutoTuner.get().choose_one("flashinfer::toy_trtllm_moe", [M.ToyTrtllmGenMoERunner()],
                                            M.trtllm_gen_config(), M.trtllm_gen_inputs(20))
        M.cutlass_fused_moe(M.ToyCutlassMoERunner(), M.cutlass_inputs(20))
    assert trtllm[1] == (32, 15)  # FlashInfer's _json_to_tactic: lists come back as tuples
    assert replayed.candidates.empty and replayed.winners["source"].eq("cache_file").all()
    from_file = profkit.read_cache(path).winners
    assert len(tuned.winners) == 18
    for other in (replayed.winners, from_file):
        pd.testing.assert_frame_equal(sorted_rows(other, key), sorted_rows(tuned.winners, key))


# -- what the debug log of a unified-layer run can say -------------------------------------------
def test_debug_log_keeps_ranking_candidates_out_of_the_outer_op(tuner):
    """rank_tactics logs candidates but no "chosen runner" line: the outer op must get only its own rows."""
    with flashinfer_debug_log() as stream, profkit.capture(time_default=False) as cap:
        M.tune_unified(8)
    log = profkit.read_log(stream.getvalue())
    outer = "moe_toy_cutlass"
    key = ["runner", "tactic", "time_ms", "status"]
    pd.testing.assert_frame_equal(sorted_rows(log.candidates[log.candidates["op"] == outer], key),
                                  sorted_rows(cap.candidates[cap.candidates["op"] == outer], key))
    stage = log.candidates[log.candidates["runner"] == "ToyCutlassMoERunner"]
    assert len(stage) == 7 and stage["op"].isna().all()  # the log cannot name their op: kept, op missing


# -- public MoE autotuner log lines (tests/data/log_moe_public/SOURCE.md) ------------------------
def read_public(name: str) -> profkit.Tables:
    log = profkit.read_log(PUBLIC / name)
    assert "unreadable" not in set(log.report["status"])  # every line read, ignored or named foreign
    return log


@pytest.mark.parametrize("name,profiles,elapsed_s", [("vllm_pr50942_before.log", 10, 106.0),
                                                     ("vllm_pr50942_after.log", 21, 107.0)])
def test_public_vllm_bar_gives_op_profiles_and_elapsed(name, profiles, elapsed_s):
    log = read_public(name)
    assert log.candidates.empty and log.winners.empty  # a bar names no runner or tactic
    call = log.tuning[log.tuning["kind"] == "call"]
    assert call["op"].tolist() == ["flashinfer::trtllm_fp4_block_scale_moe"]
    assert call["n_profiles"].tolist() == [profiles] and call["bar_elapsed_s"].tolist() == [elapsed_s]


def test_public_fallback_line_names_the_moe_op_and_its_shapes():
    """0.6.x wrote "[AutoTunner]: Using fallback tactic ..." at INFO: a tuned config was not found."""
    log = read_public("flashinfer_pr2640_fallback.log")
    event = log.events[log.events["kind"] == "fallback_call"]
    assert event["op"].tolist() == ["flashinfer::trtllm_fp8_block_scale_moe"]
    assert event["shapes"].item().startswith("(torch.Size([1024, 4096]), torch.Size([1024, 512]), torch.Size([0])")
    assert log.candidates.empty and log.winners.empty


def test_public_pytest_output_keeps_the_start_and_ignores_cubin_loads():
    log = read_public("flashinfer_pr2882_trtllm_gen_test.log")
    assert log.events["kind"].tolist() == ["tuning_start"]
    assert str(log.events["logged_at"].item()) == "2026-03-24 12:42:51,264"
    ignored = log.report[log.report["status"] == "ignored"]
    assert ignored["lines"].sum() == 4 and ignored["example"].str.startswith("Loading from").all()


def test_public_sglang_seed_run_spans_the_autotune():
    """SGLang PR #12306 (B200, gpt-oss-120b): FlashInfer's start and end around SGLang's own two lines."""
    log = read_public("sglang_pr12306_b200.log")
    times = log.events.set_index("kind")["logged_at"].astype(str)
    assert (times["tuning_start"], times["tuning_end"]) == ("2025-10-29 02:42:01,952", "2025-10-29 02:42:57,165")
    assert log.report.set_index("status").loc["foreign", "lines"] == 2
    assert log.candidates.empty and log.winners.empty


def test_public_vllm_worker_log_has_the_cutlass_gemm1_skips():
    log = read_public("sparkrun_issue175_cutlass_moe.log")
    assert set(log.tuning["op"]) == {"fp4_gemm", "trtllm::fused_moe::gemm1"}
    skipped = log.events[log.events["kind"] == "skipped_tactics"]
    assert len(skipped) == 3 and skipped["op"].eq("trtllm::fused_moe::gemm1").all() and skipped["count"].eq(4).all()
    assert log.candidates.empty and log.winners.empty


def test_public_vllm_worker_log_is_one_process_and_one_gemm1_call():
    log = read_public("sparkrun_issue175_cutlass_moe.log")
    assert len(log.runs) == 1
    gemm1 = log.tuning[(log.tuning["kind"] == "call") & (log.tuning["op"] == "trtllm::fused_moe::gemm1")]
    assert gemm1["n_profiles"].tolist() == [5]
    skipped = log.events[log.events["kind"] == "skipped_tactics"]
    assert skipped["call"].nunique() == 1 and skipped["run_id"].nunique() == 1


def test_public_vllm_two_finished_bars_are_two_calls():
    log = read_public("sparkrun_issue175_cutlass_moe.log")
    fp4 = log.tuning[(log.tuning["kind"] == "call") & (log.tuning["op"] == "fp4_gemm")]
    assert sorted(fp4["bar_elapsed_s"]) == [1.0, 3.0] and fp4["n_profiles"].tolist() == [22, 22]
