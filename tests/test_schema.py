"""The tables' schema and the lossless parquet round trip."""

from __future__ import annotations

import math
import subprocess
import sys

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


def test_sources_never_import_plotting():
    code = ("import sys, profkit, profkit.sources.capture, profkit.sources.env, profkit.schema;"
            "assert 'matplotlib' not in sys.modules, 'sources imported matplotlib'")
    subprocess.run([sys.executable, "-c", code], check=True)
