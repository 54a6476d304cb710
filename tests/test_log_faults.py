"""read_log under the faults of issue 18 (items 6 and 11): OOM in the first bucket, a damaged timestamp,
many distinct profiles in one call, and unprefixed processes interleaved in one file."""

from __future__ import annotations

import random

import pytest

import profkit
from conftest import TEST_DATA
from profkit import testing as T
from profkit.sources.logs.reader import WINNER_NOT_FOUND
from test_moe import flashinfer_debug_log

RANKS = TEST_DATA / "log_interleaved_ranks"
CPU_LOG = TEST_DATA / "log_cpu_failures" / "failures.stderr.log"


def test_oom_in_the_first_bucket_gives_fallback_winners_like_the_capture():
    """FlashInfer's debug log of a call that runs out of memory at its first profile: no winner line at all."""
    with T.cpu_autotuner(), flashinfer_debug_log() as stream, profkit.capture() as cap:
        T.tune("toy_oom", [T.ToyOomRunner(oom_at=1)], 16)
    log = profkit.read_log(stream.getvalue())
    assert (log.winners["source"] == "fallback").all() and (log.winners["reason"] == "oom_abort").all()
    assert sorted(log.winners["bucket"]) == sorted(cap.winners["bucket"]) and len(log.winners) > 1
    assert log.tuning.loc[log.tuning["kind"] == "call", "status"].tolist() == ["oom_abort"]


def test_a_damaged_timestamp_costs_only_its_own_times():
    lines = CPU_LOG.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "profiling chosen runner" in line)
    lines[at] = lines[at][:15] + "x" + lines[at][16:]  # "21:5x:16,807"
    damaged, whole = profkit.read_log("".join(lines)), profkit.read_log(CPU_LOG.read_text())
    for table in ("candidates", "winners"):
        assert len(getattr(damaged, table)) == len(getattr(whole, table))
    assert damaged.winners["time_ms"].equals(whole.winners["time_ms"])
    spans = damaged.tuning["wall_s"].isna().sum() - whole.tuning["wall_s"].isna().sum()
    assert 1 <= spans <= 3  # the profile it ends, its call, the next profile it starts


def test_many_distinct_generated_profiles_are_one_call():
    head = "2026-12-02 21:08:33,061 - DEBUG - autotuner.py:3328 - flashinfer.jit: [Autotuner]: generated profile: "
    profiles = [f"OptimizationProfile(shapes=[[StaticDim(val={m}), StaticDim(val=64)]], tensor_initializers=[None])"
                for m in range(1, 20_001)]
    log = profkit.read_log("".join(f"{head}{p}\n" for p in profiles))
    call = log.tuning[log.tuning["kind"] == "call"]
    assert call["n_profiles"].tolist() == [len(profiles)]
    again = profkit.read_log("".join(f"{head}{p}\n" for p in profiles[:3] + profiles[:2]))
    assert again.tuning.loc[again.tuning["kind"] == "call", "n_profiles"].tolist() == [3, 2]


@pytest.mark.parametrize("seed", range(5))
def test_unprefixed_interleaved_processes_flag_every_winner_time_they_lose(seed):
    """A winner finds its candidates across another process's lines; a time it cannot find is flagged."""
    ranks = [(RANKS / f"rank{r}.log").read_text().splitlines(keepends=True) for r in (0, 1)]
    rng, merged = random.Random(seed), []
    while any(ranks):
        merged.append(rng.choice([q for q in ranks if q]).pop(0))
    log = profkit.read_log("".join(merged))
    alone = sum(profkit.read_log(RANKS / f"rank{r}.log").winners["time_ms"].notna().sum() for r in (0, 1))
    lost = alone - log.winners["time_ms"].notna().sum()
    report = log.report.set_index("reason")["lines"]
    flagged = sum(int(report.get(reason, 0)) for reason in
                  (WINNER_NOT_FOUND, "winner does not match the profile of the candidates before it"))
    assert lost <= flagged
