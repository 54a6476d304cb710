"""The tables' schema and the lossless parquet round trip."""

from __future__ import annotations

import math
import os
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


def test_sources_and_analysis_never_import_plotting():
    """Every module under profkit/sources and profkit/analysis, found on disk, imported in a fresh interpreter:
    the data flows one way (sources -> schema -> analysis -> views), so none of them loads matplotlib."""
    code = """
import importlib, pkgutil, sys
import profkit.analysis, profkit.sources
names = [m.name for pkg in (profkit.sources, profkit.analysis)
         for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
for name in names:
    importlib.import_module(name)
    assert "matplotlib" not in sys.modules, f"{name} imported matplotlib"
print(len(names))
"""
    env = {k: v for k, v in os.environ.items() if k != "PROFKIT_CAPTURE"}  # the start-up shim stays idle
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 35  # every module, not a few
