"""profkit.read_log on real FlashInfer autotuner logs posted in public FlashInfer, SGLang and vLLM threads.

Each tests/data/public_logs/<repo>_<number>_<what>.log holds the lines as posted (its .src names the
thread, the date and which lines were taken); the facts checked are read off each file by eye.
"""

from __future__ import annotations

import pandas as pd
import pytest

import profkit
from conftest import TEST_DATA

PUBLIC = TEST_DATA / "public_logs"
LOGS = sorted(PUBLIC.glob("*.log"))


def read(name: str) -> profkit.Tables:
    return profkit.read_log(PUBLIC / f"{name}.log")


def kinds(log) -> dict[str, int]:
    return log.events["kind"].value_counts().to_dict()


def lines(log, status: str) -> int:
    return int(log.report.loc[log.report["status"] == status, "lines"].sum())


@pytest.mark.parametrize("path", LOGS, ids=[p.stem for p in LOGS])
def test_every_public_log_reads_and_names_its_source(path):
    log = profkit.read_log(path)
    assert not (log.report["status"] == "unreadable").any()
    src = dict(line.split(": ", 1) for line in path.with_suffix(".src").read_text().splitlines())
    assert src["source"].startswith("https://github.com/") and src["source"].rstrip("/").endswith(path.stem.split("_")[1])
    assert {"title", "posted", "lines"} <= set(src)


def test_cache_saved_then_loaded_flashinfer_2554():
    """Two benchmark runs: the first tunes and saves 11 configs, the second loads them; INFO lines only."""
    log = read("flashinfer_2554_cache_save_load")
    assert kinds(log) == {"tuning_start": 2, "tuning_end": 1, "cache_saved": 1, "cache_loaded": 1}
    saved, loaded = (log.events[log.events["kind"] == k].iloc[0] for k in ("cache_saved", "cache_loaded"))
    assert (saved["count"], saved["path"], saved["detail"]) == (11, "autotune_cache.json", "11 new, 0 from previous config")
    assert (loaded["count"], loaded["path"], loaded["line"]) == (11, "autotune_cache.json", 11)
    assert log.candidates.empty and log.winners.empty
    assert lines(log, "foreign") == 5  # two "##" notes, two shell commands, the [PERF] line


def test_pytest_captured_stderr_with_a_leading_space_flashinfer_4163():
    start = read("flashinfer_4163_stderr_start")
    assert kinds(start) == {"tuner_init": 1, "tuning_start": 1}
    assert start.events.loc[start.events["kind"] == "tuner_init", "detail"].tolist() == ["False"]
    assert lines(start, "foreign") == 2  # pytest's error line and its "Captured stderr call" rule
    log = read("flashinfer_4163_cutlass_fp4_candidates")
    c = log.candidates
    assert c["runner"].tolist() == ["CutlassFp4GemmRunner"] * 2 and c["tactic"].tolist() == ["19", "20"]
    assert c["time_ms"].tolist() == [0.012118399888277055, 0.012188799679279327] and (c["status"] == "ok").all()
    assert c["shapes"].unique().tolist() == ["((512, 3072), (3072, 6144), (512, 384), (384, 6144), (), (0,), "
                                             "(512, 6144), (0,), (0,), (33554432,))"]
    assert c["op"].isna().all() and log.winners.empty  # no winner line in the excerpt names the op
    assert c["line"].tolist() == [2, 4] and lines(log, "ignored") == 3  # the cold-L2 lines


def test_nested_vllm_prefixes_name_the_worker_flashinfer_2800():
    """vLLM's multiproc executor nests its workers' prefixes: both are the process's, not foreign text."""
    log = read("flashinfer_2800_worker_failed_tactic")
    failed = log.candidates.iloc[0]
    assert len(log.candidates) == 1 and (failed["runner"], failed["tactic"], failed["status"]) == \
        ("MoERunner", "[32, 15]", "failed")
    assert failed["error"].startswith("Error in function 'run' at <REDACTED_PATH>/trtllm_fused_moe_routing_renormalize")
    assert log.runs[["stream", "pid"]].values.tolist() == [["(Worker pid=4178717) (Worker_DP0_EP0 pid=4178717)",
                                                            4178717]]
    assert kinds(log) == {"tuning_end": 1}
    assert lines(log, "foreign") == 5  # the five ERROR lines of the traceback, nothing of the two records


def test_failed_tactic_with_a_stack_trace_flashinfer_2077():
    log = read("flashinfer_2077_sm120_failed_tactic")
    failed = log.candidates.iloc[0]
    assert len(log.candidates) == 1 and (failed["runner"], failed["tactic"], failed["status"]) == ("MoERunner", "15", "failed")
    assert "Failed to initialize cutlass TMA WS grouped gemm" in failed["error"]
    assert log.runs[["stream", "pid"]].values.tolist() == [["(Worker_PP0 pid=38385)", 38385]]
    assert lines(log, "foreign") == 2  # the stack trace's frames 1 and 2


def test_bars_without_debug_lines_vllm_54794_and_sglang_29595():
    """A bar is a tuning call when nothing else was logged: its op, profile count and tqdm's elapsed time."""
    calls = read("vllm_54794_moe_bar").tuning
    plain = calls[calls["op"] == "flashinfer::trtllm_fp4_block_scale_moe"].iloc[0]
    assert (plain["n_profiles"], plain["bar_elapsed_s"]) == (22, 6 * 60 + 58)  # 12/22 [06:58<...]
    assert len(calls) == 2  # as posted, the first render's op carries markdown escapes: another op name
    sglang = read("sglang_29595_rank_caches")
    call = sglang.tuning.iloc[0]
    assert len(sglang.tuning) == 1 and (call["op"], call["n_profiles"], call["wall_s"]) == \
        ("flashinfer::trtllm_fp4_block_scale_moe", 10, 89.0)
    assert lines(sglang, "foreign") == 4  # SGLang's own "Running FlashInfer autotune with cache" lines, one per rank


def test_public_logs_read_together_as_one_by_one():
    """All of them as one list: the same rows as each read alone, file by file."""
    together = profkit.read_log(LOGS)
    alone = pd.concat([profkit.read_log(p).candidates for p in LOGS], ignore_index=True)
    assert together.candidates[["runner", "tactic", "status", "line"]].equals(alone[["runner", "tactic", "status", "line"]])
