"""Many runs of one bucket: the catalogue reads the folders holding a first run whole and every run as DuckDB
reductions (profkit.catalog.reduced); the report's repeat and rank questions answered from those equal the
in-memory path, and the report says how many runs were read each way."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from test_ranks import _fleet

RUNS = 5


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A five-rank fleet of the engine-like capture's two processes: read whole, and with at most two runs of a
    bucket read whole (the other three as reductions)."""
    from profkit import catalog
    from profkit.catalog import reduced
    from profkit.report import build_model

    fleet = _fleet(tmp_path_factory.mktemp("fleet"), RUNS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        whole = build_model(catalog.open(fleet))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(reduced, "MAX_DETAILED_RUNS", 2)
            return whole, build_model(catalog.open(fleet))


def _equal(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns) and len(got) == len(want) > 0
    for column in want.columns:
        a, b = got[column], want[column]
        if pd.api.types.is_float_dtype(b):
            np.testing.assert_allclose(a.to_numpy(dtype=float), b.to_numpy(dtype=float), rtol=1e-9, err_msg=column)
        else:
            assert a.astype(str).tolist() == b.astype(str).tolist(), column


def test_the_first_run_is_read_whole_and_every_run_reduced(models):
    whole, reduced = models
    assert whole.catalog.reductions is None
    r = reduced.catalog.reductions
    assert r.detailed == ("fleet-r00000",) and r.reduced == tuple(f"fleet-r{i:05d}" for i in range(1, RUNS))
    assert len(reduced.catalog.runs) == RUNS and set(reduced.catalog.tables.candidates["run_id"]) == {"fleet-r00000"}
    assert len(r.decisions) == len(whole.results.winners)
    assert r.timings["min_ms"].gt(0).all() and set(r.timings["run_id"].astype(str)) == set(whole.catalog.runs["run_id"])


def test_the_report_says_how_many_runs_were_read_each_way(models):
    from profkit import report
    from profkit.report._detail import reduced_line

    whole, reduced = models
    line = reduced_line(reduced.data)
    assert "1 run read whole" in line and f"{RUNS - 1} runs read only as reductions" in line
    ctx = report.ReportContext(data=reduced.data, results=reduced.results, gpus=reduced.gpus, ranks=reduced.ranks)
    assert line in report.repeats_section(ctx).text and line in report.provenance_section(ctx).text
    assert reduced_line(whole.data) == ""


def test_the_repeat_and_rank_answers_equal_the_in_memory_path(models):
    whole, reduced = models
    assert reduced.results.first_runs == whole.results.first_runs == ["fleet-r00000"]
    for field in ("noise", "stability", "ranks", "diff", "speedups"):
        _equal(getattr(reduced.results, field), getattr(whole.results, field))
    assert (whole.results.stability["n_distinct"] > 1).any() and (~whole.results.ranks["agree"]).any()
    keep = ["run_id", "rank", "call", "op", "shape", "profile", "bucket", "runner", "tactic", "time_ms", "default_ms",
            "noise_pct"]
    _equal(reduced.results.winners[keep], whole.results.winners[keep])
    gpu = whole.gpus[0]
    for field in ("tuners", "shapes", "agreement", "picks", "tunings", "groups", "slow"):
        _equal(getattr(reduced.ranks[gpu], field), getattr(whole.ranks[gpu], field))


def test_the_shipped_data_is_read_whole(shipped_whole):
    from profkit.catalog.reduced import MAX_DETAILED_RUNS

    assert shipped_whole.reductions is None and MAX_DETAILED_RUNS >= 11  # its most runs of one bucket: 11


def test_the_picks_figure_is_left_out_with_why_past_its_rows(models, monkeypatch):
    from profkit import report
    from profkit.report import _ranks

    _, reduced = models
    ctx = report.ReportContext(data=reduced.data, results=reduced.results, gpus=reduced.gpus, ranks=reduced.ranks)
    assert [f.name for f in report.ranks_section(ctx).figures] == ["rank_picks_nvidia-h200"]
    monkeypatch.setattr(_ranks, "MAX_PICK_ROWS", RUNS)
    section = report.ranks_section(ctx)
    assert section.figures == () and len(section.omitted) == 1
    assert [t.name for t in section.tables] == [f"rank_{n}_nvidia-h200" for n in ("shapes", "agreement", "groups", "speed")]
    assert "not drawn: one row per tuner and shape would be" in section.omitted[0]
    assert "rank_agreement_nvidia-h200.csv" in section.omitted[0]
