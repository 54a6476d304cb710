"""Invariants every shipped H200 capture must keep (data/README.md describes the sets)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import profkit
from conftest import DATA

SETS = sorted(p.parent for p in (DATA / "h200").glob("*/provenance.json"))
SHAPES = sorted(p.parent.parent for s in SETS for p in s.glob("*/capture/runs.parquet"))
PROVENANCE = ("gpu", "driver", "cuda", "torch", "flashinfer", "cudnn", "cublas", "host", "started_at", "command")


def test_the_data_issue_is_covered():
    """>= 2 ops x >= 6 distinct (N, K) shapes x all buckets, and >= 3 repeated tunings."""
    shapes = pd.concat([pd.read_parquet(s / "op_timings.parquet")[["op", "n", "k"]].drop_duplicates() for s in SHAPES])
    per_op = shapes.drop_duplicates().groupby("op").size()
    assert set(per_op.index) == {"fp8_gemm", "bf16_gemm"} and (per_op >= 6).all()
    assert len([s for s in SETS if s.name.startswith("fp8-repeat-")]) >= 3


@pytest.mark.parametrize("shape", SHAPES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_capture_invariants(shape):
    t = profkit.load(shape / "capture")
    c, w = t.candidates, t.winners
    fi = c[c["source"] == "flashinfer"]
    # every winner is a timed candidate (same profile, runner, tactic, time) or a recorded fallback
    timed = fi.set_index(["profile", "runner", "tactic"])["time_ms"]
    for row in w.itertuples():
        if row.source == "fallback":
            assert row.reason
            continue
        assert row.source == "profiled"
        assert timed.loc[(row.profile, row.runner, row.tactic)].min() == row.time_ms
    # FlashInfer's winner is the first argmin of its candidates: no candidate is strictly faster
    best = fi.groupby("profile")["time_ms"].min()
    assert (w.set_index("profile")["time_ms"] <= best.reindex(w["profile"]).values + 1e-12).all()
    assert not c.loc[c["status"] == "ok", "time_ms"].isna().any()
    assert sorted(w["bucket"]) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 768, 1024, 1280, 1536, 1792,
                                   2048, 2560, 3072, 3584, 4096]
    env = t.env
    assert all(env.get(k) for k in PROVENANCE), {k: env.get(k) for k in PROVENANCE}
    assert env["gpu"] == "NVIDIA H200" and env["flashinfer"] == "0.7.2.post1"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_op_timings_and_cache_file_are_beside_each_capture(shape):
    timings = pd.read_parquet(shape / "op_timings.parquet")
    assert set(timings["state"]) == {"untuned", "tuned"}
    assert sorted(timings["m"].unique()) == [1, 3, 24, 100, 333, 1000, 3000]
    assert (timings["time_ms_p10"] <= timings["time_ms"]).all() and (timings["time_ms"] <= timings["time_ms_p90"]).all()
    cache = json.loads((shape / "cache.json").read_text())
    entries = [k for k in cache if not k.startswith("_")]
    assert len(entries) == 20 and cache["_metadata"]["gpu"] == "NVIDIA H200"


ENGINE_LIKE = DATA / "h200-engine-like"


@pytest.mark.parametrize("capture,logs", [("capture", "logs"), ("pth-capture", "pth-logs")])
def test_engine_like_capture_agrees_with_each_ranks_debug_log(capture, logs):
    """profkit capture (prefix, and PROFKIT_CAPTURE alone) of spawned ranks on the H200 vs their own logs."""
    from profkit.bench import engine_like

    result = engine_like.check(ENGINE_LIKE / capture, ENGINE_LIKE / logs)
    ranks = sorted(int(p.stem[4:]) for p in (ENGINE_LIKE / logs).glob("rank*.log"))
    assert sorted(result["rank"].unique()) == ranks
    assert result["candidates_equal"].all() and result["winners_equal"].all()
    assert (result["capture_candidates"] > 0).all() and (result["capture_winners"] > 0).all()


def test_engine_like_capture_has_one_process_per_rank():
    t = profkit.load(ENGINE_LIKE / "capture")
    assert sorted(t.runs["rank"]) == [0, 1] and t.runs["pid"].nunique() == 2
    calls = t.tuning[t.tuning["kind"] == "call"]
    assert calls.groupby("rank")["op"].apply(sorted).tolist() == [["bf16_gemm", "fp8_gemm"]] * 2
    assert (t.winners.groupby(["rank", "op"]).size() == 10).all()  # buckets 1..512
