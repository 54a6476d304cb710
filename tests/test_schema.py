"""The tables' schema, the lossless parquet round trip, and what the tables print."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profkit
from profkit import schema
from profkit.errors import ProfkitError, SchemaError

text = st.one_of(st.none(), st.text(max_size=20))
floats = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))
ints = st.one_of(st.none(), st.integers(min_value=-(2**62), max_value=2**62))
candidate_rows = st.lists(st.fixed_dictionaries({
    "run_id": text, "op": text, "profile": text, "bucket": ints, "runner": text, "tactic": text,
    "time_ms": floats, "status": st.sampled_from(["ok", "failed", "oom", "fallback"]), "host_s": floats,
    "seq": ints, "extra_note": text,
}), max_size=15)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=candidate_rows)
def test_round_trip_is_lossless(tmp_path, rows):
    tables = profkit.Tables(candidates=schema.frame("candidates", rows), winners=schema.empty("winners"),
                            tuning=schema.empty("tuning"), runs=schema.frame("runs", [{"run_id": "r"}]))
    back = profkit.load(tables.save(tmp_path / "t"))
    pd.testing.assert_frame_equal(back.candidates, tables.candidates)
    for row, time_ms in zip(rows, back.candidates["time_ms"]):
        want = row["time_ms"]
        assert (want is None and math.isnan(time_ms)) or (want is not None and (time_ms == want or
                                                           (math.isnan(want) and math.isnan(time_ms))))


def test_missing_columns_are_named():
    with pytest.raises(SchemaError, match="table 'winners': missing columns runner, tactic"):
        schema.validate(schema.empty("winners").drop(columns=["runner", "tactic"]), "winners")


def test_wrong_dtype_is_reported():
    with pytest.raises(SchemaError, match="column 'time_ms' is not float64"):
        schema.frame("candidates", [{"time_ms": "fast"}])


def test_load_stacks_run_directories(tmp_path):
    for i in range(2):
        profkit.Tables(candidates=schema.frame("candidates", [{"run_id": f"r{i}", "op": "x"}]),
                       winners=schema.empty("winners"), tuning=schema.empty("tuning"),
                       runs=schema.frame("runs", [{"run_id": f"r{i}"}])).save(tmp_path / f"r{i}")
    both = profkit.load(tmp_path)
    assert both.candidates["run_id"].tolist() == ["r0", "r1"] and len(both.runs) == 2
    with pytest.raises(ProfkitError, match="hold 2 runs"):
        both.env
    with pytest.raises(ProfkitError, match="no profkit capture here"):
        profkit.load(tmp_path / "r0" / "nothing")


# -- what a user reads first: winners' columns and the reprs ---------------------------------------------
GOLDEN = Path(__file__).resolve().parent / "data" / "golden"


def test_winners_lead_with_what_a_user_reads_and_end_with_ids():
    cols = schema.columns("winners")
    assert cols[:8] == ("op", "profile", "bucket", "runner", "tactic", "time_ms", "default_time_ms", "speedup")
    assert cols[-3:] == ("run_id", "rank", "call")


# The column groups one frame holds: a table's own, then one reader's extras (read_bench adds two groups).
_EXTRAS = [g for g in schema.GROUPS if "." in g and not g.startswith("bench.")]
FRAMES = ([(g,) for g in schema.GROUPS if "." not in g] + [(g.partition(".")[0], g) for g in _EXTRAS]
          + [("bench", "bench.engines", "bench.step")])


@pytest.mark.parametrize("groups", FRAMES, ids="+".join)
def test_a_frame_never_holds_two_columns_of_one_name(groups):
    names = [c.name for group in groups for c in schema.columns_of(group)]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_every_group_is_in_a_frame_and_a_name_has_one_dtype_wherever_registered():
    assert {g for groups in FRAMES for g in groups} == set(schema.GROUPS)
    dtypes = {}
    for group in schema.GROUPS:
        for column in schema.columns_of(group):
            dtypes.setdefault(column.name, set()).add(column.dtype)
    assert {name: found for name, found in dtypes.items() if len(found) > 1} == {}


def test_describe_lists_a_tables_own_columns_then_each_readers_extras():
    described = schema.describe("winners")
    assert list(dict.fromkeys(described["group"])) == ["winners", "winners.log", "winners.cache"]
    assert tuple(described.loc[described["group"] == "winners", "column"]) == schema.columns("winners")
    covered = sum(len(schema.describe(g)) for g in schema.GROUPS if "." not in g)
    assert covered == sum(len(schema.columns_of(g)) for g in schema.GROUPS)
    cache = described[described["group"] == "winners.cache"].iloc[0]
    assert schema.columns_of("winners.cache")[0] == schema.Column(*cache[["column", "dtype", "meaning", "group"]])


def test_unknown_tables_and_groups_are_named():
    with pytest.raises(ProfkitError, match="unknown table 'winners.log'; profkit's tables are candidates, winners"):
        schema.empty("winners.log")
    with pytest.raises(ProfkitError, match="unknown column group 'bench.sglang'; profkit's groups are candidates"):
        schema.columns_of("bench.sglang")


def test_speedup_is_derived_from_the_two_times_and_recomputed(tmp_path):
    w = schema.frame("winners", [{"op": "g", "time_ms": 0.5, "default_time_ms": 0.6, "speedup": 99.0},
                                 {"op": "g", "time_ms": 0.5, "default_time_ms": None},
                                 {"op": "g", "time_ms": 0.0, "default_time_ms": 0.6},
                                 {"op": "g", "time_ms": float("inf"), "default_time_ms": 0.6}])
    assert w["speedup"].iloc[0] == pytest.approx(1.2) and w["speedup"].iloc[1:].isna().all()
    # A file written before the column existed gains it on load.
    old = small_tables()
    old.save(tmp_path / "t")
    pd.read_parquet(tmp_path / "t" / "winners.parquet").drop(columns="speedup").to_parquet(
        tmp_path / "t" / "winners.parquet")
    back = profkit.load(tmp_path / "t")
    pd.testing.assert_frame_equal(back.winners, old.winners)
    schema.validate(old.winners.drop(columns="speedup"), "winners")  # derived: never required of an input


def small_tables() -> profkit.Tables:
    """Two ops, a failed candidate, profkit's default timing rows, a tuning call per op."""
    cand = [{"run_id": "r", "op": op, "bucket": b, "runner": r, "tactic": t, "time_ms": ms, "status": st, "source": src}
            for op, b, r, t, ms, st, src in [
                ("fp8_gemm", 1, "Cublas", "0", 0.010, "ok", "flashinfer"), ("fp8_gemm", 1, "Cudnn", "[1]", None,
                                                                             "failed", "flashinfer"),
                ("fp8_gemm", 1, "Cublas", "-1", 0.011, "ok", "default"), ("fp8_gemm", 64, "Cublas", "0", 0.020, "ok",
                                                                         "flashinfer"),
                ("fp8_gemm", 64, "Cudnn", "[1]", 0.018, "ok", "flashinfer"), ("bf16_gemm", 8, "Tinygemm", "2", 0.030,
                                                                              "ok", "flashinfer")]]
    win = [{"run_id": "r", "op": "fp8_gemm", "bucket": 1, "runner": "Cublas", "tactic": "0", "time_ms": 0.010,
            "default_time_ms": 0.011},
           {"run_id": "r", "op": "fp8_gemm", "bucket": 64, "runner": "Cudnn", "tactic": "[1]", "time_ms": 0.018,
            "default_time_ms": 0.020},
           {"run_id": "r", "op": "bf16_gemm", "bucket": 8, "runner": "Tinygemm", "tactic": "2", "time_ms": 0.030}]
    tuning = [{"run_id": "r", "kind": "call", "op": "fp8_gemm", "call": 1, "wall_s": 128.4},
              {"run_id": "r", "kind": "profile", "op": "fp8_gemm", "call": 1, "wall_s": 60.0},
              {"run_id": "r", "kind": "call", "op": "bf16_gemm", "call": 2, "wall_s": 0.25}]
    return profkit.Tables(candidates=schema.frame("candidates", cand), winners=schema.frame("winners", win),
                          tuning=schema.frame("tuning", tuning),
                          runs=schema.frame("runs", [{"run_id": "r", "gpu": "NVIDIA H200",
                                                      "flashinfer": "0.7.2.post1"}]),
                          problems=("r/x.parquet: truncated",))


def test_tables_repr_says_what_is_inside():
    text = repr(small_tables())
    golden = GOLDEN / "tables_repr.txt"
    if os.environ.get("PROFKIT_UPDATE_GOLDEN"):
        golden.write_text(text + "\n")
    assert text + "\n" == golden.read_text(), "rerun with PROFKIT_UPDATE_GOLDEN=1 to regenerate"


def test_a_capture_prints_its_ops_buckets_and_failures(tuner):
    from profkit import testing as T

    with profkit.capture() as cap:
        T.tune("toy_gemm", [T.ToyCublasRunner(), T.ToyCudnnRunner()], m=64)
        assert repr(cap).startswith(f"Capture {cap.run_id} (recording)")
    lines = repr(cap).splitlines()
    assert lines[0].startswith(f"Capture {cap.run_id} (closed)") and "0x" not in repr(cap)
    assert lines[1].split() == ["op", "buckets", "candidates", "failed", "winners", "tuning", "median", "speedup"]
    assert lines[2].split()[:8] == ["toy_gemm", "7:", "1", "to", "64", "35", "14", "7"]  # 5 tactics x 7, 2 fail each
    assert lines[3] == "  rows: candidates 42, winners 7, tuning 8"
