"""profkit report: the pages, the figures and the CLI wiring, on the shipped H200 data."""

from __future__ import annotations

import re
import time

import pytest

from profkit.cli import main
from profkit.errors import ProfkitError
from profkit.views import report

from conftest import DATA


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    started = time.perf_counter()
    files = report.build_report(report.collect(DATA / "h200"), out, progress=False)
    return out, files, time.perf_counter() - started


def test_report_writes_every_figure_and_both_pages(built):
    out, files, seconds = built
    names = {p.name for p in files}
    for fig in ("tactic_map", "speedup", "candidates", "tuning_time", "tuning_value", "winner_flips", "diff",
                "rank_divergence", "op_timings", "step_change"):
        assert {f"{fig}.png", f"{fig}.svg"} <= names, fig
    assert {"index.md", "index.html"} <= names
    assert seconds < 60, f"report took {seconds:.1f} s"


def test_html_is_self_contained_with_provenance(built):
    out, _, _ = built
    page = (out / "index.html").read_text()
    srcs = re.findall(r"src='([^']*)'", page)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "<link" not in page and "http" not in page.split("<body>")[0]
    for fact in ("NVIDIA H200", "580.159.04", "13.0", "2.11.0+cu130", "0.7.2.post1", "91900", "13.1.0",
                 "_TGV_DEBUG_USE_CPP"):
        assert fact in page, fact


def test_markdown_links_figures_and_states_headline(built):
    out, _, _ = built
    md = (out / "index.md").read_text()
    assert "![Tactic choices](tactic_map.png)" in md
    assert re.search(r"Tuning one fp8_gemm call that profiled all 20 buckets took 19\.\d-49\.0 s", md)
    assert "buckets measured slower than the default" in md
    assert "| op | shape | tuning_s |" in md


def test_cli_only_some_figures_without_index(tmp_path, capsys):
    assert main(["report", str(DATA / "h200" / "fp8"), "--out", str(tmp_path), "--only", "tactic_map",
                 "--formats", "png", "--no-index", "--no-progress"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tactic_map.png"]
    assert capsys.readouterr().out.strip().endswith("tactic_map.png")


def test_cli_reports_errors(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "o"), "--no-progress"]) == 1
    assert "no such directory" in capsys.readouterr().err
    with pytest.raises(ProfkitError, match="unknown figure"):
        report.build_report(report.collect(DATA / "h200" / "fp8"), tmp_path, only=["nope"], progress=False)
