"""profkit report: the pages, the figures and the CLI wiring, on the shipped H200 data."""

from __future__ import annotations

import re
import time

import pytest

from profkit import analysis
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
                "rank_divergence", "op_timings", "step_change", "step_times_llama3-8b_bf16", "step_times_llama3-8b_fp8",
                "step_times_qwen2.5-32b_bf16", "step_times_qwen2.5-32b_fp8"):
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


def test_markdown_has_step_figures_and_the_break_even_section(built):
    out, _, _ = built
    md = (out / "index.md").read_text()
    for model, dtype in (("llama3-8b", "bf16"), ("llama3-8b", "fp8"), ("qwen2.5-32b", "bf16"), ("qwen2.5-32b", "fp8")):
        assert f"![Decoder step time per state: {model} {dtype}](step_times_{model}_{dtype}.png)" in md
    section = md.split("## When does tuning pay for itself?")[1].split("\n## ")[0]
    assert "Only sizes where tuned is faster beyond noise are listed" in section
    assert ("- qwen2.5-32b bf16: tuning 172.2 s, saves time beyond noise at 4 of 16 sizes, breaking even after "
            "3.71e+06-9.66e+06 steps (1.3-4 h of serving at that size); slower beyond noise at 0.") in section
    assert "- qwen2.5-32b fp8: tuning 153.0 s, saves time beyond noise at 0 of 16 sizes; slower beyond noise at 5." in section
    assert "(llama3-8b has 32, qwen2.5-32b has 64)" in section
    assert ("| model | dtype | phase | tokens | untuned_ms | tuned_ms | delta_ms | delta_pct | noise_ms | tuning_s | "
            "steps_to_break_even | serving_s_to_break_even |") in section
    assert "| qwen2.5-32b | bf16 | decode | 8 | 1.306 | 1.26 | -0.04646 | -3.557 | 0.001776 | 172.2 | 3705708.9 | 4668.4 |" in section
    assert "| qwen2.5-32b | fp8 |" not in section
    # The step table now holds every state against untuned, not only tuned.
    step_table = md.split("## Decoder step change")[1].split("\n## ")[0]
    assert all(f"| {state} |" in step_table for state in ("tuned", "cache", "torch"))


def test_break_even_rows_agree_with_the_capture_and_the_step_rows():
    data = report.collect(DATA / "h200" / "step")
    r = report.analyse(data)
    be = r.step_break_even
    assert len(be) == 12 and (be["delta_ms"] < -be["noise_ms"]).all()
    calls = analysis.tuning_breakdown(data.tables.tuning, by="call")
    spent = calls.groupby("run_id")["wall_s"].sum()
    assert len(r.step_tuning) == 4
    for model, dtype, tuning_s in r.step_tuning[["model", "dtype", "tuning_s"]].itertuples(index=False):
        assert tuning_s == pytest.approx(spent[data.step_captures[(model, dtype)]])
    assert be["steps_to_break_even"].to_numpy() == pytest.approx(be["tuning_s"] * 1e3 / -be["delta_ms"])
    assert be["serving_s_to_break_even"].to_numpy() == pytest.approx(be["steps_to_break_even"] * be["tuned_ms"] / 1e3)
    rows = r.step_rows
    for row in be.itertuples(index=False):
        mine = rows[(rows["model"] == row.model) & (rows["dtype"] == row.dtype) & (rows["phase"] == row.phase)
                    & (rows["tokens"] == row.tokens)]
        assert mine.loc[mine["state"] == "tuned", "step_ms"].median() == pytest.approx(row.tuned_ms)
        assert mine.loc[mine["state"] == "untuned", "step_ms"].median() == pytest.approx(row.untuned_ms)


def test_headline_counts_later_runs_tuning_time():
    """Two ranks tuning the same shapes: the first rank's call heads the line, the other rank's is not hidden."""
    data = report.collect(DATA / "h200-engine-like" / "capture")
    lines = report.headline(data, report.analyse(data))
    bf16 = next(line for line in lines if line.startswith("Tuning one bf16_gemm call"))
    assert "profiled all 10 buckets took 35.5 s over 1 call;" in bf16
    assert bf16.endswith("Later runs (repeats, other ranks): 1 full call, 14.8 s.")
    assert "further call" not in bf16  # no call re-profiled part of the buckets
